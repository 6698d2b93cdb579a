#!/usr/bin/env bash
# Build versitygw (a real S3-compatible gateway; its posix backend stores objects as files) from the Go
# module pinned in this directory's go.mod, through the Go module proxy. The backup tests, the demo and
# the backup benchmark run it on loopback as their object store.
#
# Output: $PYCTRL_CACHE_DIR/versitygw/<version>/bin/versitygw (default ~/.cache/pyctrl/...).
# Idempotent: when the binary is present and was built from the current go.mod/go.sum, it returns at once.
# Prints what it builds and how far along it is; the full compiler output goes to build.log there
# (the skeleton: tools/gobuild.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../gobuild.sh"
gobuild_init versitygw "$@"
pkg="github.com/versity/versitygw/cmd/versitygw"
version="$(gobuild_version "$here/go.mod" github.com/versity/versitygw)"
out="$gobuild_cache_root/versitygw/$version/bin"
log="$gobuild_cache_root/versitygw/$version/build.log"
stamp="$out/.built-from"
want_stamp="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"

gobuild_fresh "$stamp" "$want_stamp" "$out/versitygw" && gobuild_up_to_date "versitygw $version up to date in $out" "$out"
gobuild_require_go
gobuild_lock "$out"
gobuild_fresh "$stamp" "$want_stamp" "$out/versitygw" && gobuild_up_to_date "versitygw $version built meanwhile in $out" "$out"

: > "$log"
gobuild_env
cd "$here"
say "building versitygw $version with $(go env GOVERSION) into $out (full log: $log)"
say "[1/2] downloading modules (go mod download)"
gobuild_download "$log"
gobuild_compile "[2/2]" versitygw "$pkg" "$out/versitygw" "$log" -trimpath -ldflags="-s -w"
echo "$want_stamp" > "$stamp"
[ "$gobuild_print_dir" = 0 ] || echo "$out"

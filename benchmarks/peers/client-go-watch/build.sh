#!/usr/bin/env bash
# Build the client-go informer peer of benchmarks/watch_stall_bench.py (main.go here) through the
# Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/bench/client-go-watch/<hash of go.mod, go.sum, main.go>/cg-watch
# (default ~/.cache/pyctrl/...), with its own Go build cache beside it.
# Idempotent: returns at once when the binary for the current sources exists.
# Progress goes to stderr; the binary's path is printed on stdout (the skeleton: tools/gobuild.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../../tools/gobuild.sh"
gobuild_init "client-go watch peer"
cache_root="$gobuild_cache_root/bench/client-go-watch"

hash="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)"
out="$cache_root/$hash"
bin="$out/cg-watch"
if [ -x "$bin" ]; then
  say "up to date: $bin"
  echo "$bin"
  exit 0
fi
gobuild_require_go
gobuild_lock "$out"
if [ -x "$bin" ]; then  # built by the run we waited for
  echo "$bin"
  exit 0
fi

log="$out/build.log"
: > "$log"
gobuild_env -mod=readonly
export GOCACHE="$cache_root/go-build"
cd "$here"

say "building with $(go env GOVERSION), client-go $(gobuild_version go.mod k8s.io/client-go), build cache $GOCACHE"
start=$(date +%s)
say "downloading modules (go mod download)"
gobuild_download "$log"
gobuild_compile "" cg-watch . "$bin" "$log" -trimpath -ldflags="-s -w"
say "built in $(( $(date +%s) - start ))s: $bin ($(du -h "$bin" | cut -f1))"
echo "$bin"

#!/usr/bin/env bash
# Build versitygw (a real S3-compatible gateway; its posix backend stores objects as files) from the Go
# module pinned in this directory's go.mod, through the Go module proxy. The backup tests, the demo and
# the backup benchmark run it on loopback as their object store.
#
# Output: $PYCTRL_CACHE_DIR/versitygw/<version>/bin/versitygw (default ~/.cache/pyctrl/...).
# Idempotent: when the binary is present and was built from the current go.mod/go.sum, it returns at once.
# Prints what it builds and how far along it is; the full compiler output goes to build.log there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}"
pkg="github.com/versity/versitygw/cmd/versitygw"

die() { echo "versitygw build: error: $*" >&2; exit 1; }
say() { echo "versitygw: $*" >&2; }

print_dir=0; quiet=0
for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) print_dir=1 ;;
    --quiet) quiet=1 ;;
    *) die "unknown argument '$arg' (use --print-bin-dir or --quiet)" ;;
  esac
done

command -v go >/dev/null 2>&1 || die "step 'check toolchain': no 'go' command on PATH; install Go >= 1.26"
version="$(awk '$1 == "github.com/versity/versitygw" && $2 ~ /^v/ {print $2}' "$here/go.mod" | head -n1)"
[ -n "$version" ] || die "step 'read go.mod': no github.com/versity/versitygw requirement in $here/go.mod"

out="$cache_root/versitygw/$version/bin"
log="$cache_root/versitygw/$version/build.log"
stamp="$out/.built-from"
want_stamp="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"

if [ -x "$out/versitygw" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  [ "$quiet" = 1 ] || say "versitygw $version up to date in $out"
  [ "$print_dir" = 0 ] || echo "$out"
  exit 0
fi

mkdir -p "$out"
: > "$log"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
cd "$here"
say "building versitygw $version with $(go env GOVERSION) into $out (full log: $log)"
say "[1/2] downloading modules (go mod download)"
go mod download >>"$log" 2>&1 || die "step 'go mod download' failed; see $log"
total=$(go list -deps "$pkg" 2>>"$log" | wc -l) || die "step 'go list $pkg' failed; see $log"
say "[2/2] building versitygw ($pkg, $total packages)"
step_log="$out/.build.log"
: > "$step_log"
start=$(date +%s)
go build -v -trimpath -ldflags="-s -w" -o "$out/versitygw.tmp" "$pkg" >"$step_log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' INT TERM EXIT
while kill -0 "$pid" 2>/dev/null; do
  say "  compiled $(wc -l <"$step_log") of <= $total packages, $(( $(date +%s) - start ))s elapsed"
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
done
rc=0; wait "$pid" || rc=$?
trap - INT TERM EXIT
cat "$step_log" >>"$log"; rm -f "$step_log"
[ "$rc" = 0 ] || { tail -n 20 "$log" >&2; die "step 'go build versitygw' failed (exit $rc); see $log"; }
mv "$out/versitygw.tmp" "$out/versitygw"
echo "$want_stamp" > "$stamp"
say "versitygw built in $(( $(date +%s) - start ))s ($(du -h "$out/versitygw" | cut -f1))"
[ "$print_dir" = 0 ] || echo "$out"

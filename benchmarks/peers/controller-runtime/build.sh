#!/usr/bin/env bash
# Build the controller-runtime peer (main.go here) through the Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/bench/controller-runtime/<hash of go.mod, go.sum, main.go>/cr-bench
# (default ~/.cache/pyctrl/...), with its own Go build cache beside it, so the first build is a
# cold one whatever else was built on this machine and its time is worth reporting.
# Idempotent: returns at once when the binary for the current sources exists.
# Progress goes to stderr; the binary's path is printed on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}/bench/controller-runtime"

die() { echo "controller-runtime peer build: error: $*" >&2; exit 1; }
say() { echo "controller-runtime peer: $*" >&2; }

command -v go >/dev/null 2>&1 || die "no 'go' command on PATH; install Go >= 1.26"

hash="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)"
out="$cache_root/$hash"
bin="$out/cr-bench"
if [ -x "$bin" ]; then
  say "up to date: $bin"
  echo "$bin"
  exit 0
fi

mkdir -p "$out"
log="$out/build.log"
: > "$log"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0
export GOCACHE="$cache_root/go-build"
cd "$here"

# cold: the build cache is empty, so every package is compiled (the figure the README reports)
cold=warm; [ -n "$(ls -A "$GOCACHE" 2>/dev/null)" ] || cold=cold
cr_version="$(awk '$1 == "sigs.k8s.io/controller-runtime" {print $2}' go.mod | head -n1)"
say "building with $(go env GOVERSION), controller-runtime $cr_version, build cache $GOCACHE"
start=$(date +%s)
say "downloading modules (go mod download)"
go mod download >>"$log" 2>&1 || die "step 'go mod download' failed; see $log"
total=$(go list -deps . 2>>"$log" | wc -l) || die "step 'go list' failed; see $log"
say "compiling ($total packages)"
step_log="$out/.build.log"
: > "$step_log"
go build -v -trimpath -ldflags="-s -w" -o "$bin.tmp" . >"$step_log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' INT TERM EXIT
while kill -0 "$pid" 2>/dev/null; do
  say "  compiled $(wc -l <"$step_log") of <= $total packages, $(( $(date +%s) - start ))s elapsed"
  for _ in $(seq 15); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
done
rc=0; wait "$pid" || rc=$?
trap - INT TERM EXIT
cat "$step_log" >>"$log"; rm -f "$step_log"
[ "$rc" = 0 ] || { tail -n 20 "$log" >&2; die "step 'go build' failed (exit $rc); see $log"; }
mv "$bin.tmp" "$bin"
elapsed=$(( $(date +%s) - start ))
echo "$elapsed $cold" > "$out/build-seconds"
say "built ($cold build cache) in ${elapsed}s: $bin ($(du -h "$bin" | cut -f1))"
echo "$bin"

#!/usr/bin/env bash
# Build the controller-runtime peer (main.go here) through the Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/bench/controller-runtime/<hash of go.mod, go.sum, main.go>/cr-bench
# (default ~/.cache/pyctrl/...), with its own Go build cache beside it, so the first build is a
# cold one whatever else was built on this machine and its time is worth reporting.
# Idempotent: returns at once when the binary for the current sources exists.
# Progress goes to stderr; the binary's path is printed on stdout (the skeleton: tools/gobuild.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../../tools/gobuild.sh"
gobuild_init "controller-runtime peer"
cache_root="$gobuild_cache_root/bench/controller-runtime"

hash="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)"
out="$cache_root/$hash"
bin="$out/cr-bench"
if [ -x "$bin" ]; then
  say "up to date: $bin"
  echo "$bin"
  exit 0
fi
gobuild_require_go
gobuild_lock "$out"

log="$out/build.log"
: > "$log"
gobuild_env -mod=readonly
export GOCACHE="$cache_root/go-build"
cd "$here"

# cold: the build cache is empty, so every package is compiled (the figure the README reports)
cold=warm; [ -n "$(ls -A "$GOCACHE" 2>/dev/null)" ] || cold=cold
cr_version="$(gobuild_version go.mod sigs.k8s.io/controller-runtime)"
say "building with $(go env GOVERSION), controller-runtime $cr_version, build cache $GOCACHE"
start=$(date +%s)
say "downloading modules (go mod download)"
gobuild_download "$log"
gobuild_compile "" cr-bench . "$bin" "$log" -trimpath -ldflags="-s -w"
elapsed=$(( $(date +%s) - start ))
echo "$elapsed $cold" > "$out/build-seconds"
say "built ($cold build cache) in ${elapsed}s: $bin ($(du -h "$bin" | cut -f1))"
echo "$bin"

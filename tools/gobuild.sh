#!/usr/bin/env bash
# Build one Go command pinned by a tools/<name>/go.mod, through the Go module proxy, into
# $PYCTRL_CACHE_DIR/<name>/<version>/bin (default ~/.cache/pyctrl/...). Used by tools/helm/build.sh
# and tools/promtool/build.sh.
#
#   tools/gobuild.sh NAME MODULE PACKAGE LDFLAGS [--print-bin-dir] [--quiet]
#
# NAME is the tool's directory under tools/ and the binary's name; MODULE the module whose version
# (read from go.mod) names the cache directory; PACKAGE the main package; LDFLAGS extra -ldflags,
# where @VERSION@ stands for that version.
# Concurrent runs wait for one another (flock). Idempotent: when the binary is present and was
# built from the current go.mod/go.sum/flags, it returns
# at once. Progress (a running count of compiled packages) goes to stderr; the compiler's full
# output to build.log beside bin/. A failed step is named in the error along with that log.
set -euo pipefail

[ "$#" -ge 4 ] || { echo "usage: $0 NAME MODULE PACKAGE LDFLAGS [--print-bin-dir] [--quiet]" >&2; exit 2; }
name="$1"; module="$2"; pkg="$3"; ldflags="$4"; shift 4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/$name" && pwd)"
cache_root="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}"

die() { echo "$name build: error: $*" >&2; exit 1; }
say() { echo "$name: $*" >&2; }

print_dir=0; quiet=0
for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) print_dir=1 ;;
    --quiet) quiet=1 ;;
    *) die "unknown argument '$arg' (use --print-bin-dir or --quiet)" ;;
  esac
done

version="$(awk -v m="$module" '$1 == m && $2 ~ /^v/ {print $2}' "$here/go.mod" | head -n1)"
[ -n "$version" ] || die "step 'read go.mod': no $module requirement in $here/go.mod"

out="$cache_root/$name/$version/bin"
log="$cache_root/$name/$version/build.log"
stamp="$out/.built-from"
want_stamp="$( (cat "$here/go.mod" "$here/go.sum"; echo "$pkg $ldflags") | sha256sum | cut -d' ' -f1)"

# One build at a time per version (parallel worktrees or test sessions): the others wait, then find
# it built.
mkdir -p "$out"
exec 9>"$out/.lock"
flock -n 9 || { say "another build of $name $version is running; waiting for it"; flock 9; }

if [ -x "$out/$name" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  [ "$quiet" = 1 ] || say "$module $version up to date in $out"
  [ "$print_dir" = 0 ] || echo "$out"
  exit 0
fi

command -v go >/dev/null 2>&1 || die "step 'check toolchain': no 'go' command on PATH; install Go >= 1.26"
mkdir -p "$out"
: > "$log"
say "building $name ($module $version) with $(go env GOVERSION) into $out; full log: $log"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
cd "$here"
start=$(date +%s)
say "[1/2] downloading modules (go mod download)"
go mod download >>"$log" 2>&1 || die "step 'go mod download' failed; see $log"
total=$(go list -deps "$pkg" 2>>"$log" | wc -l) || die "step 'go list $pkg' failed; see $log"
say "[2/2] compiling $pkg ($total packages)"
step_log="$out/.$name.build.log"
: > "$step_log"
go build -v -trimpath "-ldflags=-s -w ${ldflags//@VERSION@/$version}" -o "$out/$name.tmp" "$pkg" >"$step_log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' INT TERM EXIT
while kill -0 "$pid" 2>/dev/null; do
  say "  compiled $(wc -l <"$step_log") of <= $total packages, $(( $(date +%s) - start ))s elapsed"
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
done
rc=0; wait "$pid" || rc=$?
trap - INT TERM EXIT
cat "$step_log" >>"$log"; rm -f "$step_log"
[ "$rc" = 0 ] || { tail -n 20 "$log" >&2; die "step 'go build $pkg' failed (exit $rc); see $log"; }
mv "$out/$name.tmp" "$out/$name"
echo "$want_stamp" > "$stamp"
say "built in $(( $(date +%s) - start ))s ($(du -h "$out/$name" | cut -f1))"
[ "$print_dir" = 0 ] || echo "$out"

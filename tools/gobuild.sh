# shellcheck shell=bash
# The skeleton every Go build script of the project shares (sourced, not run): tools/controlplane,
# tools/versitygw, tools/helm, tools/promtool and benchmarks/peers/controller-runtime build through
# the Go module proxy into $PYCTRL_CACHE_DIR (default ~/.cache/pyctrl) with these functions.
#
#   source tools/gobuild.sh
#   gobuild_init NAME "$@"          # die/say prefixed NAME; parses --print-bin-dir / --quiet
#   gobuild_version GO_MOD MODULE   # the version MODULE is required at in GO_MOD (or dies)
#   gobuild_fresh STAMP WANT BIN... # true when every BIN is executable and STAMP holds WANT
#   gobuild_up_to_date MESSAGE DIR  # says MESSAGE (unless --quiet), prints DIR (--print-bin-dir), exit 0
#   gobuild_require_go              # dies naming the step when there is no 'go' on PATH
#   gobuild_lock DIR                # waits for any other build holding DIR/.lock (flock)
#   gobuild_env [GOFLAGS...]        # GOTOOLCHAIN=local, -buildvcs=false, CGO_ENABLED=0
#   gobuild_download LOG            # go mod download, its output to LOG
#   gobuild_compile STEP LABEL PKG DEST LOG [go build flags...]
#
# gobuild_compile runs `go build -v` in the background and says, every 30 s, how many packages are
# compiled of at most how many (`go list -deps`); the compiler's output goes to LOG; a failure dies
# naming the step and LOG (its last lines on stderr); the binary appears at DEST only when complete.
# Each script keeps its own cache path and the inputs of its stamp (what it was built from), so a
# build is redone only when those change. Concurrent runs of one build wait for one another, then
# find it built (scripts check freshness again once they hold the lock).
#
# tools/helm, tools/promtool, tools/redis_exporter and tools/dashboard-linter build one command each
# with gobuild_tool:
#   gobuild_tool NAME MODULE PACKAGE LDFLAGS "$@"
# NAME is the tool's directory under tools/ and the binary's name; MODULE the module whose version
# (read from go.mod) names the cache directory ($PYCTRL_CACHE_DIR/NAME/<version>/bin); PACKAGE the
# main package; LDFLAGS extra -ldflags, where @VERSION@ stands for that version.

gobuild_init() {
  gobuild_name="$1"; shift
  gobuild_print_dir=0; gobuild_quiet=0
  gobuild_cache_root="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}"
  local arg
  for arg in "$@"; do
    case "$arg" in
      --print-bin-dir) gobuild_print_dir=1 ;;
      --quiet) gobuild_quiet=1 ;;
      *) die "unknown argument '$arg' (use --print-bin-dir or --quiet)" ;;
    esac
  done
}

die() { echo "$gobuild_name build: error: $*" >&2; exit 1; }
say() { echo "$gobuild_name: $*" >&2; }

gobuild_version() {
  local version
  # A line of a require block ("MODULE vX") or a one-line require ("require MODULE vX").
  version="$(awk -v m="$2" '$1 == "require" {$1 = ""; $0 = $0} $1 == m && $2 ~ /^v/ {print $2}' "$1" | head -n1)"
  [ -n "$version" ] || die "step 'read go.mod': no $2 requirement in $1"
  echo "$version"
}

gobuild_fresh() {
  local stamp="$1" want="$2" bin; shift 2
  for bin in "$@"; do [ -x "$bin" ] || return 1; done
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}

gobuild_up_to_date() {
  [ "$gobuild_quiet" = 1 ] || say "$1"
  [ "$gobuild_print_dir" = 0 ] || echo "$2"
  exit 0
}

gobuild_require_go() {
  command -v go >/dev/null 2>&1 || die "step 'check toolchain': no 'go' command on PATH; install Go >= 1.26"
}

gobuild_lock() {
  mkdir -p "$1"
  exec 9>"$1/.lock"
  flock -n 9 || { say "another build is running in $1; waiting for it"; flock 9; }
}

gobuild_env() {
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false${1:+ $*}"
}

gobuild_download() {
  go mod download >>"$1" 2>&1 || die "step 'go mod download' failed; see $1"
}

gobuild_compile() {
  local step="$1" label="$2" pkg="$3" dest="$4" log="$5"; shift 5
  local total step_log start pid rc
  total=$(go list -deps "$pkg" 2>>"$log" | wc -l) || die "step 'go list $pkg' failed; see $log"
  say "$step building $label ($pkg, $total packages)"
  step_log="$(dirname "$dest")/.$(basename "$dest").build.log"
  : > "$step_log"
  start=$(date +%s)
  go build -v "$@" -o "$dest.tmp" "$pkg" >"$step_log" 2>&1 &
  pid=$!
  # shellcheck disable=SC2064  # the pid is fixed now
  trap "kill $pid 2>/dev/null || true" INT TERM EXIT
  while kill -0 "$pid" 2>/dev/null; do
    say "  $label: compiled $(wc -l <"$step_log") of <= $total packages, $(( $(date +%s) - start ))s elapsed"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  done
  rc=0; wait "$pid" || rc=$?
  trap - INT TERM EXIT
  cat "$step_log" >>"$log"; rm -f "$step_log"
  [ "$rc" = 0 ] || { tail -n 20 "$log" >&2; die "step 'go build $label' failed (exit $rc); see $log"; }
  mv "$dest.tmp" "$dest"
  say "  $label done in $(( $(date +%s) - start ))s ($(du -h "$dest" | cut -f1))"
}

gobuild_tool() {
  local name="$1" module="$2" pkg="$3" ldflags="$4"; shift 4
  gobuild_init "$name" "$@"
  local here version out log stamp want
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/$name" && pwd)"
  version="$(gobuild_version "$here/go.mod" "$module")"
  out="$gobuild_cache_root/$name/$version/bin"
  log="$gobuild_cache_root/$name/$version/build.log"
  stamp="$out/.built-from"
  want="$( (cat "$here/go.mod" "$here/go.sum"; echo "$pkg $ldflags") | sha256sum | cut -d' ' -f1)"
  gobuild_fresh "$stamp" "$want" "$out/$name" && gobuild_up_to_date "$module $version up to date in $out" "$out"
  gobuild_require_go
  gobuild_lock "$out"
  gobuild_fresh "$stamp" "$want" "$out/$name" && gobuild_up_to_date "$module $version built meanwhile in $out" "$out"
  : > "$log"
  say "building $name ($module $version) with $(go env GOVERSION) into $out; full log: $log"
  gobuild_env
  cd "$here"
  say "[1/2] downloading modules (go mod download)"
  gobuild_download "$log"
  gobuild_compile "[2/2]" "$name" "$pkg" "$out/$name" "$log" -trimpath "-ldflags=-s -w ${ldflags//@VERSION@/$version}"
  echo "$want" > "$stamp"
  [ "$gobuild_print_dir" = 0 ] || echo "$out"
}

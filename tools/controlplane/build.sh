#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) from the
# official Kubernetes and etcd Go modules pinned in this directory's go.mod, through the Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/controlplane/<k8s version>/bin (default ~/.cache/pyctrl/...).
# Idempotent: when every binary is present and was built from the current go.sum, it returns at once.
# Prints what it builds and how far along it is; the full compiler output goes to build.log there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}"

die() { echo "controlplane build: error: $*" >&2; exit 1; }
say() { echo "controlplane: $*" >&2; }

# --print-bin-dir: print the binaries' directory on stdout (progress always goes to stderr).
# --quiet: say nothing when everything is up to date.
print_dir=0; quiet=0
for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) print_dir=1 ;;
    --quiet) quiet=1 ;;
    *) die "unknown argument '$arg' (use --print-bin-dir or --quiet)" ;;
  esac
done

command -v go >/dev/null 2>&1 || die "step 'check toolchain': no 'go' command on PATH; install Go >= 1.26 (see README, 'Control plane')"

k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$here/go.mod" | head -n1)"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2}' "$here/go.mod" | head -n1)"
[ -n "$k8s_version" ] || die "step 'read go.mod': no k8s.io/kubernetes requirement in $here/go.mod"
[ -n "$etcd_version" ] || die "step 'read go.mod': no go.etcd.io/etcd/server/v3 requirement in $here/go.mod"

out="$cache_root/controlplane/$k8s_version/bin"
log="$cache_root/controlplane/$k8s_version/build.log"
stamp="$out/.built-from"
want_stamp="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"

targets=(
  "etcd|go.etcd.io/etcd/server/v3"
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler"
  "kubectl|k8s.io/kubernetes/cmd/kubectl"
)

all_present=1
for t in "${targets[@]}"; do [ -x "$out/${t%%|*}" ] || all_present=0; done
if [ "$all_present" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  [ "$quiet" = 1 ] || say "Kubernetes $k8s_version binaries up to date in $out"
  [ "$print_dir" = 0 ] || echo "$out"
  exit 0
fi

mkdir -p "$out"
: > "$log"
go_version="$(go env GOVERSION)"
say "building Kubernetes $k8s_version + etcd $etcd_version with $go_version into $out"
say "full log: $log"

ldflags_k8s=(
  "-s" "-w"
  "-X" "k8s.io/component-base/version.gitVersion=$k8s_version"
  "-X" "k8s.io/component-base/version.gitMajor=$(echo "${k8s_version#v}" | cut -d. -f1)"
  "-X" "k8s.io/component-base/version.gitMinor=$(echo "${k8s_version#v}" | cut -d. -f2)"
  "-X" "k8s.io/component-base/version.gitTreeState=clean"
  "-X" "k8s.io/component-base/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  "-X" "k8s.io/client-go/pkg/version.gitVersion=$k8s_version"
)

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
cd "$here"

say "[0/${#targets[@]}] downloading modules (go mod download)"
go mod download >>"$log" 2>&1 || die "step 'go mod download' failed; see $log"

start_all=$(date +%s)
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  name="${t%%|*}"; pkg="${t#*|}"
  total=$(go list -deps "$pkg" 2>>"$log" | wc -l) || die "step 'go list $pkg' failed; see $log"
  say "[$i/${#targets[@]}] building $name ($pkg, $total packages)"
  flags=("-trimpath")
  if [ "$name" != etcd ]; then flags+=("-ldflags=${ldflags_k8s[*]}"); else flags+=("-ldflags=-s -w"); fi
  step_log="$out/.$name.build.log"
  : > "$step_log"
  start=$(date +%s)
  go build -v "${flags[@]}" -o "$out/$name.tmp" "$pkg" >"$step_log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' INT TERM EXIT
  while kill -0 "$pid" 2>/dev/null; do
    done_n=$(wc -l <"$step_log")
    say "  $name: compiled $done_n of <= $total packages, $(( $(date +%s) - start ))s elapsed"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  done
  rc=0; wait "$pid" || rc=$?
  trap - INT TERM EXIT
  cat "$step_log" >>"$log"; rm -f "$step_log"
  [ "$rc" = 0 ] || { tail -n 20 "$log" >&2; die "step 'go build $name' failed (exit $rc); see $log"; }
  mv "$out/$name.tmp" "$out/$name"
  say "  $name done in $(( $(date +%s) - start ))s ($(du -h "$out/$name" | cut -f1))"
done

echo "$want_stamp" > "$stamp"
say "all binaries built in $(( $(date +%s) - start_all ))s; go build cache $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1), module cache $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
[ "$print_dir" = 0 ] || echo "$out"

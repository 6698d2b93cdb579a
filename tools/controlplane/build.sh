#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) from the
# official Kubernetes and etcd Go modules pinned in this directory's go.mod, through the Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/controlplane/<k8s version>/bin (default ~/.cache/pyctrl/...).
# Idempotent: when every binary is present and was built from the current go.sum, it returns at once.
# Prints what it builds and how far along it is; the full compiler output goes to build.log there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../gobuild.sh"
# --print-bin-dir: print the binaries' directory on stdout (progress always goes to stderr).
# --quiet: say nothing when everything is up to date.
gobuild_init controlplane "$@"

k8s_version="$(gobuild_version "$here/go.mod" k8s.io/kubernetes)"
etcd_version="$(gobuild_version "$here/go.mod" go.etcd.io/etcd/server/v3)"

out="$gobuild_cache_root/controlplane/$k8s_version/bin"
log="$gobuild_cache_root/controlplane/$k8s_version/build.log"
stamp="$out/.built-from"
want_stamp="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"

targets=(
  "etcd|go.etcd.io/etcd/server/v3"
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler"
  "kubectl|k8s.io/kubernetes/cmd/kubectl"
)

binaries=()
for t in "${targets[@]}"; do binaries+=("$out/${t%%|*}"); done
gobuild_fresh "$stamp" "$want_stamp" "${binaries[@]}" &&
  gobuild_up_to_date "Kubernetes $k8s_version binaries up to date in $out" "$out"
gobuild_require_go
gobuild_lock "$out"
gobuild_fresh "$stamp" "$want_stamp" "${binaries[@]}" &&
  gobuild_up_to_date "Kubernetes $k8s_version binaries built meanwhile in $out" "$out"

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

gobuild_env
cd "$here"

say "[0/${#targets[@]}] downloading modules (go mod download)"
gobuild_download "$log"

start_all=$(date +%s)
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  name="${t%%|*}"; pkg="${t#*|}"
  if [ "$name" != etcd ]; then ldflags="${ldflags_k8s[*]}"; else ldflags="-s -w"; fi
  gobuild_compile "[$i/${#targets[@]}]" "$name" "$pkg" "$out/$name" "$log" -trimpath "-ldflags=$ldflags"
done

echo "$want_stamp" > "$stamp"
say "all binaries built in $(( $(date +%s) - start_all ))s; go build cache $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1), module cache $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1)"
[ "$gobuild_print_dir" = 0 ] || echo "$out"

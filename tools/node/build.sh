#!/usr/bin/env bash
# Build what a real node runs besides containerd: the upstream kubelet and kube-proxy (the Kubernetes
# release of the control plane, pinned in this directory's go.mod) and CoreDNS (coredns/go.mod, a
# main package choosing the plugins a cluster DNS needs), through the Go module proxy.
#
# Output: $PYCTRL_CACHE_DIR/node/<k8s version>-coredns-<coredns version>/bin (default ~/.cache/pyctrl).
# Idempotent: when every binary is present and was built from the current inputs, it returns at once.
# Its own go.mod, so the control plane's build is never invalidated by the node's; it must name the
# control plane's Kubernetes version (checked). Prints what it builds and how far along it is; the full
# compiler output goes to build.log there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../gobuild.sh"
# --print-bin-dir: print the binaries' directory on stdout (progress always goes to stderr).
# --quiet: say nothing when everything is up to date.
gobuild_init node "$@"

k8s_version="$(gobuild_version "$here/go.mod" k8s.io/kubernetes)"
cp_version="$(gobuild_version "$here/../controlplane/go.mod" k8s.io/kubernetes)"
[ "$k8s_version" = "$cp_version" ] ||
  die "step 'check versions': tools/node/go.mod has k8s.io/kubernetes $k8s_version, the control plane $cp_version; pin both to one release"
coredns_version="$(gobuild_version "$here/coredns/go.mod" github.com/coredns/coredns)"

dir="$gobuild_cache_root/node/$k8s_version-coredns-$coredns_version"
out="$dir/bin"
log="$dir/build.log"
stamp="$out/.built-from"
want_stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/coredns/go.mod" "$here/coredns/go.sum" "$here/coredns/main.go" |
  sha256sum | cut -d' ' -f1)"

# name|module directory|package. CoreDNS first: it shares the fewest packages with the control plane,
# whose build may still be filling the Go build cache that kubelet and kube-proxy reuse.
targets=(
  "coredns|coredns|."
  "kube-proxy|.|k8s.io/kubernetes/cmd/kube-proxy"
  "kubelet|.|k8s.io/kubernetes/cmd/kubelet"
)

binaries=()
for t in "${targets[@]}"; do binaries+=("$out/${t%%|*}"); done
gobuild_fresh "$stamp" "$want_stamp" "${binaries[@]}" &&
  gobuild_up_to_date "node binaries (Kubernetes $k8s_version, CoreDNS $coredns_version) up to date in $out" "$out"
gobuild_require_go
gobuild_lock "$out"
gobuild_fresh "$stamp" "$want_stamp" "${binaries[@]}" &&
  gobuild_up_to_date "node binaries (Kubernetes $k8s_version, CoreDNS $coredns_version) built meanwhile in $out" "$out"

: > "$log"
say "building kubelet and kube-proxy $k8s_version and CoreDNS $coredns_version with $(go env GOVERSION) into $out"
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

say "[0/${#targets[@]}] downloading modules (go mod download)"
(cd "$here" && gobuild_download "$log")
(cd "$here/coredns" && gobuild_download "$log")

start_all=$(date +%s)
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  name="${t%%|*}"; rest="${t#*|}"; moddir="${rest%%|*}"; pkg="${rest#*|}"
  if [ "$name" = coredns ]; then ldflags="-s -w"; else ldflags="${ldflags_k8s[*]}"; fi
  cd "$here/$moddir"
  gobuild_compile "[$i/${#targets[@]}]" "$name" "$pkg" "$out/$name" "$log" -trimpath "-ldflags=$ldflags"
done

echo "$want_stamp" > "$stamp"
say "all node binaries built in $(( $(date +%s) - start_all ))s"
[ "$gobuild_print_dir" = 0 ] || echo "$out"

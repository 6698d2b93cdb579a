#!/usr/bin/env bash
# What a real envtest node runs besides the kubelet, kube-proxy and CoreDNS (tools/node/build.sh),
# from Debian's packages: containerd (1.6, CRI v1) with runc, the CNI plugins (bridge, host-local,
# loopback, portmap), iptables and conntrack for kube-proxy, and what builds the node's images
# (umoci packs the pause image, mmdebstrap makes Debian root filesystems). Why Debian's containerd
# 1.6 and not a containerd v2 built here: docs/real-node.md.
#
# Idempotent: a second run finds every command and says so. Installs nothing else, starts nothing
# (the packages' own services are never used: each node starts its own containerd).
set -euo pipefail

die() { echo "node-deps: error: $*" >&2; exit 1; }
say() { echo "node-deps: $*" >&2; }

# command|package
wanted=(
  "containerd|containerd"
  "ctr|containerd"
  "runc|runc"
  "/usr/lib/cni/bridge|containernetworking-plugins"
  "iptables|iptables"
  "conntrack|conntrack"
  "umoci|umoci"
  "mmdebstrap|mmdebstrap"
  "gcc|gcc"
  "/usr/lib/x86_64-linux-gnu/libc.a|libc6-dev"
)

need=()
for w in "${wanted[@]}"; do
  cmd="${w%%|*}"; pkg="${w#*|}"
  if [[ "$cmd" = /* ]]; then [ -e "$cmd" ] && continue; else command -v "$cmd" >/dev/null 2>&1 && continue; fi
  [[ " ${need[*]} " = *" $pkg "* ]] || need+=("$pkg")
done

if [ "${#need[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "step 'apt packages': apt-get not found; install ${need[*]} by hand"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "[1/2] apt-get update"
  $SUDO apt-get update -qq || die "step 'apt-get update' failed"
  say "[2/2] installing Debian packages: ${need[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2 \
    || die "step 'apt-get install ${need[*]}' failed"
  # Where a service manager runs, the package's own containerd is not wanted: nodes start theirs.
  if [[ " ${need[*]} " = *" containerd "* ]] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now containerd >/dev/null 2>&1 || true
  fi
fi
say "up to date: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), \
CNI plugins $(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null || echo '?'), \
$(iptables --version), conntrack $(conntrack --version 2>&1 | awk '{print $2}'), umoci $(umoci --version | awk '{print $3}')"

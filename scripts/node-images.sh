#!/usr/bin/env bash
# The images a real envtest node runs, built here without a registry or a daemon, each an OCI archive
# that `ctr -n k8s.io images import` takes (envtest imports them into every node's containerd):
#
#   localhost/pyctrl/pause:3.10     kubernetes' build/pause/linux/pause.c (from the k8s.io/kubernetes
#                                   module of tools/node/go.mod), gcc -Os -static, user 65535
#   localhost/pyctrl/coredns:<v>    tools/node/build.sh's CoreDNS, alone, user 65532 (as upstream's
#                                   distroless image)
#   localhost/pyctrl/redis:7        Debian bookworm (mmdebstrap, minbase) + redis-server + redis-tools,
#                                   user redis 999:999 (the official image's uid), WORKDIR /data; also
#                                   named localhost/pyctrl/redis:7.0 (bookworm's Redis is 7.0), so a
#                                   test can change a RedisCluster's image and watch it roll out
#   localhost/pyctrl/redis-exporter:<v>
#                                   tools/redis_exporter/build.sh's static redis_exporter, alone, user
#                                   59000 and entrypoint /redis_exporter as upstream's image; also named
#                                   docker.io/oliver006/redis_exporter:<v> (the operator's default
#                                   exporterImage), as `kind load` would name a pulled copy
#
# Each is packed with umoci (an OCI layout, one layer, its config) and tarred. Cached by content:
# $PYCTRL_CACHE_DIR/node-images/<name>.oci.tar is rebuilt only when what it is made from changed
# (this script, pause.c, the CoreDNS and redis_exporter binaries); `--print-dir` prints that directory on stdout.
# The operator's image is scripts/image.sh's (`make image`). Prints each step; a failed step is named
# with its log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "node-images: error: $*" >&2; exit 1; }
say() { echo "node-images: $*" >&2; }

print_dir=0
for arg in "$@"; do
  case "$arg" in
    --print-dir) print_dir=1 ;;
    *) die "unknown argument '$arg' (use --print-dir)" ;;
  esac
done

scripts/node-deps.sh 2>/dev/null || scripts/node-deps.sh

cache="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}/node-images"
log="$cache/build.log"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -n 9 || { say "another build is running in $cache; waiting for it"; flock 9; }
: > "$log"

script_sum="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' tools/node/go.mod | head -n1)"
coredns_version="$(awk '$1 == "github.com/coredns/coredns" && $2 ~ /^v/ {print $2}' tools/node/coredns/go.mod | head -n1)"
[ -n "$coredns_version" ] || coredns_version="$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' tools/node/coredns/go.mod)"

# fresh NAME INPUT-SUM: true when NAME's archive exists and was built from INPUT-SUM.
fresh() { [ -s "$cache/$1.oci.tar" ] && [ "$(cat "$cache/$1.oci.tar.built-from" 2>/dev/null)" = "$2" ]; }

# pack NAME REF[,REF2] LAYER-TAR CONFIG-ARGS...: one-layer OCI image REF (and REF2, the same
# manifest under a second name) from LAYER-TAR into NAME.oci.tar.
pack() {
  local name="$1" refs="$2" layer="$3"; shift 3
  local ref="${refs%%,*}"
  local work="$cache/$name.work" tag="${ref##*:}"
  rm -rf "$work"
  umoci init --layout "$work" >>"$log" 2>&1 || die "step 'umoci init $name' failed; see $log"
  umoci new --image "$work:$tag" >>"$log" 2>&1 || die "step 'umoci new $name' failed; see $log"
  umoci raw add-layer --image "$work:$tag" "$layer" >>"$log" 2>&1 || die "step 'umoci add-layer $name' failed; see $log"
  umoci config --image "$work:$tag" --author pyctrl "$@" >>"$log" 2>&1 || die "step 'umoci config $name' failed; see $log"
  umoci gc --layout "$work" >>"$log" 2>&1 || die "step 'umoci gc $name' failed; see $log"
  # containerd names an imported image after this annotation (else only by the tag).
  python3 - "$work/index.json" "$refs" <<'EOF' || die "step 'name $name' failed"
import json, sys
path, refs = sys.argv[1], sys.argv[2].split(",")
index = json.load(open(path))
named = []
for m in index["manifests"]:
    for ref in refs:  # one descriptor per name: ctr import names an image after each
        named.append({**m, "annotations": {**m.get("annotations", {}), "io.containerd.image.name": ref}})
index["manifests"] = named
json.dump(index, open(path, "w"))
EOF
  tar -C "$work" -cf "$cache/$name.oci.tar.tmp" oci-layout index.json blobs
  mv "$cache/$name.oci.tar.tmp" "$cache/$name.oci.tar"
  rm -rf "$work"
}

start=$(date +%s)

# 1. pause
pause_c="$(cd tools/node && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@$k8s_version" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/build/pause/linux/pause.c"
[ -f "$pause_c" ] || die "step 'find pause.c': no $pause_c"
sum="$( (echo "$script_sum"; cat "$pause_c") | sha256sum | cut -d' ' -f1)"
if fresh pause "$sum"; then
  say "[1/4] pause up to date"
else
  say "[1/4] pause: gcc -Os -static $pause_c"
  rm -rf "$cache/pause.root" && mkdir -p "$cache/pause.root"
  gcc -Os -Wall -Werror -static -DVERSION="v3.10-pyctrl" -o "$cache/pause.root/pause" "$pause_c" >>"$log" 2>&1 ||
    die "step 'gcc pause.c' failed; see $log"
  strip "$cache/pause.root/pause"
  tar -C "$cache/pause.root" --owner=0 --group=0 -cf "$cache/pause.layer.tar" pause
  pack pause localhost/pyctrl/pause:3.10 "$cache/pause.layer.tar" \
    --config.entrypoint /pause --config.user 65535:65535
  rm -rf "$cache/pause.root" "$cache/pause.layer.tar"
  echo "$sum" > "$cache/pause.oci.tar.built-from"
fi

# 2. Redis
sum="$(echo "$script_sum" | sha256sum | cut -d' ' -f1)"
if fresh redis "$sum"; then
  say "[2/4] redis up to date"
else
  say "[2/4] redis: mmdebstrap bookworm minbase + redis-server redis-tools (a minute or two; log: $log)"
  # The user first (minbase has no useradd), with the official image's ids: the package's postinst keeps it.
  mmdebstrap --variant=minbase --include=redis-server,redis-tools \
    --essential-hook='echo "redis:x:999:" >> "$1/etc/group"' \
    --essential-hook='echo "redis:x:999:999::/var/lib/redis:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='mkdir -p "$1/data" && chown 999:999 "$1/data"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
    bookworm "$cache/redis.layer.tar" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "step 'mmdebstrap redis' failed; see $log"; }
  pack redis localhost/pyctrl/redis:7,localhost/pyctrl/redis:7.0 "$cache/redis.layer.tar" \
    --config.cmd redis-server --config.user 999:999 --config.workingdir /data \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.exposedports 6379/tcp
  rm -f "$cache/redis.layer.tar"
  echo "$sum" > "$cache/redis.oci.tar.built-from"
fi

# 3. CoreDNS (built by tools/node/build.sh, which returns at once when it is up to date)
bin="$(tools/node/build.sh --print-bin-dir --quiet)" || die "step 'tools/node/build.sh' failed"
sum="$( (echo "$script_sum"; sha256sum "$bin/coredns") | sha256sum | cut -d' ' -f1)"
if fresh coredns "$sum"; then
  say "[3/4] coredns up to date"
else
  say "[3/4] coredns $coredns_version from $bin/coredns"
  rm -rf "$cache/coredns.root" && mkdir -p "$cache/coredns.root"
  cp "$bin/coredns" "$cache/coredns.root/coredns"
  tar -C "$cache/coredns.root" --owner=0 --group=0 -cf "$cache/coredns.layer.tar" coredns
  pack coredns "localhost/pyctrl/coredns:$coredns_version" "$cache/coredns.layer.tar" \
    --config.entrypoint /coredns --config.user 65532:65532 --config.exposedports 53/udp \
    --config.exposedports 53/tcp --config.exposedports 9153/tcp
  rm -rf "$cache/coredns.root" "$cache/coredns.layer.tar"
  echo "$sum" > "$cache/coredns.oci.tar.built-from"
fi

# 4. redis_exporter (tools/redis_exporter/build.sh, which returns at once when it is up to date)
exporter_bin="$(tools/redis_exporter/build.sh --print-bin-dir --quiet)" || die "step 'tools/redis_exporter/build.sh' failed"
exporter_version="$(basename "$(dirname "$exporter_bin")")"
sum="$( (echo "$script_sum"; sha256sum "$exporter_bin/redis_exporter") | sha256sum | cut -d' ' -f1)"
if fresh redis-exporter "$sum"; then
  say "[4/4] redis-exporter up to date"
else
  say "[4/4] redis-exporter $exporter_version from $exporter_bin/redis_exporter"
  rm -rf "$cache/redis-exporter.root" && mkdir -p "$cache/redis-exporter.root"
  cp "$exporter_bin/redis_exporter" "$cache/redis-exporter.root/redis_exporter"
  tar -C "$cache/redis-exporter.root" --owner=0 --group=0 -cf "$cache/redis-exporter.layer.tar" redis_exporter
  pack redis-exporter "localhost/pyctrl/redis-exporter:$exporter_version,docker.io/oliver006/redis_exporter:$exporter_version" \
    "$cache/redis-exporter.layer.tar" \
    --config.entrypoint /redis_exporter --config.user 59000:59000 --config.exposedports 9121/tcp
  rm -rf "$cache/redis-exporter.root" "$cache/redis-exporter.layer.tar"
  echo "$sum" > "$cache/redis-exporter.oci.tar.built-from"
fi

say "images in $cache: $(cd "$cache" && du -h ./*.oci.tar | awk '{printf "%s %s  ", $2, $1}')($(( $(date +%s) - start ))s)"
[ "$print_dir" = 0 ] || echo "$cache"

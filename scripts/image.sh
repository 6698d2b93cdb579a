#!/usr/bin/env bash
# `make image`: build the Dockerfile into an OCI archive without a daemon (buildah, vfs storage,
# chroot isolation), on a base image made from Debian packages (mmdebstrap: no container registry
# is reachable here). With a registry, `docker build .` (BASE=python:3.11-slim) builds the same file.
#
# Output: $PYCTRL_CACHE_DIR/image/rediscluster-operator-<version>.oci.tar (default ~/.cache/pyctrl),
# with buildah's storage beside it (never /var/lib/containers). Idempotent: the Debian base is made
# once (a dated bookworm minbase + python3 + python3-venv); the image is rebuilt when the Dockerfile
# or its build context changed. Prints each step; a failed step is named with its log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "image: error: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }

version="$(awk -F'"' '/^version = /{print $2; exit}' pyproject.toml)"
cache="${PYCTRL_CACHE_DIR:-$HOME/.cache/pyctrl}/image"
archive="$cache/rediscluster-operator-$version.oci.tar"
# the base holds redis-tools: a point-in-time restore runs redis-check-aof in the operator image
base_tar="$cache/base-bookworm-redis-tools.tar"
base_image="localhost/pyctrl-base:bookworm-redis-tools"
image="localhost/pyctrl/rediscluster-operator:$version"
log="$cache/build.log"
mkdir -p "$cache"

need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
if [ "${#need[@]}" -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq || die "step 'apt-get update' failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" \
    || die "step 'apt-get install ${need[*]}' failed"
fi

bah=(buildah --storage-driver vfs --root "$cache/storage" --runroot "$cache/run")
export BUILDAH_ISOLATION=chroot

# What the image is built from: the Dockerfile, the files it copies, the base.
context_sum="$( (cat Dockerfile pyproject.toml README.md; find pyctrl examples/__init__.py examples/rediscluster \
  -name '__pycache__' -prune -o -type f -print | LC_ALL=C sort | xargs cat) | sha256sum | cut -d' ' -f1)"
stamp="$archive.built-from"
if [ -f "$archive" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$context_sum" ]; then
  say "$archive up to date ($(du -h "$archive" | cut -f1))"
  exit 0
fi
: > "$log"
start=$(date +%s)

# 1. The base: Debian bookworm with python3 and its venv module, from Debian's packages.
if ! "${bah[@]}" inspect --type image "$base_image" >/dev/null 2>&1; then
  if [ ! -s "$base_tar" ]; then
    say "[1/3] making the base root filesystem with mmdebstrap (bookworm, python3, python3-venv, redis-tools)"
    mmdebstrap --variant=apt --include=python3,python3-venv,ca-certificates,redis-tools bookworm "$base_tar.tmp" \
      >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "step 'mmdebstrap' failed; see $log"; }
    mv "$base_tar.tmp" "$base_tar"
  fi
  say "[1/3] importing the base as $base_image"
  ctr="$("${bah[@]}" from scratch)"
  "${bah[@]}" add "$ctr" "$base_tar" / >>"$log" 2>&1 || die "step 'buildah add base' failed; see $log"
  "${bah[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  "${bah[@]}" commit --rm "$ctr" "$base_image" >>"$log" 2>&1 || die "step 'buildah commit base' failed; see $log"
else
  say "[1/3] base $base_image present"
fi

# 2. The Dockerfile, as docker would build it (its RUN lines reach PyPI).
say "[2/3] building $image from the Dockerfile (BASE=$base_image; log: $log)"
# The host's pip CA bundle (a TLS-intercepting proxy's CA), mounted for the RUN lines only.
cert="${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}"
extra=()
if [ -n "$cert" ] && [ -f "$cert" ]; then
  extra=(--volume "$cert:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
"${bah[@]}" build --pull=never --layers --build-arg "BASE=$base_image" "${extra[@]}" -t "$image" -f Dockerfile . \
  >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "step 'buildah build' failed; see $log"; }

# 3. The OCI archive.
say "[3/3] writing $archive"
rm -f "$archive"
"${bah[@]}" push "$image" "oci-archive:$archive:pyctrl/rediscluster-operator:$version" >>"$log" 2>&1 \
  || die "step 'buildah push oci-archive' failed; see $log"
echo "$context_sum" > "$stamp"
say "built in $(( $(date +%s) - start ))s: $archive ($(du -h "$archive" | cut -f1)), base $base_image (Debian bookworm via mmdebstrap)"

#!/usr/bin/env bash
# Fetch the Prometheus Operator's real CRDs for ServiceMonitor, PodMonitor and PrometheusRule (what
# the chart's optional monitoring objects are validated against on the install tests' apiserver): the module
# github.com/prometheus-operator/prometheus-operator pinned in this directory's go.mod (checked
# against go.sum) through the Go module proxy, its example/prometheus-operator-crd/ files copied to
# $PYCTRL_CACHE_DIR/prometheus-operator/<version>/crds (default ~/.cache/pyctrl/...).
# Idempotent: returns at once when they are there for the pinned version. Nothing is compiled.
#
#   tools/prometheus-operator/fetch-crds.sh [--print-bin-dir] [--quiet]   (prints the crds directory)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../gobuild.sh"
gobuild_init prometheus-operator "$@"
module=github.com/prometheus-operator/prometheus-operator
version="$(gobuild_version "$here/go.mod" "$module")"
out="$gobuild_cache_root/prometheus-operator/$version/crds"
files=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml)
stamp="$out/.fetched-from"
want="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"
have_all() { local f; for f in "${files[@]}"; do [ -s "$out/$f" ] || return 1; done; [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }

have_all && gobuild_up_to_date "CRDs of $module $version up to date in $out" "$out"
gobuild_require_go
gobuild_lock "$out"
have_all && gobuild_up_to_date "CRDs of $module $version fetched meanwhile in $out" "$out"
log="$out/fetch.log"
: > "$log"
gobuild_env -mod=mod
cd "$here"
say "[1/2] downloading $module $version (the module zip, ~4 MB, checked against go.sum)"
dir="$(go mod download -json "$module" 2>>"$log" | awk -F'"' '$2 == "Dir" {print $4}')" ||
  die "step 'go mod download $module' failed; see $log"
[ -n "$dir" ] && [ -d "$dir" ] || die "step 'go mod download $module' gave no directory; see $log"
say "[2/2] copying ${files[*]} into $out"
for f in "${files[@]}"; do
  [ -s "$dir/example/prometheus-operator-crd/$f" ] || die "step 'copy': $f is not in $module $version"
  cp "$dir/example/prometheus-operator-crd/$f" "$out/$f.tmp" && mv "$out/$f.tmp" "$out/$f"
done
echo "$want" > "$stamp"
say "fetched the CRDs of $module $version"
[ "$gobuild_print_dir" = 0 ] || echo "$out"

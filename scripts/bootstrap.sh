#!/usr/bin/env bash
# Idempotent set-up shared by `make test` and `make demo`:
#   1. Debian packages the tests, the demo and the docs need (redis-server, redis-tools, graphviz),
#      when missing;
#   2. .venv/ with pyctrl and its dev and docs dependencies, re-installed only when pyproject.toml
#      changes;
#   3. the control-plane binaries (tools/controlplane/build.sh), built only when missing;
#   4. versitygw, the S3-compatible object store of the backup tests (tools/versitygw/build.sh);
#   5. helm and promtool (tools/helm/build.sh, tools/promtool/build.sh), built only when missing,
#      and the Prometheus Operator's ServiceMonitor/PrometheusRule CRDs
#      (tools/prometheus-operator/fetch-crds.sh: a module zip through the Go module proxy);
#   6. redis_exporter (the Redis metrics sidecar) and Grafana's dashboard-linter
#      (tools/redis_exporter/build.sh, tools/dashboard-linter/build.sh), built only when missing;
# (metrics-server, for kubectl top and the HPA test, is `make e2e`'s: `make metrics-server`.)
# A second run prints nine "up to date" lines and takes a few seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "bootstrap: error: $*" >&2; exit 1; }

# 1. Debian packages
need_pkgs=()
command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_pkgs+=(redis-tools)
command -v unshare >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v dot >/dev/null 2>&1 || need_pkgs+=(graphviz)  # the guide's diagrams (make docs)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_pkgs[*]}"
  command -v apt-get >/dev/null 2>&1 || die "step 'apt packages': apt-get not found; install ${need_pkgs[*]} by hand"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq || die "step 'apt-get update' failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" \
    || die "step 'apt-get install ${need_pkgs[*]}' failed"
  # The Debian package starts a system redis on :6379; pyctrl never uses it.
  (command -v systemctl >/dev/null 2>&1 && $SUDO systemctl disable --now redis-server >/dev/null 2>&1) || true
else
  echo "bootstrap: Debian packages up to date (redis-server $(redis-server --version | awk '{print $3}'), graphviz $(dot -V 2>&1 | awk '{print $5}'))"
fi

# 2. Python virtualenv
py="${PYTHON:-python3}"
stamp=".venv/.pyproject.sha256"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: creating .venv with pyctrl[dev,docs] ($($py --version))"
  [ -x .venv/bin/python ] || "$py" -m venv .venv || die "step 'python -m venv .venv' failed"
  .venv/bin/python -m pip install -q --upgrade pip >.venv/pip.log 2>&1 \
    || { tail -n 20 .venv/pip.log >&2; die "step 'pip install --upgrade pip' failed; see .venv/pip.log"; }
  .venv/bin/python -m pip install -q -e ".[dev,docs]" >>.venv/pip.log 2>&1 \
    || { tail -n 20 .venv/pip.log >&2; die "step 'pip install -e .[dev,docs]' failed; see .venv/pip.log"; }
  echo "$want" > "$stamp"
else
  echo "bootstrap: .venv up to date"
fi

# 3. Control plane
tools/controlplane/build.sh

# 4. Object store (backup tests, demo, benchmark)
tools/versitygw/build.sh

# 5. helm and promtool (the chart and alert-rule tests)
tools/helm/build.sh
tools/promtool/build.sh
tools/prometheus-operator/fetch-crds.sh

# 6. redis_exporter and dashboard-linter (the toolkit's metrics, alert and dashboard tests)
tools/redis_exporter/build.sh
tools/dashboard-linter/build.sh

# metrics-server (Environment(metrics_server=True): kubectl top and the HorizontalPodAutoscaler
# test) is built by `make e2e` (`make metrics-server`), not here: its own k8s.io modules make it a
# long cold build, and `make test` does not use it.

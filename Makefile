# Two entry points: `make test` and `make demo`. Both run the idempotent bootstrap first.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: bootstrap test e2e lint typecheck pytest docs demo bench controlplane helm promtool redis-exporter dashboard-linter metrics-server node node-images image image-test generate clean

bootstrap:
	@scripts/bootstrap.sh

controlplane:
	@tools/controlplane/build.sh

helm:
	@tools/helm/build.sh

promtool:
	@tools/promtool/build.sh

redis-exporter:
	@tools/redis_exporter/build.sh

dashboard-linter:
	@tools/dashboard-linter/build.sh

metrics-server:
	@tools/metrics-server/build.sh

# Real nodes: kubelet, kube-proxy and CoreDNS (tools/node), containerd & co from Debian, the images.
node:
	@tools/node/build.sh

node-images:
	@scripts/node-images.sh

# The operator's OCI image without a daemon (buildah, vfs, chroot; Debian base via mmdebstrap):
# minutes, so not part of `make test`. `image-test` builds it when needed, then checks it.
image:
	@scripts/image.sh

image-test: bootstrap image
	$(PY) -m pytest imagetests -p no:cacheprovider $(PYTEST_ARGS)

lint: bootstrap
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: bootstrap
	$(PY) -m mypy

pytest: bootstrap
	$(PY) -m pytest $(PYTEST_ARGS)

test: bootstrap
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(SPHINX)
	$(PY) -m pytest $(PYTEST_ARGS)

# End-to-end on real nodes (upstream kubelet + containerd + runc, kube-proxy, CoreDNS): builds the
# node binaries and images (and the operator image, `make image`) when missing, then tests/realnode
# and, on the local node, the sharded-operators test and the HorizontalPodAutoscaler test (which
# needs metrics-server) — none of them part of `make test`.
e2e: bootstrap node node-images image metrics-server
	PYCTRL_E2E=1 $(PY) -m pytest tests/realnode $(E2E_CONTROLPLANE_TESTS) -p no:cacheprovider $(PYTEST_ARGS)

# e2e tests on the local node that `make test` leaves out (see tests/conftest.py)
E2E_CONTROLPLANE_TESTS = tests/operator/test_sharded_operators.py tests/operator/test_autoscaling.py

# The guide (docs/): Sphinx, warnings are errors, a fresh build each time; the trace example in it
# starts its own control plane. Open docs/_build/html/index.html.
SPHINX = $(PY) -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
docs: bootstrap
	$(SPHINX)
	@echo "docs: built docs/_build/html/index.html"

demo: bootstrap
	$(PY) -m examples.rediscluster_demo

# CRDs from the pydantic types; the chart's ClusterRole (from the @rbac declarations), CRDs and
# webhook configuration; config/ rendered from the chart by helm template; the guide's spec reference
# and the dashboard's layout preview (docs/guide/dashboard-preview.svg).
generate: bootstrap
	$(PY) -m pyctrl.crdgen
	$(PY) -m examples.rediscluster.packaging
	$(PY) -m examples.rediscluster.api.reference
	$(PY) -m examples.rediscluster.dashboard_preview

# The optional `bench` extra (kopf, matplotlib, pyinstrument) is installed here only: CI never needs it.
bench: bootstrap
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf .venv .mypy_cache .pytest_cache .ruff_cache docs/_build

#!/usr/bin/env bash
# Build kubernetes-sigs/metrics-server (sigs.k8s.io/metrics-server, pinned in this directory's go.mod)
# through the Go module proxy into $PYCTRL_CACHE_DIR/metrics-server/<version>/bin; envtest's
# Environment(metrics_server=True) runs it behind the metrics.k8s.io APIService, so `kubectl top`
# and the HorizontalPodAutoscaler read the local node's /metrics/resource. Idempotent, with progress
# (see tools/gobuild.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../gobuild.sh"
gobuild_tool metrics-server sigs.k8s.io/metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server \
  "-X k8s.io/client-go/pkg/version.gitVersion=@VERSION@ -X k8s.io/client-go/pkg/version.gitCommit=module-proxy -X k8s.io/client-go/pkg/version.buildDate=1970-01-01T00:00:00Z" "$@"

#!/usr/bin/env bash
# Build the real `helm` (helm.sh/helm/v3, pinned in this directory's go.mod) through the Go module
# proxy into $PYCTRL_CACHE_DIR/helm/<version>/bin; idempotent, with progress (see tools/gobuild.sh).
# As helm's own Makefile does, the Kubernetes version it assumes for `helm template`/`lint` is the
# one of the client-go it is built with (else 1.20, below the chart's kubeVersion).
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/../gobuild.sh"
k8s_minor="$(awk '$1 == "k8s.io/client-go" {print $2}' "$here/go.mod" | cut -d. -f2)"
gobuild_tool helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=@VERSION@ -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" "$@"

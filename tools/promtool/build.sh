#!/usr/bin/env bash
# Build Prometheus' `promtool` (github.com/prometheus/prometheus, pinned in this directory's go.mod)
# through the Go module proxy into $PYCTRL_CACHE_DIR/promtool/<version>/bin; idempotent, with
# progress (see tools/gobuild.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../gobuild.sh"
gobuild_tool promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool \
  "-X github.com/prometheus/common/version.Version=@VERSION@ -X github.com/prometheus/common/version.Branch=HEAD" "$@"

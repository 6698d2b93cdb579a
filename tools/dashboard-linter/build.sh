#!/usr/bin/env bash
# Build Grafana's dashboard-linter (github.com/grafana/dashboard-linter, pinned in this directory's
# go.mod) through the Go module proxy into $PYCTRL_CACHE_DIR/dashboard-linter/<version>/bin; the
# chart's dashboard test lints with it. Idempotent, with progress (see tools/gobuild.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../gobuild.sh"
gobuild_tool dashboard-linter github.com/grafana/dashboard-linter github.com/grafana/dashboard-linter "" "$@"

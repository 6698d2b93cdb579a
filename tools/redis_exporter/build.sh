#!/usr/bin/env bash
# Build oliver006/redis_exporter (github.com/oliver006/redis_exporter, pinned in this directory's
# go.mod) through the Go module proxy into $PYCTRL_CACHE_DIR/redis_exporter/<version>/bin; the
# RedisCluster operator's metrics sidecar and the toolkit's tests use it. Idempotent, with progress
# (see tools/gobuild.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../gobuild.sh"
gobuild_tool redis_exporter github.com/oliver006/redis_exporter github.com/oliver006/redis_exporter \
  "-X main.BuildVersion=@VERSION@ -X main.BuildCommitSha=module-proxy -X main.BuildDate=unknown" "$@"

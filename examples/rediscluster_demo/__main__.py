"""``python -m examples.rediscluster_demo``: see ``demo``."""

from __future__ import annotations

import sys

from examples.rediscluster_demo.demo import main

sys.exit(main())

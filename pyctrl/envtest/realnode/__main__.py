"""``python -m pyctrl.envtest.realnode SPEC.json``: a real node's PID 1 (see ``supervisor``)."""

import sys

from pyctrl.envtest.realnode.supervisor import main

sys.exit(main())

"""``python -m pyctrl.rbacgen``: see :mod:`pyctrl.rbacgen._cli`."""

import sys

from pyctrl.rbacgen._cli import main

sys.exit(main())

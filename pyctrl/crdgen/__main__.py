"""``python -m pyctrl.crdgen``: see :mod:`pyctrl.crdgen._cli`."""

import sys

from pyctrl.crdgen._cli import main

sys.exit(main())

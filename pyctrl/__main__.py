"""``python -m pyctrl``: the ``pyctrl`` command (scaffolding, see :mod:`pyctrl.scaffold`)."""

import sys

from pyctrl.scaffold import main

if __name__ == "__main__":
    sys.exit(main())

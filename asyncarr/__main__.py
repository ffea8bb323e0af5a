"""``python -m asyncarr``: the command line (with no arguments, the local demo)."""

import sys

from .cli import main

sys.exit(main())

"""``python -m mnnpy ...``: the same as the ``mnnpy`` command."""

import sys

from mnnpy.cli import main

sys.exit(main())

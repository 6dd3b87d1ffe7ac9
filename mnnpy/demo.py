"""``python -m mnnpy.demo [options]``: the OCR demo, the same as ``mnnpy demo [options]``.

The app is ``mnnpy.apps.demo`` (its options, the pipeline, what it prints); this entry
point runs it through the ``mnnpy`` command, so both spellings parse options and report
errors alike (``error: ...`` on stderr, exit status 2).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mnnpy.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

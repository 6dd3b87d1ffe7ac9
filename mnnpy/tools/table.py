"""Output of the command-line tools and benchmarks: aligned text tables, CSV, markdown rows,
and the ``--backend`` list."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from mnnpy.errors import InputError


def backend_list(options: Sequence[str], default: str = "cpu", option: str = "--backend") -> list[str]:
    """``--backend`` options (each a name or comma-separated names) -> backend names in order,
    each once; ``[default]`` when none is given. Raises ``InputError`` naming ``option`` for an
    empty name."""
    names: list[str] = []
    for opt in options or [default]:
        for name in opt.split(","):
            name = name.strip()
            if not name:
                raise InputError(f"{option} {opt!r}: an empty {option.lstrip('-')} name")
            if name not in names:
                names.append(name)
    return names


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, text left-aligned and numbers right-aligned, with
    a rule under the header."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        out = []
        for i, c in enumerate(r):
            numeric = c[:1].isdigit() or (c[:1] in "-+." and c[1:2].isdigit())
            out.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def format_csv(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The same rows as CSV text (RFC 4180 quoting, ``\\n`` line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()


def markdown_row(cells: Sequence[object]) -> str:
    """One row of a markdown (GitHub) table: ``| a | b |``; ``["---"] * n`` gives the rule."""
    return "| " + " | ".join(str(c) for c in cells) + " |"

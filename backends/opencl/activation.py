"""Activations of the OpenCL kernels, generated from the activation table (``mnnpy.ops.activation``).

``source()`` is the OpenCL C appended to ``shaders/opencl/common.h`` when a program's
source is assembled (``OpenCLRuntime.program``; OpenCL compiles at run time, so nothing
generated is committed): one macro ``act_<name>(x, a0, a1)`` per activation with a GPU
expression, and ``ACT(x)`` chosen by the build option ``-D ACT_<NAME>`` (``ACT_NONE`` or
none: ``x``). A kernel that applies an activation takes two float arguments ``a0, a1``
and calls ``ACT(x)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from mnnpy.ops.activation import ACTIVATIONS, GPU


def _macro_body(expr: str) -> str:
    """``expr`` with its parameters parenthesised (macro arguments may be expressions)."""
    return re.sub(r"\b(x|a0|a1)\b", r"(\1)", expr)


def source() -> str:
    """The generated OpenCL C: the ``act_<name>`` macros and the ``ACT`` selection."""
    acts = [ACTIVATIONS[name] for name in GPU]
    lines = ["/* generated from mnnpy/ops/activation.py by backends/opencl/activation.py */"]
    lines += [f"#define act_{a.lower}(x, a0, a1) ({_macro_body(a.c)})" for a in acts]
    for k, a in enumerate(acts):
        lines += [f"#{'el' if k else ''}if defined(ACT_{a.lower.upper()})", f"#define ACT(x) act_{a.lower}((x), a0, a1)"]
    lines += ["#else", "#define ACT(x) (x)", "#endif", ""]
    return "\n".join(lines)


def activation(kind: str | None, params: Sequence[float] = ()) -> tuple[str, np.float32, np.float32]:
    """``(build option, a0, a1)`` for ``kind`` (a table name with a GPU expression, or ""/None
    for none) with its scalars ``params``. Raises ``KeyError`` for a kind without one."""
    if kind and kind not in GPU:
        raise KeyError(kind)
    params = [float(p) for p in params] + [0.0, 0.0]
    return f"-D ACT_{(kind or 'none').upper()}", np.float32(params[0]), np.float32(params[1])

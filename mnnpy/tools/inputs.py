"""Models and inputs for the command-line tools (``mnnpy run``, ``bench``, ``diff``, ``eval``).

- ``load_model(path)``: a converted ``.mnnpy`` file or an ONNX file (converted in memory),
  as an ``Interpreter`` plus the ONNX bytes when there are some (for onnxruntime).
- ``--shape NAME=D0,D1,...`` and ``--input NAME=FILE.npy`` parsing (``pairs``,
  ``parse_shape``, ``load_npy``), checked against the model (``feeds_from_options``).
- Seeded random inputs, dtype-aware (``random_inputs``): floats uniform in [0, 1)
  (``mnnpy run``) or standard Gaussian (TFLite's inference_diff tool feeds N(0, 1));
  integers in 0..9 (valid as indices and counts of small sizes), booleans fair coins.

Every bad option raises ``InputError`` naming the option and what is wrong.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import InputError
from mnnpy.limits import MAX_RANK

DEFAULT_DYNAMIC_DIM = 64  # a dynamic dim other than the first (batch, default 1) when --shape is absent
MAX_RANDOM_INPUT_BYTES = 2**31  # a random input larger than this is refused
ONNX_MAGIC_SUFFIXES = (".onnx",)


def load_model(path: str | os.PathLike):
    """``(Interpreter, onnx_bytes or None)`` of a ``.mnnpy`` file or an ONNX file (a name
    ending in ``.onnx``, converted in memory with the graph optimisations). Raises
    ``InputError`` for a missing or unreadable file, ``ModelFormatError`` for a malformed one."""
    from mnnpy.interpreter import Interpreter

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"model {path}: no such file" if not os.path.exists(path) else f"model {path}: not a file")
    if not path.lower().endswith(ONNX_MAGIC_SUFFIXES):
        return Interpreter(path), None
    from mnnpy.converter import convert

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"model {path}: cannot read: {e.strerror or e}") from None
    return Interpreter(convert(data)), data


def pairs(items: Sequence[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` options -> {name: value}; a malformed item or a name given twice is an error."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"{what} must look like NAME=VALUE, got {item!r}")
        if name in out:
            raise InputError(f"{what} given twice for input '{name}' ({out[name]!r} and {value!r})")
        out[name] = value
    return out


def parse_shape(name: str, text: str) -> tuple[int, ...]:
    """``--shape NAME=TEXT`` -> dims: positive integers separated by commas ('' is a scalar)."""
    if text.strip() == "":
        return ()
    dims = []
    for s in text.split(","):
        if s.strip() == "":
            raise InputError(f"--shape {name}={text}: empty dim (a trailing or doubled comma?)")
        try:
            d = int(s)
        except ValueError:
            raise InputError(f"--shape {name}={text}: dims must be integers separated by commas (got {s!r})") from None
        if d < 1:
            raise InputError(f"--shape {name}={text}: dims must be positive (got {d})")
        dims.append(d)
    return tuple(dims)


def load_npy(name: str, path: str) -> np.ndarray:
    """``--input NAME=PATH``: a plain (non-pickled) .npy array, else ``InputError``."""
    where = f"--input {name}={path}: cannot read {path} as a .npy array"
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise InputError(f"{where}: not a .npy file (it lacks the .npy magic string)")
            f.seek(0)
            a = np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{where}: {getattr(e, 'strerror', None) or e}") from None
    return a


def default_shape(declared) -> tuple[int, ...]:
    """A declared input shape with its dynamic dims filled: the first (batch) 1, others ``DEFAULT_DYNAMIC_DIM``."""
    return tuple(s if isinstance(s, int) and s >= 0 else (1 if i == 0 else DEFAULT_DYNAMIC_DIM) for i, s in enumerate(declared))


def random_inputs(
    interp, shapes: dict[str, tuple[int, ...]], rng: np.random.Generator, skip=(), gaussian: bool = False
) -> dict[str, np.ndarray]:
    """Seeded random values for each model input not in ``skip`` (``shapes`` or the model's dims):
    floats uniform in [0, 1), or N(0, 1) with ``gaussian``; integers 0..9; booleans fair coins.
    Raises ``InputError`` for an input of unknown rank without a shape, or one too large."""
    feeds = {}
    for d in interp.inputs:
        if d.name in skip:
            continue
        if d.name in shapes:
            shape = shapes[d.name]
        elif d.shape is None:
            raise InputError(f"input '{d.name}' has unknown rank: give --shape {d.name}=D0,D1,...")
        else:
            shape = default_shape(d.shape)
        if len(shape) > MAX_RANK:
            raise InputError(f"input '{d.name}': --shape gives rank {len(shape)}, more than {MAX_RANK}")
        size = math.prod(shape) * d.dtype.itemsize
        if size > MAX_RANDOM_INPUT_BYTES:
            raise InputError(
                f"input '{d.name}': a random {d.dtype} input of shape {shape} would take {size / 2**30:,.1f} GiB, "
                f"more than the {MAX_RANDOM_INPUT_BYTES / 2**30:g} GiB limit; give a smaller --shape {d.name}=..."
            )
        if d.dtype.kind == "f":
            values = rng.standard_normal(shape) if gaussian else rng.random(shape, dtype=np.float64)
            feeds[d.name] = np.asarray(values).astype(d.dtype)
        elif d.dtype.kind == "b":
            feeds[d.name] = rng.random(shape) < 0.5
        else:
            feeds[d.name] = rng.integers(0, 10, shape).astype(d.dtype)
    return feeds


def feeds_from_options(interp, input_opts: Sequence[str], shape_opts: Sequence[str], seed: int, gaussian: bool = False):
    """Every input of ``interp``: from ``--input NAME=FILE.npy`` options, the rest random
    (``random_inputs``, seeded with ``seed``) at ``--shape NAME=DIMS`` or the declared dims.
    Raises ``InputError`` for an unknown name, a name given both ways, a bad file or dims (a
    file of the wrong dtype or shape is the session's ``InputError`` when it runs)."""
    files, texts = pairs(input_opts, "--input"), pairs(shape_opts, "--shape")
    both = sorted(files.keys() & texts.keys())
    if both:
        raise InputError(f"input '{both[0]}' has both --input and --shape; --shape is for random inputs only")
    shapes = {name: parse_shape(name, text) for name, text in texts.items()}
    declared = {d.name: d for d in interp.inputs}
    for name in list(files) + list(shapes):
        if name not in declared:
            raise InputError(f"unknown input name '{name}'; the model's inputs are {sorted(declared)}")
    loaded = {name: load_npy(name, path) for name, path in files.items()}
    generated = random_inputs(interp, shapes, np.random.default_rng(seed), skip=loaded, gaussian=gaussian)
    return {d.name: loaded[d.name] if d.name in loaded else generated[d.name] for d in interp.inputs}

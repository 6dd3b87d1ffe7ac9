"""Models and inputs for the command-line tools (``mnnpy run``, ``bench``, ``diff``, ``eval``).

- ``load_model(path)``: a converted ``.mnnpy`` file or an ONNX file (converted in memory),
  as an ``Interpreter`` plus the ONNX bytes when there are some (for onnxruntime).
- ``--shape NAME=D0,D1,...`` and ``--input NAME=FILE.npy`` parsing (``pairs``,
  ``parse_shape``, ``load_npy``), checked against the model (``feeds_from_options``).
- Seeded random inputs, dtype-aware (``random_inputs``): floats uniform in [0, 1)
  (``mnnpy run``) or standard Gaussian (TFLite's inference_diff tool feeds N(0, 1));
  integers in 0..9 (valid as indices and counts of small sizes), booleans fair coins.
  A dynamic dim without ``--shape`` is 1 (the first, batch) or ``DEFAULT_DYNAMIC_DIM``;
  ``note_assumed_dims`` says so on stderr. ``check_input_bytes``: the size limit of an
  input the tools make (``MAX_RANDOM_INPUT_BYTES``), checked before memory is taken.
- ``resized_session(interp, feeds, **options)``: a session created and resized for the
  feeds' shapes (MNN's resizeSession: all preparation done before the first run).
- ``onnx_reference(path, interp)``: onnxruntime's session of the ONNX file of ``interp``'s
  model (``--onnx``), its inputs checked against the model's (names, dtypes, ranks).

Every bad option raises ``InputError`` naming the option and what is wrong.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence

import numpy as np

from mnnpy.errors import InputError
from mnnpy.files import open_regular
from mnnpy.limits import MAX_RANK

DEFAULT_DYNAMIC_DIM = 64  # a dynamic dim other than the first (batch, default 1) when --shape is absent
MAX_RANDOM_INPUT_BYTES = 2**31  # a random input larger than this is refused
ONNX_MAGIC_SUFFIXES = (".onnx",)


def load_model(path: str | os.PathLike):
    """``(Interpreter, onnx_bytes or None)`` of a ``.mnnpy`` file or an ONNX file (a name
    ending in ``.onnx``, converted in memory with the graph optimisations). Raises
    ``InputError`` for a missing or unreadable file, ``ModelFormatError`` for a malformed one."""
    from mnnpy.interpreter import Interpreter

    path = check_file(path, "model")
    if not path.lower().endswith(ONNX_MAGIC_SUFFIXES):
        return Interpreter(path), None
    from mnnpy.converter import convert

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"model {path}: cannot read: {e.strerror or e}") from None
    return Interpreter(convert(data)), data


def check_file(path: str | os.PathLike, what: str) -> str:
    """``path`` as a str; ``InputError`` ("{what} {path}: no such file" / "not a file") unless it is a file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{what} {path}: no such file" if not os.path.exists(path) else f"{what} {path}: not a file")
    return path


def check_input_bytes(what: str, dtype, shape: tuple[int, ...], hint: str) -> int:
    """The bytes of a ``dtype`` array of ``shape``; ``InputError`` ("{what} of shape ... would
    take N GiB", and ``hint``: what to give instead) when more than ``MAX_RANDOM_INPUT_BYTES``.
    Call it before allocating."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size > MAX_RANDOM_INPUT_BYTES:
        raise InputError(
            f"{what} of shape {tuple(shape)} would take {size / 2**30:,.1f} GiB, "
            f"more than the {MAX_RANDOM_INPUT_BYTES / 2**30:g} GiB limit; {hint}"
        )
    return size


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
    """``--input NAME=PATH``: a plain (non-pickled) .npy array, else ``InputError``. Only a
    regular file is opened (``files.open_regular``: a named pipe is refused, never waited
    on), and the size its header claims is checked against the file's before NumPy
    allocates it (numpy.lib.format: magic, then the version's header)."""
    from numpy.lib import format as npy

    where = f"--input {name}={path}: cannot read {path} as a .npy array"
    try:
        with open_regular(path) as f:
            if f.read(6) != b"\x93NUMPY":
                raise InputError(f"{where}: not a .npy file (it lacks the .npy magic string)")
            f.seek(0)
            version = npy.read_magic(f)
            header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = header(f)
            claimed, left = math.prod(shape) * dtype.itemsize, os.fstat(f.fileno()).st_size - f.tell()
            if claimed > left:
                raise InputError(f"{where}: its header claims {shape} {dtype} ({claimed} bytes), the file holds {left}")
            f.seek(0)
            a = np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{where}: {getattr(e, 'strerror', None) or e}") from None
    return a


def default_shape(declared) -> tuple[int, ...]:
    """A declared input shape with its dynamic dims filled: the first (batch) 1, others ``DEFAULT_DYNAMIC_DIM``."""
    return tuple(s if not _dynamic(s) else (1 if i == 0 else DEFAULT_DYNAMIC_DIM) for i, s in enumerate(declared))


def _dynamic(v) -> bool:
    return not (isinstance(v, int) and v >= 0)


def note_assumed_dims(interp, input_opts: Sequence[str], shape_opts: Sequence[str]) -> list[str]:
    """One line per input whose dynamic dims get ``default_shape``'s values (no ``--shape`` or
    ``--input`` for it), printed on stderr (stdout may be JSON) and returned."""
    given = pairs(input_opts, "--input").keys() | pairs(shape_opts, "--shape").keys()
    lines = []
    for d in interp.inputs:
        if d.name in given or d.shape is None or not any(_dynamic(v) for v in d.shape):
            continue
        shape = default_shape(d.shape)
        dims = ", ".join(f"dim {i} ({v}) = {shape[i]}" for i, v in enumerate(d.shape) if _dynamic(v))
        example = ",".join(str(v) for v in shape)
        lines.append(
            f"note: input '{d.name}' {tuple(d.shape)} has dynamic dims: assumed {dims}; set them with --shape {d.name}={example}"
        )
    for line in lines:
        print(line, file=sys.stderr)
    return lines


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
        check_input_bytes(f"input '{d.name}': a random {d.dtype} input", d.dtype, shape, f"give a smaller --shape {d.name}=...")
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


def _ort_dtype(type_name: str):
    """onnxruntime's ``tensor(float)`` -> numpy's float32 (None where not a plain tensor type)."""
    name = type_name.removeprefix("tensor(").removesuffix(")")
    try:
        return np.dtype({"float": "float32", "double": "float64", "string": "object"}.get(name, name))
    except TypeError:
        return None


def onnx_reference(path: str | os.PathLike, interp, num_threads: int | None, what: str = "--onnx"):
    """onnxruntime's CPU session of the ONNX file ``path`` (``mnnpy.apps.reference``), which
    must be the model of ``interp``: ``InputError`` naming ``what`` for a missing file, inputs
    whose names, dtypes, ranks or fixed dims are not the model's, or a model output it lacks;
    ``ModelFormatError`` for a file that
    onnxruntime cannot load. ``BackendUnavailableError`` without onnxruntime."""
    from mnnpy.apps.reference import onnxruntime_session

    path = check_file(path, what)
    sess = onnxruntime_session(path, num_threads)
    want = {d.name: d for d in interp.inputs}
    got = {i.name: i for i in sess.get_inputs()}
    if set(got) != set(want):
        raise InputError(f"{what} {path}: its inputs {sorted(got)} are not the model's {sorted(want)}; is it the same model?")
    for name, i in got.items():
        d, dtype = want[name], _ort_dtype(i.type)
        if dtype is not None and dtype != d.dtype:
            raise InputError(f"{what} {path}: input '{name}' is {dtype} there but {d.dtype} in the model; is it the same model?")
        if d.shape is not None and i.shape is not None and len(i.shape) != len(d.shape):
            raise InputError(f"{what} {path}: input '{name}' has rank {len(i.shape)} there but {len(d.shape)} in the model")
        for k, (a, b) in enumerate(zip(i.shape or (), d.shape or ())):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise InputError(f"{what} {path}: input '{name}' has dim {k} = {a} there but {b} in the model; the same model?")
    outs = {o.name for o in sess.get_outputs()}
    missing = [d.name for d in interp.outputs if d.name not in outs]
    if missing:
        raise InputError(f"{what} {path}: it has no output {missing[0]!r} (its outputs: {sorted(outs)}); is it the same model?")
    return sess


def resized_session(interp, feeds: dict, **options):
    """``interp.create_session(**options)`` resized for the shapes of ``feeds`` (name -> array):
    memory planned, kernels built and weights uploaded before the first run (the benchmarks'
    session creation)."""
    session = interp.create_session(**options)
    session.resize({k: np.shape(v) for k, v in feeds.items()})
    return session

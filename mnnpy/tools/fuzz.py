"""Fuzzing mnnpy (NNAPI's VTS fuzzes its drivers with libFuzzer): atheris harnesses.

    python -m mnnpy.tools.fuzz loader    [--runs N] [--seed S] [--corpus DIR] [--backend B] [-- libFuzzer flags]
    python -m mnnpy.tools.fuzz converter [--runs N] ...
    python -m mnnpy.tools.fuzz loader --replay crash-1234 ...   # run saved inputs, no atheris

``loader``: bytes -> ``Interpreter`` -> ``create_session`` -> ``run`` on small inputs.
``converter``: bytes -> ``onnx.ModelProto`` (undecodable protobufs are skipped) -> ``convert``
-> the same. Any exception other than ``mnnpy.MnnpyError`` is a finding: libFuzzer stops and
writes the input to ``crash-<hash>`` in the working folder (``-artifact_prefix=``). A run
longer than ``--timeout`` s (hang) or above ``--rss-mb`` MB of memory is a finding too:
sessions get ``memory_limit=MEMORY_LIMIT`` (1 GiB) and the converter's constant folding the
same budget, so no input may take more.
The seed corpus is written by code (``seed_corpus``): small valid models of the op families,
control flow included. Needs the optional ``atheris`` package (``pip install -e ".[fuzz]"``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

MAX_INPUT_ELEMENTS = 1 << 12  # elements of one fuzzed model's input: dynamic dims are 2, big inputs skipped
LOOP_TIMEOUT_S = 0.2  # per Loop, so that an endless loop is a LoopTimeoutError, not a hang
MAX_RUN_MFLOPS = 2000.0  # a model asking more of one run is prepared, not run (about 1 s here)
MAX_SAVED_BYTES = 64 << 20  # bytes: the largest saved input --replay reads (libFuzzer's are <= 64 KiB)
MEMORY_LIMIT = 1 << 30  # bytes: the sessions' memory_limit and the converter's folding budget


def _inputs(interp) -> dict | None:
    """Small arrays for ``interp``'s inputs (dynamic dims 2, zeros), or ``None`` when one would
    be larger than ``MAX_INPUT_ELEMENTS`` or a sequence."""
    feeds = {}
    for d in interp.inputs:
        if d.kind != "tensor":
            return None
        shape = tuple(s if isinstance(s, int) and s >= 0 else 2 for s in (d.shape if d.shape is not None else (2,)))
        if int(np.prod(shape, dtype=np.float64)) > MAX_INPUT_ELEMENTS:
            return None
        feeds[d.name] = np.zeros(shape, d.dtype)
    return feeds


def exercise(model, backend: str = "cpu") -> None:
    """Load ``model`` (bytes, a path or a ``Net``), prepare a session under ``MEMORY_LIMIT``
    and run it once on small inputs, unless its ops ask for more than ``MAX_RUN_MFLOPS``
    (``Session.op_mflops``: valid work that takes long, such as a 10,242-tap MaxPool over
    250,000 rows, is not a hang; its preparation is still fuzzed). Raises whatever mnnpy
    raises; an ``mnnpy.MnnpyError`` is the expected refusal."""
    import mnnpy

    interp = mnnpy.Interpreter(model)
    session = interp.create_session(backend=backend, memory_limit=MEMORY_LIMIT)
    feeds = _inputs(interp)
    if feeds is None:
        return
    session.resize({k: v.shape for k, v in feeds.items()})
    if sum(m for *_, m in session.op_mflops()) <= MAX_RUN_MFLOPS:
        session.run(feeds, loop_timeout=LOOP_TIMEOUT_S)


def loader_target(data: bytes, backend: str = "cpu") -> None:
    """The loader harness: every refusal must be an ``MnnpyError``."""
    import mnnpy

    try:
        exercise(bytes(data), backend)
    except mnnpy.MnnpyError:
        pass


def converter_target(data: bytes, backend: str = "cpu") -> None:
    """The converter harness: a decodable ONNX protobuf through ``convert`` and a session;
    every refusal must be an ``MnnpyError``."""
    import onnx
    from google.protobuf.message import DecodeError

    import mnnpy
    from mnnpy import limits
    from mnnpy.converter import convert

    try:
        model = onnx.ModelProto.FromString(bytes(data))
    except (DecodeError, ValueError, RuntimeError):
        return  # not a protobuf: nothing of mnnpy's ran
    try:
        with limits.planning(limits.MemoryBudget(MEMORY_LIMIT).plan("converting the fuzzed model")):
            data = convert(model)  # constant folding charged to MEMORY_LIMIT
        exercise(data, backend)
    except mnnpy.MnnpyError:
        pass


def _model(nodes, inputs, outputs, inits=(), opset=17):
    """An ONNX model of one graph: ``inputs`` as (name, elem type, shape), ``outputs`` as
    (name, elem type), ``inits`` as (name, array)."""
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "seed",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def seed_models() -> dict[str, object]:
    """Small valid ONNX models (name -> ``onnx.ModelProto``) covering the op families: conv and
    pooling, gemm, elementwise with broadcasting, movement, resize, control flow (If, Loop)."""
    return {**_dense_seeds(), **_control_flow_seeds()}


def _dense_seeds() -> dict[str, object]:
    from onnx import TensorProto, helper

    f32 = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return {
        "conv": _model(
            [
                helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 1]),
                helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2]),
            ],
            [("x", f32, [1, 3, 7, 6])],
            [("y", f32)],
            [("w", w)],
        ),
        "gemm": _model(
            [helper.make_node("Gemm", ["x", "b"], ["y"], transB=1), helper.make_node("Softmax", ["y"], ["z"])],
            [("x", f32, [2, 5])],
            [("z", f32)],
            [("b", rng.standard_normal((3, 5)).astype(np.float32))],
        ),
        "elementwise": _model(
            [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])],
            [("x", f32, [2, 3, 4])],
            [("y", f32)],
            [("s", np.ones((3, 1), np.float32))],
        ),
        "movement": _model(
            [
                helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
                helper.make_node("Reshape", ["t", "shape"], ["r"]),
                helper.make_node("Concat", ["r", "r"], ["y"], axis=0),
            ],
            [("x", f32, [2, 3, 4])],
            [("y", f32)],
            [("shape", np.array([6, 4], np.int64))],
        ),
        "resize": _model(
            [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")],
            [("x", f32, [1, 1, 3, 4])],
            [("y", f32)],
            [("scales", np.array([1, 1, 2, 1.5], np.float32))],
            opset=13,
        ),
    }


def _control_flow_seeds() -> dict[str, object]:
    from onnx import TensorProto, helper

    f32 = TensorProto.FLOAT
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "b", [], [helper.make_tensor_value_info("t", f32, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "e", [], [helper.make_tensor_value_info("e", f32, None)])
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "v"], ["v2"]), helper.make_node("Identity", ["c"], ["c2"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", f32, [2]),
        ],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("v2", f32, [2])],
    )
    return {
        "if": _model(
            [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
            [("c", TensorProto.BOOL, []), ("x", f32, [3])],
            [("y", f32)],
        ),
        "loop": _model(
            [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
            [("M", TensorProto.INT64, []), ("v0", f32, [2])],
            [("v", f32)],
            opset=13,
        ),
    }


def seed_corpus(folder: Path, kind: str) -> Path:
    """Write the seed corpus of harness ``kind`` into ``folder``: each seed model as an ONNX
    protobuf (``converter``) or converted to mnnpy's format (``loader``). Returns ``folder``."""
    from mnnpy.converter import convert

    folder.mkdir(parents=True, exist_ok=True)
    for name, m in seed_models().items():
        data = m.SerializeToString() if kind == "converter" else convert(m)
        (folder / f"{name}.{'onnx' if kind == 'converter' else 'mnnpy'}").write_bytes(data)
    return folder


TARGETS = {"loader": loader_target, "converter": converter_target}


def read_input(path) -> bytes:
    """The bytes of a saved input: a libFuzzer artifact as is, or a ``.hex`` text file (hex
    digits, whitespace ignored: how tests/fuzz_regressions/ keeps its inputs). Raises
    ``OSError`` for a missing path or anything but a regular file, ``ValueError`` for a file
    over ``MAX_SAVED_BYTES`` or a ``.hex`` file that is not hex text."""
    from mnnpy.files import read_regular

    data = read_regular(path, MAX_SAVED_BYTES)  # a regular file only: never a blocked or endless read
    if data is None:
        raise FileNotFoundError(f"{path}: no such file")
    if Path(path).suffix == ".hex":
        return bytes.fromhex("".join(data.decode("ascii").split()))
    return data


def write_hex(data: bytes, path) -> Path:
    """Save ``data`` as a ``.hex`` text file of 64 hex digits a line (``read_input`` reads it)."""
    text = data.hex()
    Path(path).write_text("\n".join(text[i : i + 64] for i in range(0, len(text), 64)) + "\n")
    return Path(path)


def replay(kind: str, path, backend: str = "cpu") -> None:
    """Run harness ``kind`` once on the saved input at ``path`` (see ``read_input``), in this
    process. Raises what the harness lets through: any exception is a finding."""
    TARGETS[kind](read_input(path), backend)


def main(argv=None) -> int:
    """Run one harness under atheris (libFuzzer) with its seed corpus, or replay saved inputs.
    Returns libFuzzer's exit status, or for ``--replay`` the number of inputs that failed."""
    args, extra = _parser().parse_known_args(argv)
    from mnnpy.backend import backend_availability

    usable, why = backend_availability(args.backend)
    if not usable:
        print(f"--backend {args.backend}: {why}", file=sys.stderr)
        return 2
    if args.replay:
        failed = 0
        for path in args.replay:
            try:
                data = read_input(path)
            except (OSError, ValueError) as e:
                print(f"{path}: cannot read it: {e}", file=sys.stderr)
                return 2
            try:
                TARGETS[args.kind](data, args.backend)
                print(f"{path}: ok")
            except Exception as e:  # noqa: BLE001 - reporting the finding is the point
                failed += 1
                print(f"{path}: {type(e).__module__}.{type(e).__name__}: {e}")
        return min(failed, 125)
    import atheris

    corpus = Path(args.corpus) if args.corpus else Path(tempfile.mkdtemp(prefix=f"mnnpy-fuzz-{args.kind}-"))
    seed_corpus(corpus, args.kind)
    target, backend = TARGETS[args.kind], args.backend
    flags = [
        sys.argv[0],
        str(corpus),
        f"-runs={args.runs}",
        f"-seed={args.seed}",
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_mb}",
        "-max_len=65536",
        *[f for f in extra if f != "--"],
    ]
    from mnnpy.converter import convert

    for m in seed_models().values():  # loads the kernels the seeds reach, so that they are instrumented
        exercise(convert(m), backend)
    _instrument(atheris)  # coverage of the loaded functions guides the mutations
    atheris.Setup(flags, lambda data: target(data, backend))
    atheris.Fuzz()
    return 0


INSTRUMENTED = ("mnnpy", "numpy", "onnx", "google", "flatbuffers")  # what the inputs drive: the engine and its parsers


def _instrument(atheris) -> None:
    """``atheris.instrument_all`` limited to the packages of ``INSTRUMENTED``: every function of
    theirs loaded now gets coverage instrumentation. atheris takes about 3 ms a function; all
    of them (numba's ten thousand among the 24,000 loaded once the CPU backend's compiled
    kernels are) took a harness's start from about 45 s to about 90, for coverage of the
    standard library and of compilers that says nothing of mnnpy's."""
    import gc
    import types

    funcs = [
        f
        for f in gc.get_objects()
        if isinstance(f, types.FunctionType) and (getattr(f, "__module__", None) or "").split(".")[0] in INSTRUMENTED
    ]
    for f in funcs:
        try:
            atheris.instrument_func(f)
        except Exception:  # noqa: BLE001 - as atheris.instrument_all: a function it cannot patch stays as it is
            pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mnnpy.tools.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=sorted(TARGETS), help="loader: mnnpy files; converter: ONNX protobufs")
    p.add_argument("--runs", type=int, default=10_000, help="inputs to try (default 10000; -1: until stopped)")
    p.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed (default 1)")
    p.add_argument("--corpus", help="corpus folder (default: a new temporary one, seeded)")
    p.add_argument("--backend", default="cpu", help="backend the sessions use (default cpu)")
    p.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10): longer is a hang")
    p.add_argument("--replay", nargs="+", metavar="FILE", help="run these saved inputs once each and report")
    p.add_argument("--rss-mb", type=int, default=3072, help="RSS limit of the process, MB (default 3072)")
    return p


if __name__ == "__main__":
    raise SystemExit(main())

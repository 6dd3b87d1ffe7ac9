"""``mnnpy diff MODEL``: a backend's outputs against a reference on the same random inputs.

After TensorFlow Lite's ``inference_diff`` tool: seeded Gaussian inputs (N(0, 1) floats;
integers 0..9 and fair booleans, ``mnnpy.tools.inputs``) go through a reference (mnnpy's CPU
backend on one thread, ``--reference cpu``, or onnxruntime's CPU provider,
``--reference onnxruntime``, which needs the ONNX file) and through each ``--backend`` at
``--precision``; over ``--runs`` runs (a new seed each), per output: the mean, std and max of
``|actual - expected|``, the max relative difference ``|actual - expected| / |expected|``
(over elements with ``|expected| > atol``), and pass/fail against DESIGN.md's tolerance
(``mnnpy.tools.tolerances``): fp16 storage (``--precision low``) ``HALF``, else the
accumulating ops' ``ACCUMULATE`` for float outputs; integer and boolean outputs ``EXACT``.
An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (NaN where the
reference has NaN). A dynamic input dim without ``--shape`` is 1 (the first) or 64, said on
stderr (``inputs.note_assumed_dims``). ``--all-tensors``: every tensor of the main graph is compared in op
order (each made an output of a copy of the model, which may keep a backend from fusing it
with its consumer) and the first op whose output fails is named. Exit status 0 when every
output of every backend passes, 1 otherwise, 2 on bad input (``error: ...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from mnnpy.errors import InputError
from mnnpy.tools import tolerances
from mnnpy.tools.inputs import feeds_from_options, load_model, note_assumed_dims, onnx_reference
from mnnpy.tools.table import backend_list, format_table


@dataclasses.dataclass
class OutputDiff:
    """One output's differences over all runs: abs diffs' mean/std/max, max relative diff,
    the tolerance (atol, rtol) and whether every element passed."""

    name: str
    mean_abs: float = 0.0
    std_abs: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    passed: bool = True
    note: str = ""


def tolerance_for(dtype: np.dtype, precision: str):
    """DESIGN.md's tolerance of a whole output: ``HALF`` at ``precision="low"``, else
    ``ACCUMULATE`` for floats; ``EXACT`` for integers and booleans."""
    if np.dtype(dtype).kind != "f":
        return tolerances.EXACT
    return tolerances.HALF if precision == "low" else tolerances.ACCUMULATE


def compare(name: str, got_runs: list[np.ndarray], want_runs: list[np.ndarray], precision: str) -> OutputDiff:
    """The ``OutputDiff`` of one output over several runs (arrays of any shape and dtype)."""
    tol = tolerance_for(want_runs[0].dtype, precision)
    d = OutputDiff(name, atol=tol["atol"], rtol=tol["rtol"])
    diffs, rels = [], []
    for got, want in zip(got_runs, want_runs):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            d.passed, d.note = False, f"shape {got.shape}, reference {want.shape}"
            return d
        e, a = want.astype(np.float64).ravel(), got.astype(np.float64).ravel()
        nan = np.isnan(e)
        if (np.isnan(a) != nan).any():
            d.passed, d.note = False, f"NaN in {int((np.isnan(a) != nan).sum())} elements where the reference has none"
        e, a = e[~nan], a[~nan]
        ad = np.abs(a - e)
        ad[np.isinf(e) & (a == e)] = 0.0
        if (ad > d.atol + d.rtol * np.abs(e)).any():
            d.passed = False
        diffs.append(ad)
        big = np.abs(e) > d.atol
        rels.append(ad[big] / np.abs(e[big]))
    allabs = np.concatenate(diffs) if diffs else np.zeros(0)
    allrel = np.concatenate(rels) if rels else np.zeros(0)
    if allabs.size:
        d.mean_abs, d.std_abs, d.max_abs = float(allabs.mean()), float(allabs.std()), float(allabs.max())
    d.max_rel = float(allrel.max()) if allrel.size else 0.0
    return d


def _reference_runner(args, interp):
    """The reference: ``(feeds, names) -> {name: array}`` on one CPU thread (mnnpy or onnxruntime)."""
    if args.reference == "cpu":
        if args.onnx:
            raise InputError("--onnx is the ONNX file for --reference onnxruntime: give both, or neither")
        session = interp.create_session(backend="cpu", num_threads=1, precision="high")
        return lambda feeds, names: session.run(feeds, names)
    onnx_path = args.onnx or (args.model if str(args.model).lower().endswith(".onnx") else None)
    if onnx_path is None:
        raise InputError("--reference onnxruntime needs the ONNX model: give MODEL as a .onnx file, or --onnx FILE")
    sess = onnx_reference(onnx_path, interp, 1, "--onnx" if args.onnx else "model")
    return lambda feeds, names: dict(zip(names, sess.run(names, feeds)))


def with_all_tensors(interp):
    """A copy of ``interp`` whose main graph outputs every float/int tensor its ops write, in
    op order (the graph's own outputs kept): ``(Interpreter, [(tensor name, op name, op type)])``."""
    from mnnpy.interpreter import Interpreter

    main = interp.net.main
    seen, order, outs = set(main.outputs), [], list(main.outputs)
    for op in main.ops:
        for t in op.outputs:
            if t < 0 or main.tensors[t].kind != "tensor":
                continue
            order.append((main.tensors[t].name, op.name, op.type))
            if t not in seen:
                seen.add(t)
                outs.append(t)
    graphs = [dataclasses.replace(main, outputs=outs), *interp.net.graphs[1:]]
    return Interpreter(dataclasses.replace(interp.net, graphs=graphs)), order


def diff_backend(args, interp, reference, backend: str, feeds_list: list[dict], names: list[str]) -> list[OutputDiff]:
    """Run ``backend`` and ``reference`` on each feeds; one ``OutputDiff`` per name of ``names``."""
    session = interp.create_session(backend=backend, precision=args.precision, num_threads=args.threads)
    try:
        got = [session.run(f, names) for f in feeds_list]
    finally:
        session.close()
    want = [reference(f, names) for f in feeds_list]
    return [compare(n, [g[n] for g in got], [w[n] for w in want], args.precision) for n in names]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy diff``'s options."""
    p.add_argument("model", help=".mnnpy file or .onnx file (converted in memory)")
    p.add_argument("--backend", action="append", default=[], help="backend(s) to check, e.g. opencl or cpu,vulkan (default cpu)")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"), help="low: fp16 storage, fp16 tolerance")
    p.add_argument("--reference", default="cpu", choices=("cpu", "onnxruntime"), help="the reference, on one CPU thread")
    p.add_argument("--onnx", help="the ONNX file of a .mnnpy MODEL, for --reference onnxruntime")
    p.add_argument("--runs", type=int, default=3, help="runs, each on new random inputs (default 3)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads of the checked backend")
    p.add_argument("--seed", type=int, default=0, help="seed of the first run's inputs (>= 0)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...", help="shape of a random input")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input from a .npy file")
    p.add_argument("--all-tensors", action="store_true", help="compare every tensor; name the first op whose output fails")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    """``mnnpy diff``: exit status 0 when every output passes, 1 when one fails."""
    from mnnpy.cli import MAX_THREADS, check_int

    check_int(args.runs, "--runs", 1, 1000)
    check_int(args.seed, "--seed", 0)
    check_int(args.threads, "--threads", 1, MAX_THREADS)
    interp, _ = load_model(args.model)
    order = None
    if args.all_tensors:
        if args.reference != "cpu":
            raise InputError("--all-tensors needs --reference cpu (onnxruntime's tensors are not named alike)")
        interp, order = with_all_tensors(interp)
    reference = _reference_runner(args, interp)
    note_assumed_dims(interp, args.input, args.shape)
    feeds_list = [feeds_from_options(interp, args.input, args.shape, args.seed + i, gaussian=True) for i in range(args.runs)]
    names = [d.name for d in interp.outputs]
    results = {b: diff_backend(args, interp, reference, b, feeds_list, names) for b in backend_list(args.backend)}
    if args.json:
        print(json.dumps({b: [dataclasses.asdict(d) for d in ds] for b, ds in results.items()}, indent=1))
    else:
        _print(args, results, order)
    return 0 if all(d.passed for ds in results.values() for d in ds) else 1


def _print(args, results: dict[str, list[OutputDiff]], order) -> None:
    """The table of outputs (or, with ``--all-tensors``, the first failing op per backend)."""
    print(f"reference: {args.reference} (1 thread); precision {args.precision}; {args.runs} run(s), Gaussian inputs")
    rows = []
    for b, ds in results.items():
        shown = ds if order is None else _first_failures(ds, order)
        for d in shown:
            tol = f"{d.atol:.3g}+{d.rtol:.3g}|x|"
            verdict = "pass" if d.passed else "FAIL" + (f" ({d.note})" if d.note else "")
            stats = [f"{v:.3g}" for v in (d.mean_abs, d.std_abs, d.max_abs, d.max_rel)]
            rows.append([b, d.name, *stats, tol, verdict])
    print(format_table(["backend", "tensor", "mean abs", "std abs", "max abs", "max rel", "tolerance", "result"], rows))
    if order is not None:
        ops = {n: (op, kind) for n, op, kind in order}
        for b, ds in results.items():
            bad = next((d for d in _in_order(ds, order) if not d.passed), None)
            op = None if bad is None else ops[bad.name]
            where = "no tensor fails" if op is None else f"first failing op: {op[0]} ({op[1]}) -> {bad.name}"
            print(f"{b}: {where}")


def _in_order(ds: list[OutputDiff], order) -> list[OutputDiff]:
    by_name = {d.name: d for d in ds}
    return [by_name[n] for n, _, _ in order if n in by_name]


def _first_failures(ds: list[OutputDiff], order, count: int = 5) -> list[OutputDiff]:
    """The first ``count`` failing tensors in op order, else the last tensor (all passed)."""
    ordered = _in_order(ds, order)
    bad = [d for d in ordered if not d.passed][:count]
    return bad or ordered[-1:]

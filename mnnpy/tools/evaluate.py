"""``mnnpy eval ocr|classify``: task evaluations (after TensorFlow Lite's evaluation tools).

``ocr``: ``mnnpy.tools.eval_ocr``; ``classify``: ``mnnpy.tools.eval_classify``. Each module
defines ``add_arguments(parser)`` and ``run(args) -> int``; this one dispatches and checks
the common options.

The tables' ``precision`` column (``precision_label``) is the storage precision actually used,
and on a GPU backend the ``--precision`` level that chose it: ``fp32/high``, ``fp32/normal``,
``fp16/low``; the CPU backend and onnxruntime compute in fp32 at any level: ``fp32``.
"""

from __future__ import annotations

import argparse
import importlib

TASKS = {
    "ocr": ("mnnpy.tools.eval_ocr", "PP-OCR on generated text lines: exact-line accuracy, CER, latency per backend"),
    "classify": ("mnnpy.tools.eval_classify", "a classifier's top-1/top-5 agreement with onnxruntime, and latency"),
}


def add_common_arguments(p: argparse.ArgumentParser, plot: str) -> None:
    """The options every task takes: ``--backend``, ``--precision`` (each repeatable or
    comma-separated), ``--seed``, ``--threads``, ``--plot`` (default ``plot``)."""
    from mnnpy.tools.eval_plot import add_plot_argument

    p.add_argument("--backend", action="append", default=[], help="backend(s), e.g. cpu,opencl,vulkan (default cpu)")
    p.add_argument("--precision", action="append", default=[], help="precision(s): high, normal, low (default normal)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data (>= 0)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (mnnpy's CPU backend and onnxruntime)")
    add_plot_argument(p, plot)


def checked_runs(args: argparse.Namespace, count: int, option: str) -> list[tuple[str, str]]:
    """Check the common options and ``count`` (of ``option``, 1..100000) and return the
    ``(backend, precision)`` pairs to evaluate: each backend at each precision, the CPU
    backend once (it computes in fp32 whatever the precision). Raises ``InputError``."""
    from mnnpy.cli import MAX_THREADS, check_int
    from mnnpy.errors import InputError
    from mnnpy.tools.eval_plot import check_plot
    from mnnpy.tools.table import backend_list

    check_int(count, option, 1, 100_000)
    check_int(args.seed, "--seed", 0)
    check_int(args.threads, "--threads", 1, MAX_THREADS)
    precisions = backend_list(args.precision, default="normal", option="--precision")
    bad = [p for p in precisions if p not in ("high", "normal", "low")]
    if bad:
        raise InputError(f"--precision {bad[0]!r}: choose high, normal or low")
    if not getattr(args, "save_images", None):  # --save-images writes the lines only: no plot
        check_plot(args)
    return [(b, p) for b in backend_list(args.backend) for p in (precisions if b != "cpu" else precisions[:1])]


def precision_label(backend: str, precision: str) -> str:
    """The tables' precision column: ``fp32`` on the CPU backend and onnxruntime (fp32 at any
    level), else the storage precision and the level: ``fp32/high``, ``fp32/normal``, ``fp16/low``."""
    if backend in ("cpu", "onnxruntime"):
        return "fp32"
    return f"{'fp16' if precision == 'low' else 'fp32'}/{precision}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One sub-parser per task."""
    sub = p.add_subparsers(dest="task", metavar="TASK", required=True)
    for name, (module, help) in TASKS.items():
        importlib.import_module(module).add_arguments(sub.add_parser(name, help=help, description=help))


def run(args: argparse.Namespace) -> int:
    """Run the task's ``run(args)``."""
    return importlib.import_module(TASKS[args.task][0]).run(args)

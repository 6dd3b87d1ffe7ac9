"""``mnnpy eval ocr|classify``: task evaluations (after TensorFlow Lite's evaluation tools).

``ocr``: ``mnnpy.tools.eval_ocr``; ``classify``: ``mnnpy.tools.eval_classify``. Each module
defines ``add_arguments(parser)`` and ``run(args) -> int``; this one only dispatches.
"""

from __future__ import annotations

import argparse
import importlib

TASKS = {
    "ocr": ("mnnpy.tools.eval_ocr", "PP-OCR on generated text lines: exact-line accuracy, CER, latency per backend"),
    "classify": ("mnnpy.tools.eval_classify", "a classifier's top-1/top-5 agreement with onnxruntime, and latency"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One sub-parser per task."""
    sub = p.add_subparsers(dest="task", metavar="TASK", required=True)
    for name, (module, help) in TASKS.items():
        importlib.import_module(module).add_arguments(sub.add_parser(name, help=help, description=help))


def run(args: argparse.Namespace) -> int:
    """Run the task's ``run(args)``."""
    return importlib.import_module(TASKS[args.task][0]).run(args)

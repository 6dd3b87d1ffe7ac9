"""The plot of ``mnnpy eval``: accuracy against latency, one labelled point per backend and
precision, written as a PNG with matplotlib (an optional dependency: ``pip install
'mnnpy[tools]'``), imported only when a plot is drawn."""

from __future__ import annotations

import argparse
import importlib.util
import os

from mnnpy.errors import InputError


def add_plot_argument(p: argparse.ArgumentParser, default: str) -> None:
    """``--plot FILE.png`` (default ``default``; ``--plot ''`` for none; a name not ending in
    ``.png`` is refused)."""
    p.add_argument(
        "--plot",
        default=default,
        metavar="FILE.png",
        help=f"write the plot here, a PNG: the name must end in .png (default {default}; '' for none)",
    )


def check_plot(args: argparse.Namespace) -> None:
    """Before any work: ``InputError`` when ``--plot`` is asked for without matplotlib, names a
    folder or a file not ending in ``.png``, or its folder does not exist or is not writable
    (nor the file, where it exists)."""
    if not args.plot:
        return
    if importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot needs matplotlib: pip install 'mnnpy[tools]' (or --plot '' for no plot)")
    if os.path.isdir(args.plot):
        raise InputError(f"--plot {args.plot}: a folder; give a file name ending in .png")
    if not args.plot.lower().endswith(".png"):
        raise InputError(f"--plot {args.plot}: the plot is a PNG; give a file name ending in .png")
    check_writable("--plot", args.plot)


def check_writable(option: str, path: str) -> None:
    """Before any work: ``InputError`` when the output file ``path`` of ``option`` is a folder,
    its folder does not exist, or either cannot be written."""
    if os.path.isdir(path):
        raise InputError(f"{option} {path}: a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{option} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"{option} {path}: cannot write there (permission denied)")


def plot_accuracy_latency(points: list[tuple[str, float, float]], path: str, title: str, ylabel: str) -> None:
    """``points``: ``(label, latency ms, accuracy %)``; a scatter with labels, latency on a log
    axis, written to ``path`` as a PNG (matplotlib's Agg backend; no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, ms, acc in points:
        ax.scatter([ms], [acc])
        ax.annotate(label, (ms, acc), textcoords="offset points", xytext=(5, 5), fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("latency per item, ms (log)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as e:
        raise InputError(f"--plot {path}: cannot write: {e.strerror or e}") from None
    finally:
        plt.close(fig)

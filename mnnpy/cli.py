"""The ``mnnpy`` command: ``convert``, ``info``, ``run`` (and more registered with ``command``).

Each subcommand is an entry of ``COMMANDS``: a name, a help line, a function adding
its arguments to an ``argparse`` parser, and a handler ``fn(args) -> exit code``.
Another module adds one with the ``command`` decorator, or lazily: an entry
``name: (module, help)`` in ``LAZY_COMMANDS``, where ``module`` defines
``add_arguments(parser)`` and ``run(args) -> int`` and is imported only when that
subcommand is asked for (``mnnpy demo`` -> ``mnnpy.apps.demo``, ``mnnpy ocr`` ->
``mnnpy.apps.ocr_folder``, ``mnnpy vad`` -> ``mnnpy.apps.vad``, ``mnnpy stress`` ->
``mnnpy.stress``, ``mnnpy cache`` -> ``mnnpy.tools.cache``). Errors from mnnpy (``MnnpyError``) print ``error: ...`` on stderr
and exit 2, without a traceback; a stdout pipe closed by its reader (``| head -1``) ends
the command quietly with 141.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mnnpy.errors import InputError, MnnpyError
from mnnpy.files import atomic_write
from mnnpy.interpreter import MAX_THREADS
from mnnpy.tools.inputs import default_shape, feeds_from_options, pairs, parse_shape


@dataclass(frozen=True)
class Command:
    """A subcommand: ``configure(parser)`` adds its arguments; ``run(args)`` returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}
# subcommands defined elsewhere: name -> (module with add_arguments/run, help line)
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("mnnpy.apps.demo", "read a line of text with PP-OCR (detection + recognition) and time each stage"),
    "ocr": ("mnnpy.apps.ocr_folder", "read every image of a folder with PP-OCR, here or on Ray (--ray); one JSON line each"),
    "vad": ("mnnpy.apps.vad", "find the speech segments of a WAV file with silero-vad (start and end in seconds)"),
    "bench": ("mnnpy.tools.bench", "latency statistics of a model on backends side by side (TFLite's benchmark_model)"),
    "diff": ("mnnpy.tools.diff", "a backend's outputs against a reference (CPU, 1 thread, or onnxruntime) on random inputs"),
    "eval": ("mnnpy.tools.evaluate", "task evaluations: ocr (accuracy, CER, latency per backend), classify (agreement)"),
    "cache": ("mnnpy.tools.cache", "the compilation cache (create_session(cache_dir=...)): list, verify or clear its entries"),
    "stress": ("mnnpy.stress", "crash and hang stress tests (MLTS), each in a child process, on each backend; HTML report"),
}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    """Register the decorated ``fn(args) -> int`` as subcommand ``name``; twice is an error."""

    def deco(fn):
        if name in COMMANDS:
            raise ValueError(f"mnnpy subcommand '{name}' registered twice")
        COMMANDS[name] = Command(name, help, configure, fn)
        return fn

    return deco


# ------------------------------------------------------------------------------ convert
def _convert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("onnx", help="input ONNX model")
    p.add_argument("output", help="output .mnnpy file")
    p.add_argument("--no-optimize", action="store_true", help="skip the graph optimisations")


@command("convert", "convert an ONNX model to .mnnpy", _convert_args)
def _convert(args) -> int:
    from mnnpy.converter import serialize, to_net, write
    from mnnpy.converter.optimize import op_counts, optimize

    net = to_net(args.onnx, optimize_graph=False)
    before = op_counts(net)
    if not args.no_optimize:
        optimize(net)
    after = op_counts(net)
    data = serialize(net)
    write(data, args.output)
    print(f"ops: {sum(before.values())} -> {sum(after.values())}")
    for t in sorted(set(before) | set(after), key=lambda t: (-before[t], t)):
        print(f"  {t:<24} {before[t]:>5} -> {after[t]:>5}")
    print(f"wrote {args.output}: {len(data)} bytes ({len(data) / 2**20:.2f} MiB)")
    return 0


# ------------------------------------------------------------------------------ devices
def _devices_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measure", action="store_true", help="measure each device's capabilities (cached ones are reused)")
    p.add_argument(
        "--scale",
        choices=("full", "tiny"),
        default=None,
        help="the reference workloads' size (--measure: default full; listing: default what auto uses, full ones first)",
    )
    p.add_argument("--runs", type=int, default=None, help="timed runs per workload and backend (default 5; tiny: 3)")


@command(
    "devices",
    "list the devices of every backend (mnnpy.devices()), whether each can run here, and their capabilities",
    _devices_args,
)
def _devices(args) -> int:
    from mnnpy.backend import _load_runtime_class, backend_availability, registered_backends
    from mnnpy.capability_workloads import WORKLOADS
    from mnnpy.device import devices

    check_int(args.runs, "--runs", 1, 1000)
    if args.runs is not None and not args.measure:
        raise InputError("--runs sets how often --measure runs each workload: give it with --measure")
    listed = devices(include_unavailable=True)
    bar = _progress_bar(len([d for d in listed if d.available]) * len(WORKLOADS)) if args.measure else None
    for name in registered_backends():
        ok, reason = backend_availability(name)
        print(f"{name}: {'available' if ok else 'unavailable: ' + reason}")
        for d in (d for d in listed if d.backend == name and d.available):  # also when a device filter matched none
            print(f"  {d.describe()}")
            print(f"    {d.description}")
            for line in _capability_lines(d, args, bar):
                print(f"    {line}")
        info = getattr(_load_runtime_class(name), "cache_info", None) if ok else None
        if info is not None:
            print(f"  {info()}")
    if bar is not None:
        bar.close()
    return 0


def _capability_lines(device, args, bar) -> list[str]:
    """The device's capabilities table: measured (``--measure``, cached ones reused) or cached."""
    from mnnpy.capabilities import capabilities, load_cached

    if args.measure:
        if bar is not None:
            bar.set_description(device.id)
        return capabilities(device, args.scale or "full", args.runs, bar and (lambda _: bar.update())).table()
    if args.scale is None:  # what AUTO placement uses: full workloads' figures, else tiny ones
        from mnnpy.auto_devices import cached_capabilities

        cached, _ = cached_capabilities(device)
        if cached is not None:
            return cached.table()
    cached, why = load_cached(device, args.scale or "full")
    return cached.table() if cached is not None else [f"capabilities: {why} (mnnpy devices --measure)"]


def _progress_bar(total: int):
    """A tqdm bar on stderr where tqdm is installed, else None."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="workload", file=sys.stderr, leave=False)


# --------------------------------------------------------------------------------- info
def _dims(shape) -> str:
    if shape is None:
        return "(rank unknown)"
    return "(" + ", ".join(str(d) if isinstance(d, int) else (d or "?") for d in shape) + ")"


def _info_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=".mnnpy file")
    p.add_argument("--partitions", action="store_true", help="print the schedule: partitions, ops, why ops fell back")
    p.add_argument("--dot", metavar="FILE", help="write the schedule as Graphviz, ops coloured by backend ('-' = stdout)")
    p.add_argument("--backend", default="auto", help="for --partitions/--dot: backend, preference list or auto (default)")
    p.add_argument(
        "--supported", metavar="DEVICE", help="which ops DEVICE (e.g. vulkan, opencl:1; mnnpy devices) supports, and why not"
    )
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="input shape to schedule for (default: batch 1, other dynamic dims 64)",
    )


@command(
    "info",
    "describe a .mnnpy model; --partitions/--dot: how it is split across backends; --supported: ops a device runs",
    _info_args,
)
def _info(args) -> int:
    from mnnpy.interpreter import Interpreter

    interp = Interpreter(args.model)
    if args.supported is not None:
        return _info_supported(args, interp)
    if args.partitions or args.dot is not None:
        if args.dot == "":
            raise InputError("--dot needs a file name, or - for stdout")
        return _info_schedule(args, interp)
    net = interp.net
    print(f"model: {args.model}")
    print(f"format version: {net.format_version}")
    print(f"producer: {net.producer_name or '?'} {net.producer_version}".rstrip())
    print("inputs:")
    for d in interp.inputs:
        print(f"  {d.name}: {d.dtype} {_dims(d.shape)}")
    print("outputs:")
    for d in interp.outputs:
        print(f"  {d.name}: {d.dtype} {_dims(d.shape)}")
    counts: dict[str, int] = {}
    for op in net.main.ops:
        counts[op.type] = counts.get(op.type, 0) + 1
    print(f"ops: {sum(counts.values())}" + (f" (+{len(net.graphs) - 1} subgraphs)" if len(net.graphs) > 1 else ""))
    for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {t:<24} {n:>5}")
    print("metadata:" + ("" if net.metadata else " (none)"))
    for k, v in net.metadata.items():
        shown = repr(v) if len(v) <= 40 and "\n" not in v else f"<{len(v)} characters>"
        print(f"  {k}: {shown}")
    return 0


def _info_shapes(args, interp) -> dict[str, tuple[int, ...]]:
    """The input shapes ``info`` describes: ``--shape`` where given, else batch 1 and other
    dynamic dims 64 (``default_shape``); ``InputError`` for an unknown name or unknown rank."""
    shapes = {name: parse_shape(name, text) for name, text in pairs(args.shape, "--shape").items()}
    names = {d.name for d in interp.inputs}
    for name in shapes:
        if name not in names:
            raise InputError(f"unknown input name '{name}'; the model's inputs are {sorted(names)}")
    for d in interp.inputs:
        if d.name not in shapes and d.shape is None:
            raise InputError(f"input '{d.name}' has unknown rank: give --shape {d.name}=D0,D1,...")
    return {d.name: shapes[d.name] if d.name in shapes else default_shape(d.shape) for d in interp.inputs}


def _info_supported(args, interp) -> int:
    """``info --supported DEVICE``: per op, whether the device supports it at ``--shape``, and why not."""
    from mnnpy.device import get_device

    device = get_device(args.supported)
    chosen = _info_shapes(args, interp)
    listed = interp.supported_ops(device, chosen)
    count = sum(1 for s in listed if s.supported)
    print(f"model: {args.model}; device: {device.id} {device.name}; input shapes: {chosen}")
    print(f"{count} of {len(listed)} ops supported on {device.id}")
    for s in listed:
        print(f"  {s.describe()}")
    return 0


def _info_schedule(args, interp) -> int:
    """``info --partitions`` / ``--dot``: the Schedule for ``--backend`` at ``--shape``."""
    backend = args.backend.split(",") if "," in args.backend else args.backend
    session = interp.unplanned_session(backend)  # describes the schedule; allocates nothing
    chosen = _info_shapes(args, interp)
    if args.partitions and args.dot == "-":
        raise InputError("--partitions and --dot - both write to stdout; give --dot a file name")
    if args.partitions:
        print(f"model: {args.model}; backends: {', '.join(b.name for b in session.backends)}; input shapes: {chosen}")
        print(session.partitions(chosen))
    if args.dot is not None:
        text = session.dot(chosen)
        if args.dot == "-":
            sys.stdout.write(text)
        else:
            try:
                atomic_write(args.dot, text.encode(), private=False, devices_in_place=True)  # a pipe without a reader: ENXIO
            except OSError as e:
                raise InputError(f"--dot {args.dot}: cannot write: {e.strerror or e}") from None
            print(f"wrote {args.dot} (render: dot -Tsvg {args.dot} -o schedule.svg)")
    return 0


# ---------------------------------------------------------------------------------- run
def check_int(value: int | None, option: str, low: int, high: int | None = None) -> None:
    """``InputError`` unless ``value`` (an option's parsed int; ``None`` = not given) is in ``low..high``."""
    if value is not None and not (low <= value and (high is None or value <= high)):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise InputError(f"{option} must be {bound}, got {value}")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=".mnnpy file")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input from a .npy file")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="shape of a random input (positive dims; NAME= for a scalar)",
    )
    p.add_argument("--backend", default="cpu", help="backend name, a comma-separated preference list, or auto")
    p.add_argument("--threads", type=int, default=None, help=f"CPU threads (1..{MAX_THREADS})")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"), help="low: fp16 storage on GPU backends")
    p.add_argument("--tuning", default="none", choices=("none", "fast", "wide"), help="GPU work-group auto-tuning at resize")
    p.add_argument("--repeat", type=int, default=10, help="timed runs after the first (default 10)")
    p.add_argument(
        "--loop-timeout",
        type=float,
        default=2.0,
        metavar="S",
        help="how long each Loop may run, s (default 2, at most 15: NNAPI's)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (>= 0, default 0)")
    p.add_argument("--timing", action="store_true", help="measure NNAPI's Timing of each run (on-device and in-driver µs)")
    p.add_argument("--async", dest="in_flight", type=int, default=0, metavar="N", help="keep N runs in flight with run_async")
    p.add_argument("--deadline-ms", type=float, default=None, metavar="MS", help="deadline of each run, ms after it is asked for")
    p.add_argument(
        "--outputs-on-device",
        action="store_true",
        help="leave the outputs on the device (device tensors, valid until the next run); print their first values",
    )


@command("run", "run a .mnnpy model on given or random inputs and time it", _run_args)
def _run(args) -> int:
    from mnnpy.interpreter import Interpreter

    check_int(args.repeat, "--repeat", 0)
    check_int(args.threads, "--threads", 1, MAX_THREADS)
    check_int(args.seed, "--seed", 0)
    interp = Interpreter(args.model)
    feeds = feeds_from_options(interp, args.input, args.shape, args.seed)
    backend = args.backend.split(",") if "," in args.backend else args.backend
    session = interp.create_session(backend=backend, num_threads=args.threads, precision=args.precision, tuning=args.tuning)
    options = {"loop_timeout": args.loop_timeout, "measure_timing": args.timing, "timeout_ms": args.deadline_ms}
    if args.outputs_on_device:
        options["outputs_on_device"] = True
    check_int(args.in_flight, "--async", 0, 64)
    t0 = time.perf_counter()  # the first run resizes for the input shapes: no deadline for it
    outputs = session.run(feeds, **{k: v for k, v in options.items() if k != "timeout_ms"})
    first = (time.perf_counter() - t0) * 1e3
    times, timings, missed, wall = _timed_runs(session, feeds, options, args.repeat, args.in_flight)
    for name, a in feeds.items():
        print(f"input  {name}: {a.dtype} {tuple(a.shape)}")
    if args.outputs_on_device:
        kept = ", ".join(f"{name} on {a.device}" for name, a in outputs.items() if hasattr(a, "device"))
        print(f"outputs stayed on the device: {kept} (device tensors; first values read with .numpy())")
        outputs = session.run(feeds, **options)  # the timed runs made the first run's tensors stale
        outputs = {name: a.numpy() if hasattr(a, "numpy") else a for name, a in outputs.items()}
    for name, a in outputs.items():
        flat = a.reshape(-1)[:6]
        print(f"output {name}: {a.dtype} {tuple(a.shape)} first values {np.array2string(flat, precision=5, separator=', ')}")
    median = f"{statistics.median(times):.3f} ms (median of {len(times)})" if times else "n/a (--repeat 0)"
    print(f"latency: first {first:.3f} ms, {median}")
    if args.in_flight and times:
        print(f"throughput: {len(times) / wall:.1f} runs/s with {args.in_flight} in flight (run_async)")
    if timings:
        dev = [t.on_device_us for t in timings if t.on_device_us is not None]
        drv = statistics.median(t.in_driver_us for t in timings)
        on_dev = f"{statistics.median(dev):.1f} µs" if dev else "not measured"
        print(f"timing (median): on device {on_dev}, in driver {drv:.1f} µs")
    if missed:
        print(f"deadline missed in {missed} of {args.repeat} runs (--deadline-ms {args.deadline_ms:g})", file=sys.stderr)
        return 1
    return 0


def _timed_runs(session, feeds, options, repeat: int, in_flight: int):
    """``repeat`` runs, one after the other or ``in_flight`` at a time (``run_async``): their
    latencies (ms, from the call to the result), their Timings, how many missed their
    deadline, and the wall time of all of them (s)."""
    from mnnpy.errors import DeadlineMissedError

    times, timings, missed, pending = [], [], 0, []
    start = time.perf_counter()

    def record(t0, result) -> None:
        """One run's latency and timing from ``t0``; ``result()`` gives its outputs."""
        nonlocal missed
        try:
            r = result()
        except DeadlineMissedError:
            missed += 1
            return
        times.append((time.perf_counter() - t0) * 1e3)
        if r.timing is not None:
            timings.append(r.timing)

    for _ in range(repeat):
        if not in_flight:
            record(time.perf_counter(), lambda: session.run(feeds, **options))
            continue
        if len(pending) >= in_flight:
            t0, future = pending.pop(0)
            record(t0, future.result)
        pending.append((time.perf_counter(), session.run_async(feeds, **options)))
    for t0, future in pending:
        record(t0, future.result)
    return times, timings, missed, time.perf_counter() - start


# --------------------------------------------------------------------------------- main
def _load_lazy(name: str) -> None:
    """Register lazy subcommand ``name`` by importing its module."""
    module_name, help = LAZY_COMMANDS[name]
    module = importlib.import_module(module_name)
    COMMANDS[name] = Command(name, help, module.add_arguments, module.run)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The top-level parser; a lazy subcommand's module is imported only when ``argv`` names it."""
    from mnnpy import __version__

    for name in LAZY_COMMANDS:
        if name in argv and name not in COMMANDS:
            _load_lazy(name)
    parser = argparse.ArgumentParser(prog="mnnpy", description="MNN-style inference engine: convert, inspect and run models")
    parser.add_argument("--version", action="version", version=f"mnnpy {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in COMMANDS.values():
        c.configure(sub.add_parser(c.name, help=c.help, description=c.help))
    for name, (_, help) in LAZY_COMMANDS.items():
        if name not in COMMANDS:
            sub.add_parser(name, help=help)
    return parser


def _stdout_closed() -> int:
    """The reader of stdout went away (``mnnpy info m.mnnpy | head -1``): point stdout at
    devnull so that Python's final flush cannot fail again, and return 141 (128 + SIGPIPE)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (e.g. captured)
        return 141
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mnnpy`` console script; returns the exit code.

    2 on ``MnnpyError`` (``error: ...`` on stderr, no traceback); 141, quietly, when stdout
    is a pipe closed early by its reader (``mnnpy run m.mnnpy | head -1``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)

    def command() -> int:
        args = build_parser(argv).parse_args(argv)
        return int(COMMANDS[args.command].run(args) or 0)

    return guarded(command)


def guarded(command) -> int:
    """Run ``command()`` as a program's body: its exit status; 2 with ``error: ...`` on stderr
    (no traceback) for an ``MnnpyError``; 130 with ``interrupted`` for Ctrl-C; 141, quietly,
    when stdout is a pipe its reader closed early."""
    try:
        try:
            return command()
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in Python's shutdown
    except BrokenPipeError:
        return _stdout_closed()
    except MnnpyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130  # as a shell reports a process ended by SIGINT


if __name__ == "__main__":
    sys.exit(main())

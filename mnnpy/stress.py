"""Crash and hang stress (NNAPI MLTS): each test in a child process, classified, an HTML report.

``mnnpy stress [--backend B ...] [--test NAME ...] [--timeout S] [--scale F] [--report FILE.html]``
(or ``python -m mnnpy stress ...``) runs every stress test of ``mnnpy.stress_suite`` (``--list`` names them) on every backend
that is available here (cpu, opencl, vulkan; ``--backend`` picks), one child process per
(test, backend), started with multiprocessing's ``spawn`` method: a fresh interpreter, as
GPU drivers do not survive ``fork`` (``mnnpy.fork_guard``), and one test's crash, hang or
leak cannot touch the next. The child reports progress through a pipe; the parent
classifies the child (MLTS's outcomes, plus SKIPPED):

- ``SUCCESS``: the test returned; the detail holds its figures.
- ``SKIPPED``: the test cannot run here (``StressSkip``; the detail says why).
- ``FAILURE``: an assertion or an exception (type, message, innermost frame), or the child
  exited with a non-zero status without reporting (the tail of its stderr).
- ``HANG``: no progress message for ``timeout`` seconds, or the test still running after
  ``TOTAL_FACTOR * timeout``, or the child not exiting within ``timeout`` after its result.
  The parent asks the child for every thread's stack (``SIGUSR1``: ``faulthandler``), waits
  ``STACK_WAIT_S``, then kills it (``SIGKILL``); the detail holds the last progress message
  and the stacks.
- ``CRASH``: the child was killed by a signal (its exit code is minus the signal number),
  also when that happened at exit after a result; the detail names the signal and holds the
  tail of the child's stderr (``faulthandler``'s traceback of a fatal signal).

A stress test is a module-level function ``fn(ctx: StressContext) -> str | None``
(pickled by reference into the child) registered with ``stress_test``; it calls
``ctx.progress(...)`` at least once per ``timeout``, raises ``AssertionError`` (or any
exception) when something is wrong and ``StressSkip`` when it cannot run here, and returns
its figures. The child's stdout and stderr go to a temporary file, read back for the report.
Each child leads a process group of its own; whatever is left of that group when the child
has ended (processes a test started, after a HANG or CRASH) is killed with it.
"""

from __future__ import annotations

import argparse
import faulthandler
import html
import multiprocessing
import os
import platform
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

OUTCOMES = ("SUCCESS", "SKIPPED", "FAILURE", "HANG", "CRASH")
DEFAULT_TIMEOUT_S = 60.0  # seconds without a progress message before a test is a HANG
TOTAL_FACTOR = 10  # a test that keeps reporting progress still ends after TOTAL_FACTOR * timeout
STACK_WAIT_S = 1.0  # seconds between asking a hung child for its stacks and killing it
TAIL_LINES = 30  # lines of a child's stderr kept in a report detail
MAX_DETAIL = 4000  # characters of a detail kept (the tail of longer ones)


class StressSkip(Exception):
    """Raised by a stress test that cannot run here; its message is the reason (SKIPPED)."""


@dataclass(frozen=True)
class StressTest:
    """A stress test: ``run(ctx) -> figures`` (a module-level function), a one-line ``help``."""

    name: str
    run: Callable[[StressContext], str | None]
    help: str


@dataclass
class StressResult:
    """One (test, backend) run: ``outcome`` (one of ``OUTCOMES``), ``seconds`` (wall time of
    the child process, start to exit), ``detail`` (figures or what went wrong) and ``device``
    (the backend's device, as the child's runtime describes it; "" when unknown)."""

    test: str
    backend: str
    outcome: str
    seconds: float
    detail: str
    device: str = ""


STRESS_TESTS: dict[str, StressTest] = {}


def stress_test(name: str, help: str | None = None):
    """Register the decorated ``fn(ctx) -> str | None`` as stress test ``name``, its ``help``
    the first line of its docstring unless given; ``ValueError`` when registered twice or
    without either."""

    def deco(fn):
        if name in STRESS_TESTS:
            raise ValueError(f"stress test '{name}' registered twice")
        line = help or (fn.__doc__ or "").strip().split("\n")[0]
        if not line:
            raise ValueError(f"stress test '{name}' has neither a help line nor a docstring")
        STRESS_TESTS[name] = StressTest(name, fn, line)
        return fn

    return deco


def registered_tests() -> dict[str, StressTest]:
    """Every stress test of ``mnnpy.stress_suite`` (imported here, on first use), by name."""
    import mnnpy.stress_suite  # noqa: F401 - registers its tests

    return dict(STRESS_TESTS)


# --------------------------------------------------------------------------- the child side
class StressContext:
    """What a stress test gets in its child process.

    ``backend``: the backend name to test; ``scale``: multiplies iteration counts (``count``);
    ``progress(what)`` tells the parent the test is alive (thread-safe). ``workdir``: a
    temporary folder of the child, removed when it exits."""

    def __init__(self, backend: str, scale: float, conn, workdir: str):
        self.backend, self.scale, self.workdir = backend, scale, workdir
        self._conn = conn
        self._lock = threading.Lock()

    def count(self, n: int) -> int:
        """``n`` iterations scaled by ``scale``, at least 1."""
        return max(1, round(n * self.scale))

    def progress(self, what: str) -> None:
        """Report progress (``what``: shown in the report if the test hangs after it)."""
        self.send(("progress", str(what)))

    def send(self, message: tuple) -> None:
        """Send ``message`` to the parent (one at a time across threads)."""
        with self._lock:
            self._conn.send(message)


def describe_exception(e: BaseException) -> str:
    """``Type: message (file:line in function)`` of ``e`` at its innermost frame."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def _device(backend: str) -> str:
    """The runtime's one-line description of the device of ``backend`` ("" when it has none)."""
    from mnnpy.backend import get_runtime

    rt = get_runtime(backend)
    if hasattr(rt, "describe"):
        return rt.describe()
    return "; ".join(getattr(type(rt), "list_devices", list)())


def _child(fn: Callable, backend: str, scale: float, conn, log_path: str) -> None:
    """The child process, leader of its own process group: stdout and stderr into
    ``log_path``, fatal signals and ``SIGUSR1`` dump every thread's stack there; run ``fn``
    and send ``("result", outcome, detail, device)``."""
    os.setpgrp()  # a process group of its own: the parent ends what the test started with it
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    with tempfile.TemporaryDirectory(prefix="mnnpy-stress-") as workdir:
        ctx = StressContext(backend, scale, conn, workdir)
        try:
            outcome, detail = "SUCCESS", fn(ctx) or ""
        except StressSkip as e:
            outcome, detail = "SKIPPED", str(e)
        except BaseException as e:  # noqa: BLE001 - every exception is the test's FAILURE
            outcome, detail = "FAILURE", describe_exception(e)
        try:
            device = _device(backend) if outcome != "SKIPPED" else ""
        except Exception as e:  # noqa: BLE001 - a report without the device's name
            device = f"(cannot describe: {describe_exception(e)})"
        ctx.send(("result", outcome, detail, device))
    conn.close()


# -------------------------------------------------------------------------- the parent side
def _tail(path: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of the child's output file ("" when empty or unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _with_output(detail: str, log_path: str) -> str:
    tail = _tail(log_path)
    return f"{detail}\n--- child output (last lines) ---\n{tail}" if tail else detail


def signal_name(code: int) -> str:
    """``SIGSEGV`` for exit code -11 (a child killed by a signal), ``signal N`` when unknown."""
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _stop(proc, log_path: str) -> None:
    """Ask a hung child for its stacks (``SIGUSR1``), give it ``STACK_WAIT_S``, then kill it."""
    try:
        os.kill(proc.pid, signal.SIGUSR1)
    except OSError:
        pass
    proc.join(STACK_WAIT_S)
    if proc.exitcode is None:
        proc.kill()
    proc.join()


def _kill_group(pgid: int) -> None:
    """``SIGKILL`` what is left of the child's process group ``pgid`` (processes the test
    started that outlived it, e.g. after a HANG or CRASH); nothing when none is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _watch(proc, recv, timeout: float, total: float, started: float, log_path: str) -> tuple[str, str, str]:
    """Classify the running child: ``(outcome, detail, device)`` (module docstring)."""
    last, last_time = "started", time.monotonic()
    while True:
        wait = min(last_time + timeout, started + total) - time.monotonic()
        if wait <= 0 or not recv.poll(wait):
            late = time.monotonic() >= started + total
            why = f"still running after {total:g} s" if late else f"no progress for {timeout:g} s"
            _stop(proc, log_path)
            return "HANG", _with_output(f"{why}; last progress: {last}", log_path), ""
        try:
            message = recv.recv()
        except EOFError:  # the child is gone without a result
            break
        if message[0] == "progress":
            last, last_time = message[1], time.monotonic()
            continue
        _, outcome, detail, device = message
        proc.join(timeout)
        if proc.exitcode is None:
            _stop(proc, log_path)
            return "HANG", _with_output(f"{outcome}: {detail}; then did not exit within {timeout:g} s", log_path), device
        if proc.exitcode < 0:
            why = f"{outcome}: {detail}; then killed by {signal_name(proc.exitcode)} at exit"
            return "CRASH", _with_output(why, log_path), device
        if proc.exitcode != 0 and outcome == "SUCCESS":
            return "FAILURE", _with_output(f"{detail}; then exit status {proc.exitcode}", log_path), device
        return outcome, detail, device
    proc.join(timeout)
    if proc.exitcode is None:
        _stop(proc, log_path)
        return "HANG", _with_output(f"closed its pipe but did not exit; last progress: {last}", log_path), ""
    if proc.exitcode < 0:
        why = f"killed by {signal_name(proc.exitcode)} (exit code {proc.exitcode}); last progress: {last}"
        return "CRASH", _with_output(why, log_path), ""
    return "FAILURE", _with_output(f"exited with status {proc.exitcode} without a result; last progress: {last}", log_path), ""


def run_test(
    test: StressTest, backend: str, timeout: float = DEFAULT_TIMEOUT_S, scale: float = 1.0, total: float | None = None
) -> StressResult:
    """Run ``test`` on ``backend`` in a spawned child and classify it (module docstring).

    ``timeout``: seconds without progress before HANG; ``total``: seconds the test may run
    in all (default ``TOTAL_FACTOR * timeout``); ``scale``: the test's iteration counts are
    multiplied by it. Never raises for what the child does."""
    mp = multiprocessing.get_context("spawn")
    recv, send = mp.Pipe(duplex=False)
    fd, log_path = tempfile.mkstemp(prefix=f"mnnpy-stress-{test.name}-", suffix=".log")
    os.close(fd)
    proc = mp.Process(target=_child, args=(test.run, backend, scale, send, log_path), name=f"stress {test.name} {backend}")
    started = time.monotonic()
    try:
        proc.start()
        send.close()  # the child holds the only writer: its death ends the pipe
        outcome, detail, device = _watch(proc, recv, timeout, total or TOTAL_FACTOR * timeout, started, log_path)
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()
        _kill_group(proc.pid)
        os.unlink(log_path)
    if len(detail) > MAX_DETAIL:
        detail = "..." + detail[-MAX_DETAIL:]
    return StressResult(test.name, backend, outcome, time.monotonic() - started, detail, device)


def run_all(
    tests: Sequence[StressTest],
    backends: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT_S,
    scale: float = 1.0,
    on_result: Callable[[StressResult], None] | None = None,
) -> list[StressResult]:
    """Every test on every backend (backend by backend, tests in order); ``on_result`` sees each result as it comes."""
    results = []
    for backend in backends:
        for test in tests:
            r = run_test(test, backend, timeout, scale)
            results.append(r)
            if on_result is not None:
                on_result(r)
    return results


# ------------------------------------------------------------------------------- the report
_COLORS = {"SUCCESS": "#c7e9c0", "SKIPPED": "#e0e0e0", "FAILURE": "#fdd0a2", "HANG": "#fcbba1", "CRASH": "#fb6a4a"}


def report_html(results: Sequence[StressResult], about: dict[str, str]) -> str:
    """The HTML report: ``about`` (key -> value: machine, versions, options), a summary
    (outcomes per backend), then per backend its device and a table: test, outcome, seconds,
    detail."""
    esc = html.escape
    backends = list(dict.fromkeys(r.backend for r in results))
    out = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>mnnpy stress report</title><style>',
        "body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;margin-bottom:2em}",
        "td,th{border:1px solid #999;padding:4px 8px;vertical-align:top;text-align:left}",
        "td.detail{white-space:pre-wrap;font-family:monospace;font-size:90%;max-width:80em}",
        "</style></head><body>",
        "<h1>mnnpy stress report</h1>",
        "<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in about.items()) + "</table>",
        "<h2>Summary</h2>",
        "<table><tr><th>backend</th>" + "".join(f"<th>{o}</th>" for o in OUTCOMES) + "<th>seconds</th></tr>",
    ]
    for b in backends:
        mine = [r for r in results if r.backend == b]
        counts = "".join(f"<td>{sum(r.outcome == o for r in mine)}</td>" for o in OUTCOMES)
        out.append(f"<tr><td>{esc(b)}</td>{counts}<td>{sum(r.seconds for r in mine):.1f}</td></tr>")
    out.append("</table>")
    for b in backends:
        mine = [r for r in results if r.backend == b]
        device = next((r.device for r in mine if r.device), "")
        out.append(f'<h2 id="{esc(b)}">{esc(b)}</h2>')
        if device:
            out.append(f"<p>device: {esc(device)}</p>")
        out.append("<table><tr><th>test</th><th>outcome</th><th>seconds</th><th>detail</th></tr>")
        for r in mine:
            color = _COLORS.get(r.outcome, "#ffffff")
            out.append(
                f'<tr><td>{esc(r.test)}</td><td style="background:{color}">{r.outcome}</td>'
                f'<td>{r.seconds:.1f}</td><td class="detail">{esc(r.detail)}</td></tr>'
            )
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def about_here(args: dict[str, str]) -> dict[str, str]:
    """What the report says about this run: date, machine, Python, NumPy, mnnpy, options."""
    import numpy as np

    import mnnpy

    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "versions": f"mnnpy {mnnpy.__version__}, Python {platform.python_version()}, NumPy {np.__version__}",
        **args,
    }


# ------------------------------------------------------------------------------------ CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``mnnpy stress``."""
    p.add_argument("--backend", action="append", default=[], help="a backend to stress (repeatable; default: all available)")
    p.add_argument("--test", action="append", default=[], metavar="NAME", help="a test to run (repeatable; default: all)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S", help="seconds without progress: HANG (60)")
    p.add_argument("--scale", type=float, default=1.0, metavar="F", help="multiply the tests' iteration counts (default 1)")
    p.add_argument("--report", metavar="FILE.html", help="write the HTML report there")
    p.add_argument("--list", action="store_true", help="list the tests and exit")


def _backends(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(backends to run, notes)``: the named ones (``BackendUnavailableError`` for one that
    cannot run here), else every registered backend available here (the others noted)."""
    from mnnpy.backend import backend_availability, registered_backends
    from mnnpy.errors import BackendUnavailableError

    notes = []
    if names:
        for n in names:
            ok, why = backend_availability(n)
            if not ok:
                raise BackendUnavailableError(f"backend '{n}' is unavailable: {why}")
        return list(dict.fromkeys(names)), notes
    chosen = []
    for n in registered_backends():
        ok, why = backend_availability(n)
        if ok:
            chosen.append(n)
        else:
            notes.append(f"{n}: unavailable ({why})")
    return chosen, notes


def run(args: argparse.Namespace) -> int:
    """``mnnpy stress``: 0 when every result is SUCCESS or SKIPPED, else 1."""
    from mnnpy.errors import InputError

    tests = registered_tests()
    if args.list:
        for t in tests.values():
            print(f"{t.name:<24} {t.help}")
        return 0
    unknown = [n for n in args.test if n not in tests]
    if unknown:
        raise InputError(f"unknown stress test(s) {unknown}; the tests are {sorted(tests)}")
    if not 0 < args.timeout <= 3600:
        raise InputError(f"--timeout must be in (0, 3600] seconds, got {args.timeout}")
    if not 0 < args.scale <= 100:
        raise InputError(f"--scale must be in (0, 100], got {args.scale}")
    if args.report:
        folder = os.path.dirname(os.path.abspath(args.report))
        if os.path.isdir(args.report) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise InputError(f"--report {args.report}: cannot write there (checked before the tests run)")
    backends, notes = _backends(args.backend)
    chosen = [tests[n] for n in dict.fromkeys(args.test)] or list(tests.values())
    for note in notes:
        print(f"skipped backend {note}")

    def show(r: StressResult) -> None:
        first = r.detail.splitlines()[0] if r.detail else ""
        print(f"{r.backend:<8} {r.test:<24} {r.outcome:<8} {r.seconds:7.1f} s  {first}", flush=True)

    results = run_all(chosen, backends, args.timeout, args.scale, show)
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    print(", ".join(f"{n} {o}" for o, n in counts.items() if n) or "no tests run")
    if args.report:
        options = {"options": f"backends {backends}; timeout {args.timeout:g} s; scale {args.scale:g}"}
        if notes:
            options["not run"] = "; ".join(notes)
        text = report_html(results, about_here(options))
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise InputError(f"--report {args.report}: cannot write: {e.strerror or e}") from None
        print(f"wrote {args.report}")
    return 0 if counts["FAILURE"] + counts["HANG"] + counts["CRASH"] == 0 else 1

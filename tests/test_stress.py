"""``mnnpy stress`` (``mnnpy.stress``): the classification of purpose-built children that
succeed, fail, skip, hang and crash (also at exit), the HTML report, the command line, and a
short run of the real stress tests."""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from mnnpy import ShapeError, cli
from mnnpy.backend import backend_availability
from mnnpy.stress import (
    STRESS_TESTS,
    StressContext,
    StressResult,
    StressSkip,
    StressTest,
    registered_tests,
    report_html,
    run_all,
    run_test,
    stress_test,
)

HANG_S = 1.0  # the children's progress time-out


# ----------------------------------------------------------------- purpose-built children
def _succeeds(ctx: StressContext) -> str:
    ctx.progress("working")
    return f"did {ctx.count(10)} things on {ctx.backend}"


def _asserts(ctx: StressContext) -> None:
    assert 1 + 1 == 3, "arithmetic is broken"


def _raises(ctx: StressContext) -> None:
    raise ShapeError("op 'c1': no such shape")


def _skips(ctx: StressContext) -> None:
    raise StressSkip("nothing to do here")


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _hangs(ctx: StressContext) -> None:
    ctx.progress("about to sleep")
    _sleep_forever()


def _keeps_busy(ctx: StressContext) -> None:
    for i in range(10**9):
        ctx.progress(f"step {i}")
        time.sleep(0.05)


def _segfaults(ctx: StressContext) -> None:
    ctx.progress("reading address 0")
    ctypes.string_at(0)


def _exits(ctx: StressContext) -> None:
    os._exit(5)


def _aborts_at_exit(ctx: StressContext) -> str:
    atexit.register(os.kill, os.getpid(), signal.SIGABRT)
    return "fine until exit"


def _never_exits(ctx: StressContext) -> str:
    threading.Thread(target=_sleep_forever).start()  # not a daemon: the interpreter waits for it
    return "fine until exit"


def _orphans_a_sleeper(ctx: StressContext) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    ctx.progress(f"sleeper {sleeper.pid}")
    _sleep_forever()


CASES = {
    # child: (outcome, patterns the detail must contain)
    _succeeds: ("SUCCESS", [r"^did 5 things on cpu$"]),
    _asserts: ("FAILURE", [r"^AssertionError: arithmetic is broken", r"\(test_stress\.py:\d+ in _asserts\)"]),
    _raises: ("FAILURE", [r"^ShapeError: op 'c1': no such shape"]),
    _skips: ("SKIPPED", [r"^nothing to do here$"]),
    _hangs: ("HANG", [r"^no progress for 1 s; last progress: about to sleep", r"in _sleep_forever", r"in _hangs"]),
    _keeps_busy: ("HANG", [r"^still running after 3 s; last progress: step \d+"]),
    _segfaults: ("CRASH", [r"^killed by SIGSEGV \(exit code -11\); last progress: reading address 0", "Segmentation fault"]),
    _exits: ("FAILURE", [r"^exited with status 5 without a result; last progress: started"]),
    _aborts_at_exit: ("CRASH", [r"^SUCCESS: fine until exit; then killed by SIGABRT at exit"]),
    _never_exits: ("HANG", [r"^SUCCESS: fine until exit; then did not exit within 1 s", r"in _sleep_forever"]),
}


@pytest.mark.parametrize("child", CASES, ids=lambda f: f.__name__.strip("_"))
def test_classification(child):
    outcome, patterns = CASES[child]
    t0 = time.monotonic()
    r = run_test(StressTest(child.__name__, child, "a purpose-built child"), "cpu", timeout=HANG_S, scale=0.5, total=3.0)
    assert r.outcome == outcome, r.detail
    for p in patterns:
        assert re.search(p, r.detail, re.MULTILINE), f"{p!r} not in {r.detail!r}"
    assert r.seconds <= time.monotonic() - t0 and r.test == child.__name__ and r.backend == "cpu"
    if outcome in ("SUCCESS", "FAILURE") and r.outcome == outcome and child is not _exits:
        assert r.device  # the child described the CPU it ran on


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_a_hung_childs_own_children_are_killed_with_it():
    """A HANG kills the child's whole process group: what it started (exit_mid_run's and
    concurrent_processes' processes) does not outlive it."""
    r = run_test(StressTest("orphans", _orphans_a_sleeper, "a purpose-built child"), "cpu", timeout=HANG_S, total=3.0)
    assert r.outcome == "HANG", r.detail
    pid = int(re.search(r"last progress: sleeper (\d+)", r.detail).group(1))
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = _gone(pid)
    if not gone:
        os.kill(pid, signal.SIGKILL)  # the sleeper this test started, by its id
    assert gone, f"the hung child's process {pid} outlived it"


def test_registration_takes_help_from_the_docstring_and_refuses_none_or_twice():
    def documented(ctx):
        """First line.

        More."""

    try:
        stress_test("t_documented")(documented)
        assert STRESS_TESTS["t_documented"].help == "First line."
        with pytest.raises(ValueError, match="registered twice"):
            stress_test("t_documented", "again")(documented)
        with pytest.raises(ValueError, match="neither a help line nor a docstring"):
            stress_test("t_bare")(lambda ctx: None)
    finally:
        STRESS_TESTS.pop("t_documented", None)


def test_report_has_a_table_per_backend_with_escaped_details():
    results = [
        StressResult("a", "cpu", "SUCCESS", 1.25, "fine", "the cpu"),
        StressResult("b", "cpu", "CRASH", 0.5, "<script>x</script>"),
        StressResult("a", "vulkan", "HANG", 60.0, "stack\nlines"),
    ]
    text = report_html(results, {"machine": "here & there"})
    assert text.count("<table>") == 4  # about, summary, cpu, vulkan
    assert '<h2 id="cpu">cpu</h2>' in text and '<h2 id="vulkan">vulkan</h2>' in text and "device: the cpu" in text
    assert "&lt;script&gt;" in text and "<script>" not in text and "here &amp; there" in text
    assert re.search(r"<td>cpu</td><td>1</td><td>0</td><td>0</td><td>0</td><td>1</td><td>1\.8</td>", text)
    assert "<td>1.2</td>" in text or "<td>1.3</td>" in text


def test_cli_errors_and_list(capsys):
    assert cli.main(["stress", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in registered_tests())
    assert cli.main(["stress", "--test", "no_such_test"]) == 2
    assert "unknown stress test(s) ['no_such_test']" in capsys.readouterr().err
    assert cli.main(["stress", "--timeout", "0"]) == 2
    assert "--timeout must be in (0, 3600]" in capsys.readouterr().err
    assert cli.main(["stress", "--backend", "no_such_backend"]) == 2
    assert "no_such_backend" in capsys.readouterr().err
    for report in ("/nonexistent/r.html", "/tmp"):  # checked before any test runs (it was after all)
        t0 = time.perf_counter()
        assert cli.main(["stress", "--test", "create_destroy", "--report", report]) == 2
        assert "cannot write there" in capsys.readouterr().err and time.perf_counter() - t0 < 5


def test_short_real_run_writes_the_report(tmp_path, capsys):
    """The real tests at a small scale on the CPU through the command line; every one SUCCESS."""
    report = tmp_path / "stress.html"
    names = ["create_destroy", "shared_session", "interleaved_resize", "exit_mid_run", "ppocr_cls"]
    argv = ["stress", "--backend", "cpu", "--scale", "0.2", "--timeout", "60", "--report", str(report)]
    assert cli.main(argv + [a for n in names for a in ("--test", n)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"{len(names)} SUCCESS" in out, out
    text = report.read_text()
    for n in names:
        assert re.search(rf"<td>{n}</td><td style=\"background:#[0-9a-f]+\">SUCCESS</td>", text), n


@pytest.mark.parametrize("backend", ["opencl", "vulkan"])
def test_short_gpu_run(backend):
    ok, why = backend_availability(backend)
    if not ok:
        pytest.skip(why)
    tests = registered_tests()
    names = ["concurrent_sessions", "interleaved_resize", "concurrent_processes"]
    results = run_all([tests[n] for n in names], [backend], timeout=60, scale=0.2)
    assert [r.outcome for r in results] == ["SUCCESS"] * len(names), [r.detail for r in results]

"""The interpreter exits while a daemon thread runs a session: the process ends with its own
status on every backend (``mnnpy.exit_gate``; found by ``mnnpy stress``, ``exit_mid_run``: on
OpenCL it died with SIGABRT, "terminate called without an active exception")."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from mnnpy.backend import backend_availability
from mnnpy.exit_gate import ExitGate

VICTIM = """
import sys, threading
import mnnpy
from mnnpy.stress_suite import conv_model, image
session = mnnpy.Interpreter(conv_model()).create_session(backend=sys.argv[1])
x = image((1, 3, 128, 128), 1)
running = threading.Event()
def loop():
    while True:
        session.run({"x": x})
        running.set()
threading.Thread(target=loop, daemon=True).start()
running.wait()
sys.exit(7)
"""


@pytest.mark.parametrize("backend", ["cpu", "opencl", "vulkan"])
def test_exit_while_a_daemon_thread_runs(backend):
    ok, why = backend_availability(backend)
    if not ok:
        pytest.skip(why)
    for _ in range(3):  # the abort came every time; three tries catch a rarer one
        proc = subprocess.run([sys.executable, "-c", VICTIM, backend], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 7, f"exit code {proc.returncode}: {proc.stderr[-2000:]}"


def test_gate_waits_for_runs_in_flight_and_admits_none_after():
    gate, order = ExitGate(), []
    inside = threading.Event()

    def run(name, hold):
        with gate.entered():
            inside.set()
            time.sleep(hold)
            order.append(name)

    first = threading.Thread(target=run, args=("in flight", 0.2), daemon=True)
    first.start()
    inside.wait()
    assert gate.close(timeout=5)  # waited for the run in flight
    assert order == ["in flight"]
    late = threading.Thread(target=run, args=("late", 0), daemon=True)
    late.start()
    late.join(0.2)
    assert late.is_alive() and order == ["in flight"]  # parked: never runs


def test_gate_close_gives_up_after_its_timeout():
    gate = ExitGate()
    inside, release = threading.Event(), threading.Event()

    def run():
        with gate.entered():
            inside.set()
            release.wait()

    threading.Thread(target=run, daemon=True).start()
    inside.wait()
    t0 = time.perf_counter()
    assert not gate.close(timeout=0.2)
    assert 0.15 < time.perf_counter() - t0 < 2
    release.set()

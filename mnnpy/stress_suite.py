"""The stress tests of ``mnnpy stress`` (NNAPI MLTS's crash and hang tests), each run by
``mnnpy.stress`` in its own child process on one backend.

- ``create_destroy``: sessions created, run and destroyed again and again; after a warm-up
  the process's resident memory (RSS) and open files stay where they were.
- ``many_sessions``: ``MANY`` sessions alive at once, each run, then all released, in
  cycles; the memory held after a release stays where the first release left it.
- ``concurrent_sessions``: sessions created at once from many threads, then each run from its
  own thread (two input shapes among them); every output matches the reference.
- ``shared_session``: one session run from many threads at once, two shapes among them (the
  session re-plans under its lock); every thread gets the output of its own input.
- ``mixed_backends``: as ``concurrent_sessions``, sessions of every other available backend
  beside this one's in the same process, all at once (PoCL and lavapipe, both built on LLVM).
- ``threads_serial``: 8 threads x 1000 runs on one shared session, then on 8 sessions; every
  output equal, bit for bit, to the serial run of the same input.
- ``interleaved_resize``: one session cycled through more input shapes than its plan cache
  keeps (``RESIZE_CACHE``), round after round; outputs match, RSS stays flat.
- ``large_input``: with ``create_session(memory_limit=...)``, the largest input that the
  limit admits (found by bisection) runs and is right, a larger one raises ``ShapeError``;
  skipped where ``create_session`` has no ``memory_limit``.
- ``loop_timeout``: Loops of 2^62 iterations run in 4 threads at once (a session each), each
  ending with ``LoopTimeoutError``, not before its ``loop_timeout`` and within
  ``LOOP_SLACK_S`` after it; the run after each gives the right output.
- ``exit_mid_run``: processes that end in the middle of runs (``os._exit`` from a timer,
  ``SIGKILL`` from outside, the interpreter exiting while a daemon thread runs, ``SIGKILL``
  while preparing with a fresh disk cache) end as they should, and the next process on the
  same caches computes the right output.
- ``concurrent_processes``: ``PROCESSES`` processes create tuned sessions at once on one fresh
  disk cache (OpenCL programs and tuning, Vulkan pipelines) and are right; the next process
  finds every file intact (nothing discarded) and compiles and tunes nothing (``mnnpy.cache``'s
  log messages).
- ``ppocr_det``, ``ppocr_rec``, ``ppocr_cls``, ``silero_vad``: the real models
  (``mnnpy.models``) run repeatedly at several shapes (silero: a stream of chunks with its
  state fed back) against onnxruntime where it is installed (else the CPU backend, for a GPU
  backend); RSS stays flat. Skipped where the models cannot be fetched.

The synthetic model (``conv_model``) is built in code with seeded weights. Outputs are
compared with ``TOLERANCE``; memory held with ``RSS_SLACK`` (``settled_rss``: RSS after
``malloc_trim``, so that what glibc keeps for reuse does not count; the report shows both).
"""

from __future__ import annotations

import functools
import gc
import inspect
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mnnpy.errors import BackendUnavailableError, LoopTimeoutError, ShapeError
from mnnpy.heap import give_back_freed
from mnnpy.interpreter import Interpreter
from mnnpy.stress import StressContext, StressSkip, stress_test

# DESIGN.md's fp32 bound for accumulating ops (conv, gemm, softmax: the models here), also the
# real models' bound against onnxruntime (README: within 1e-4 in fp32)
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
RSS_SLACK = 16 << 20  # bytes the memory held (RSS after malloc_trim) may grow after a test's
# warm-up (drivers' own caches; a leak of 1 MiB per iteration over the iterations here exceeds it)
SEED = 20261201
CONV_SHAPE = (1, 3, 32, 32)  # the synthetic model's usual input
MANY = 300  # sessions many_sessions holds at once
RESIZE_SHAPES = [(1, 3, 32, 32), (1, 3, 64, 48), (2, 3, 40, 40), (1, 3, 128, 128), (1, 3, 24, 72), (3, 3, 32, 56)]
LARGE_LIMIT = 256 << 20  # bytes: the memory_limit of large_input
LARGE_WIDTH = 4096  # elements per row of large_input's input (N, LARGE_WIDTH)
LOOP_LIMIT_S = 0.2  # loop_timeout of loop_timeout's endless Loops, s
LOOP_SLACK_S = 2.0  # s a timed-out Loop may end after its limit: 4 threads share the GIL and, here, 2
# cores with other work (0.53 s seen under load on the CPU backend); a stuck Loop shows as far more.
# One Loop's time-out accuracy alone is bench/bench_loop.py's figure
EXIT_SHAPE = (1, 3, 128, 128)  # exit_mid_run's input: a run of some milliseconds
PROCESSES = 4  # concurrent_processes' processes started at once
VICTIM_TIMEOUT_S = 30.0  # seconds a process of exit_mid_run may take to start running or to end


# ------------------------------------------------------------------------------------ helpers
def rss_bytes() -> int | None:
    """The resident set size of this process in bytes (``/proc/self/statm``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def open_files() -> int | None:
    """The number of open file descriptors of this process (``/proc/self/fd``; None elsewhere)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def mib(n: int | None) -> str:
    """Bytes as MiB with one decimal ("?" for None)."""
    return "?" if n is None else f"{n / 2**20:.1f}"


def settled_rss() -> tuple[int | None, int | None]:
    """``(RSS, RSS after malloc_trim)`` in bytes, after a garbage collection: the second is what
    the process holds once glibc's allocator has returned the free memory it keeps for reuse
    (the first where there is no ``malloc_trim``); None without ``/proc``."""
    gc.collect()
    held = rss_bytes()
    return (held, rss_bytes()) if give_back_freed() else (held, held)


def check_rss(before: tuple, after: tuple, what: str) -> str:
    """Assert the memory held (``settled_rss()[1]``) grew by at most ``RSS_SLACK`` from
    ``before`` to ``after``; both figures as text (what the allocator kept in parentheses)."""
    if before[1] is None or after[1] is None:
        return "RSS not measured (no /proc)"
    grown = f"{mib(before[1])} -> {mib(after[1])} MiB"
    assert after[1] - before[1] <= RSS_SLACK, f"{what}: RSS grew {grown} after malloc_trim (more than {mib(RSS_SLACK)})"
    return f"RSS {grown} ({mib(before[0])} -> {mib(after[0])} before malloc_trim)"


def check(got: np.ndarray, want: np.ndarray, what: str) -> float:
    """Assert ``got`` matches ``want`` (shape, ``TOLERANCE``); the max |difference|."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    np.testing.assert_allclose(got, want, **TOLERANCE, err_msg=what)
    return float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0


def image(shape, seed: int) -> np.ndarray:
    """Seeded float32 input in [-1, 1)."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


@functools.cache
def conv_model() -> bytes:
    """A small conv net built in code (seeded weights), as ``.mnnpy`` bytes:
    ``x (N, 3, H, W) float32 -> y (N, 10)``: Conv 3->16 3x3 + Relu, depthwise 3x3 + Relu,
    Conv 1x1 16->32 + Relu, GlobalAveragePool, Flatten, Gemm 32->10, Softmax."""
    from onnx import TensorProto, helper, numpy_helper

    from mnnpy.converter import convert

    rng = np.random.default_rng(SEED)

    def const(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [const("w1", 16, 3, 3, 3), const("b1", 16), const("w2", 16, 1, 3, 3), const("b2", 16)]
    inits += [const("w3", 32, 16, 1, 1), const("b3", 32), const("w4", 10, 32), const("b4", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w4", "b4"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    graph = helper.make_graph(nodes, "stress_conv", [x], [y], inits)
    return convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@functools.cache
def loop_model() -> bytes:
    """``y = Loop(M, true, x)`` adding 1 to ``x (4,) float32`` ``M`` times (``M ()`` int64;
    the body's constant 1 comes from the enclosing graph), as ``.mnnpy`` bytes (built in code)."""
    from onnx import TensorProto, helper, numpy_helper

    from mnnpy.converter import convert

    f32, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["x_in", "one"], ["x_out"])],
        "body",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in (("i", i64, []), ("c_in", b, []), ("x_in", f32, [4]))],
        [helper.make_tensor_value_info("c_out", b, []), helper.make_tensor_value_info("x_out", f32, [4])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "true", "x"], ["y"], body=body, name="count")],
        "stress_loop",
        [helper.make_tensor_value_info("M", i64, []), helper.make_tensor_value_info("x", f32, [4])],
        [helper.make_tensor_value_info("y", f32, [4])],
        [numpy_helper.from_array(np.array(True), "true"), numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    return convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@functools.cache
def elementwise_model() -> bytes:
    """``x (N, LARGE_WIDTH) float32 -> y = Relu(2 x + 1)`` as ``.mnnpy`` bytes (built in code)."""
    from onnx import TensorProto, helper, numpy_helper

    from mnnpy.converter import convert

    two, one = (numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((2.0, "two"), (1.0, "one")))
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["m"]),
        helper.make_node("Add", ["m", "one"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", LARGE_WIDTH])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", LARGE_WIDTH])
    graph = helper.make_graph(nodes, "stress_elementwise", [x], [y], [two, one])
    return convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def model_file(ctx: StressContext) -> str:
    """``conv_model()`` written to the child's work folder (loaded by path: memory-mapped)."""
    path = os.path.join(ctx.workdir, "conv.mnnpy")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(conv_model())
    return path


def cpu_outputs(path: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``y`` of the model at ``path`` for each input, on a CPU session of its own (the reference)."""
    session = Interpreter(path).create_session(backend="cpu")
    return [session.run({"x": x})["y"] for x in inputs]


def run_threads(fn, count: int) -> list:
    """``fn(i)`` for ``i`` in ``range(count)``, each in its own thread at once; their results
    (the first exception is raised)."""
    with ThreadPoolExecutor(count, thread_name_prefix="stress") as pool:
        return list(pool.map(fn, range(count)))


# ------------------------------------------------------------------------- sessions, threads
@stress_test("create_destroy")
def create_destroy(ctx: StressContext) -> str:
    """Create, run and destroy sessions again and again; RSS and open files return."""
    path = model_file(ctx)
    x = image(CONV_SHAPE, 0)
    (want,) = cpu_outputs(path, [x])
    n = ctx.count(60)
    warm = max(1, n // 4)
    for i in range(n):
        session = Interpreter(path).create_session(backend=ctx.backend)
        check(session.run({"x": x})["y"], want, f"session {i}")
        del session
        if i + 1 == warm:
            rss0, files0 = settled_rss(), open_files()
        ctx.progress(f"session {i + 1} of {n}")
    rss1, files1 = settled_rss(), open_files()
    if files0 is not None:
        assert files1 <= files0, f"open files {files0} -> {files1} after {n - warm} more sessions"
    memory = check_rss(rss0, rss1, f"{n - warm} sessions after the first {warm}")
    return f"{n} sessions created, run and destroyed; after the first {warm}: {memory}, open files {files0} -> {files1}"


def _sessions_in_threads(ctx: StressContext, backends: list[str]) -> str:
    """One session per entry of ``backends``, created at once from a thread each, then each
    run ``ctx.count(10)`` times from its own thread against the CPU reference; the figures."""
    path = model_file(ctx)
    interp = Interpreter(path)
    k, runs = len(backends), ctx.count(10)
    inputs = [image(RESIZE_SHAPES[i % 2], i) for i in range(k)]
    wants = cpu_outputs(path, inputs)
    t0 = time.perf_counter()
    sessions = run_threads(lambda i: interp.create_session(backend=backends[i]), k)
    created = time.perf_counter() - t0
    ctx.progress(f"{k} sessions created")

    def work(i: int) -> None:
        for r in range(runs):
            check(sessions[i].run({"x": inputs[i]})["y"], wants[i], f"session {i} ({backends[i]}), run {r}")
            ctx.progress(f"session {i}: run {r + 1} of {runs}")

    t0 = time.perf_counter()
    run_threads(work, k)
    return (
        f"{k} sessions created at once in {created:.2f} s; {k * runs} runs from {k} threads in {time.perf_counter() - t0:.2f} s"
    )


@stress_test("many_sessions")
def many_sessions(ctx: StressContext) -> str:
    """300 sessions (MANY) alive at once, each run, then all released; again and again, RSS returns."""
    path = model_file(ctx)
    interp = Interpreter(path)
    x = image(CONV_SHAPE, 0)
    (want,) = cpu_outputs(path, [x])
    cycles = max(2, ctx.count(3))
    peaks, held = [], []
    for c in range(cycles):
        sessions = []
        for i in range(MANY):
            sessions.append(interp.create_session(backend=ctx.backend))
            check(sessions[-1].run({"x": x})["y"], want, f"cycle {c}, session {i} of {MANY} alive")
            if i % 50 == 49:
                ctx.progress(f"cycle {c + 1} of {cycles}: {i + 1} sessions alive")
        peaks.append(settled_rss()[1])
        del sessions
        held.append(settled_rss())
    memory = check_rss(held[0], held[-1], f"{cycles - 1} more cycles of {MANY} sessions")
    return (
        f"{cycles} cycles of {MANY} sessions alive at once (RSS at the peaks {', '.join(mib(p) for p in peaks)} MiB); "
        f"released after the first cycle and the last: {memory}"
    )


@stress_test("concurrent_sessions")
def concurrent_sessions(ctx: StressContext) -> str:
    """Sessions created at once from 8 threads, each run from its own thread."""
    return _sessions_in_threads(ctx, [ctx.backend] * 8)


@stress_test("mixed_backends")
def mixed_backends(ctx: StressContext) -> str:
    """Sessions of this and every other available backend at once in one process, from threads."""
    from mnnpy.backend import backend_availability

    others = [b for b in ("cpu", "opencl", "vulkan") if b != ctx.backend and backend_availability(b)[0]]
    if not others:
        raise StressSkip(f"no backend other than {ctx.backend} is available here")
    backends = [ctx.backend, *others] * 2
    return f"{', '.join(backends)}: " + _sessions_in_threads(ctx, backends)


@stress_test("shared_session")
def shared_session(ctx: StressContext) -> str:
    """One session run from 8 threads at once, two input shapes among them."""
    path = model_file(ctx)
    session = Interpreter(path).create_session(backend=ctx.backend)
    k, runs = 8, ctx.count(10)
    inputs = [image(RESIZE_SHAPES[i % 2], 100 + i) for i in range(k)]
    wants = cpu_outputs(path, inputs)

    def work(i: int) -> None:
        for r in range(runs):
            check(session.run({"x": inputs[i]})["y"], wants[i], f"thread {i}, run {r}")
            ctx.progress(f"thread {i}: run {r + 1} of {runs}")

    t0 = time.perf_counter()
    run_threads(work, k)
    return f"{k * runs} runs of one session from {k} threads in {time.perf_counter() - t0:.2f} s; {session.resize_count} resizes"


@stress_test("threads_serial")
def threads_serial(ctx: StressContext) -> str:
    """8 threads x 1000 runs (issue 14), on one shared session and on 8 sessions, each thread
    on inputs of its own: every output equal, bit for bit, to the same session's output for
    that input run alone before the threads started."""
    path = model_file(ctx)
    interp = Interpreter(path)
    k, runs = 8, ctx.count(1000)
    inputs = [image(CONV_SHAPE, 200 + i) for i in range(k)]
    shared = interp.create_session(backend=ctx.backend)
    own = [interp.create_session(backend=ctx.backend) for _ in range(k)]
    serial = [shared.run({"x": x})["y"] for x in inputs]
    report = []
    for name, pick in (("one session", lambda i: shared), ("8 sessions", lambda i: own[i])):

        def work(i: int, pick=pick, name=name) -> None:
            s = pick(i)
            for r in range(runs):
                x = (i + r) % k  # every thread goes through every input
                got = s.run({"x": inputs[x]})["y"]
                assert np.array_equal(got, serial[x]), f"{name}, thread {i}, run {r}: differs from the serial run"
                if r % 100 == 99:
                    ctx.progress(f"{name}: thread {i}, run {r + 1} of {runs}")

        t0 = time.perf_counter()
        run_threads(work, k)
        report.append(f"{name}: {k} x {runs} runs in {time.perf_counter() - t0:.2f} s")
    return "; ".join(report) + ", every output equal to the serial one"


@stress_test("interleaved_resize")
def interleaved_resize(ctx: StressContext) -> str:
    """One session cycled through 6 input shapes (more than its plan cache keeps)."""
    from mnnpy.session import RESIZE_CACHE

    path = model_file(ctx)
    inputs = [image(s, 200 + n) for n, s in enumerate(RESIZE_SHAPES)]
    wants = cpu_outputs(path, inputs)
    session = Interpreter(path).create_session(backend=ctx.backend)
    rounds = ctx.count(8)
    for r in range(rounds):
        for x, want in zip(inputs, wants):
            check(session.run({"x": x})["y"], want, f"round {r}, shape {x.shape}")
        if r == 0:
            rss0 = settled_rss()
        ctx.progress(f"round {r + 1} of {rounds}")
    memory = check_rss(rss0, settled_rss(), f"{rounds - 1} rounds of {len(inputs)} shapes")
    return (
        f"{rounds} rounds of {len(inputs)} shapes (plan cache {RESIZE_CACHE}): {session.resize_count} resizes; "
        f"after the first round: {memory}"
    )


@stress_test("large_input")
def large_input(ctx: StressContext) -> str:
    """The largest input create_session(memory_limit=256 MiB) admits runs; a larger one is refused."""
    if "memory_limit" not in inspect.signature(Interpreter.create_session).parameters:
        raise StressSkip("create_session has no memory_limit here (issue 12, item 1, adds it)")
    interp = Interpreter(elementwise_model())
    session = interp.create_session(backend=ctx.backend, memory_limit=LARGE_LIMIT)
    row = LARGE_WIDTH * 4  # bytes per row of x
    lo, hi = 1, 2 * LARGE_LIMIT // row  # x alone at hi rows is twice the limit
    try:
        session.resize({"x": (hi, LARGE_WIDTH)})
        raise AssertionError(f"memory_limit {LARGE_LIMIT} bytes: an input of {hi * row} bytes was planned")
    except ShapeError as e:
        refused = str(e)
    while hi - lo > 1:  # lo fits, hi does not
        mid = (lo + hi) // 2
        try:
            session.resize({"x": (mid, LARGE_WIDTH)})
            lo = mid
        except ShapeError:
            hi = mid
        ctx.progress(f"bisection: {lo} rows fit, {hi} do not")
    x = np.random.default_rng(SEED).standard_normal((lo, LARGE_WIDTH), dtype=np.float32)
    rss0 = rss_bytes()
    y = session.run({"x": x})["y"]
    peak = rss_bytes()
    check(y, np.maximum(2 * x + 1, 0), f"{lo} rows")
    over = np.zeros((hi, LARGE_WIDTH), np.float32)
    try:
        session.run({"x": over})
        raise AssertionError(f"run() of {hi} rows ({hi * row} bytes) beyond memory_limit {LARGE_LIMIT} did not raise ShapeError")
    except ShapeError:
        pass
    return (
        f"memory_limit {mib(LARGE_LIMIT)} MiB: {lo} rows ({mib(lo * row)} MiB) run (RSS {mib(rss0)} -> {mib(peak)} MiB), "
        f"{hi} rows refused; twice the limit: {refused}"
    )


@stress_test("loop_timeout")
def loop_timeout(ctx: StressContext) -> str:
    """Endless Loops time out (LoopTimeoutError) in 4 threads at once; each next run is right."""
    interp = Interpreter(loop_model())
    x = np.arange(4, dtype=np.float32)
    k, runs = 4, ctx.count(3)
    sessions = [interp.create_session(backend=ctx.backend) for _ in range(k)]
    late = []

    def work(i: int) -> None:
        for r in range(runs):
            t0 = time.perf_counter()
            try:
                sessions[i].run({"M": np.array(2**62, np.int64), "x": x}, loop_timeout=LOOP_LIMIT_S)
                raise AssertionError(f"thread {i}, run {r}: a Loop of 2^62 iterations ended without LoopTimeoutError")
            except LoopTimeoutError:
                late.append(time.perf_counter() - t0 - LOOP_LIMIT_S)
            check(sessions[i].run({"M": np.array(100 + i, np.int64), "x": x})["y"], x + 100 + i, f"thread {i} after a time-out")
            ctx.progress(f"thread {i}: time-out {r + 1} of {runs}")

    run_threads(work, k)
    worst = max(late)
    assert min(late) >= 0, f"a Loop timed out {-min(late):.3f} s before its {LOOP_LIMIT_S} s limit"
    assert worst <= LOOP_SLACK_S, f"a Loop ended {worst:.2f} s after its {LOOP_LIMIT_S} s time-out (more than {LOOP_SLACK_S} s)"
    spread = f"+{min(late) * 1e3:.0f} to +{worst * 1e3:.0f} ms"
    return f"{k * runs} Loops in {k} threads timed out {spread} after their {LOOP_LIMIT_S} s limit; each next run right"


# ------------------------------------------------------------------------ exit in mid-run
def _victim(path: str, backend: str, mode: str, conn) -> None:
    """A process that ends in the middle of runs (``mode``): ``_exit`` (``os._exit(3)`` from a
    timer thread), ``kill`` (the parent sends ``SIGKILL``), ``return`` (the main thread
    returns while a daemon thread runs: interpreter shutdown mid-run), ``prepare`` (killed while
    creating the session)."""
    conn.send("preparing")
    session = Interpreter(path).create_session(backend=backend)
    x = image(EXIT_SHAPE, 1)
    running = threading.Event()

    def loop() -> None:
        while True:
            session.run({"x": x})
            running.set()

    if mode == "return":
        threading.Thread(target=loop, daemon=True).start()
        running.wait(VICTIM_TIMEOUT_S)
        conn.send("running")
        time.sleep(0.01)
        return
    if mode == "_exit":
        threading.Timer(0.05, os._exit, (3,)).start()
    conn.send("running")
    loop()


def _verify(path: str, backend: str, conn) -> None:
    """The next process: one run on the same caches; sends its output."""
    conn.send(Interpreter(path).create_session(backend=backend).run({"x": image(EXIT_SHAPE, 1)})["y"])


def _spawned(target, args: tuple, until: str | None = None):
    """A spawned process running ``target(*args, conn)``, after it sent ``until`` (or at once);
    returns ``(process, connection)``. ``AssertionError`` when it does not say ``until`` in time."""
    mp = multiprocessing.get_context("spawn")
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=target, args=(*args, send))
    proc.start()
    send.close()
    while until is not None:
        try:
            got = recv.recv() if recv.poll(VICTIM_TIMEOUT_S) else None
        except EOFError:
            got = None
        if got is None:
            proc.kill()
            proc.join()
            raise AssertionError(f"{args}: no '{until}' within {VICTIM_TIMEOUT_S:g} s (exit code {proc.exitcode})")
        if got == until:
            break
    return proc, recv


def _ended(proc, what: str) -> int:
    """The exit code of ``proc`` once ended (killed, with ``AssertionError``, after ``VICTIM_TIMEOUT_S``)."""
    proc.join(VICTIM_TIMEOUT_S)
    if proc.exitcode is None:
        proc.kill()
        proc.join()
        raise AssertionError(f"{what}: still running {VICTIM_TIMEOUT_S:g} s later (hung at exit?)")
    return proc.exitcode


@stress_test("exit_mid_run")
def exit_mid_run(ctx: StressContext) -> str:
    """Processes ending mid-run (_exit, SIGKILL, interpreter exit, killed while preparing); the next works."""
    from mnnpy.stress import signal_name

    path = model_file(ctx)
    (want,) = cpu_outputs(path, [image(EXIT_SHAPE, 1)])
    # a fresh disk cache (OpenCL programs, tuning, Vulkan pipelines) that a killed process was writing
    for env in ("MNNPY_OPENCL_CACHE", "MNNPY_VULKAN_CACHE"):
        os.environ[env] = os.path.join(ctx.workdir, env.lower())
    expected = {"prepare": -9, "_exit": 3, "kill": -9, "return": 0}
    seen = []
    for mode, code in expected.items():
        proc, conn = _spawned(_victim, (path, ctx.backend, mode), "preparing" if mode == "prepare" else "running")
        if mode == "prepare":
            time.sleep(0.3)
        if mode in ("kill", "prepare"):
            time.sleep(0.02)
            proc.kill()
        got = _ended(proc, mode)
        conn.close()
        described = signal_name(got) if got < 0 else f"status {got}"
        assert got == code, f"mode {mode}: ended with {described}, expected {signal_name(code) if code < 0 else code}"
        seen.append(f"{mode}: {described}")
        proc, conn = _spawned(_verify, (path, ctx.backend))
        y = conn.recv() if conn.poll(VICTIM_TIMEOUT_S) else None
        status = _ended(proc, f"the process after {mode}")
        assert y is not None and status == 0, f"the process after {mode}: exit code {status}, output {y is not None}"
        check(y, want, f"the process after {mode}")
        ctx.progress(f"{mode}: ended with {described}; the next process ran")
    return "ended as expected (" + ", ".join(seen) + "); each next process on the same caches computed the right output"


def _cache_records(level: int) -> list[str]:
    """A list that receives the messages of ``mnnpy.cache`` from now on, at ``level`` and above."""
    got: list[str] = []
    handler = logging.Handler(level)
    handler.emit = lambda record: got.append(record.getMessage())
    logger = logging.getLogger("mnnpy.cache")
    logger.addHandler(handler)
    logger.setLevel(level)
    return got


def _racer(path: str, backend: str, start, conn) -> None:
    """A process that creates a tuned session when ``start`` is set, with the others at once,
    on the same fresh disk caches; sends its output and the cache's log messages."""
    messages = _cache_records(logging.DEBUG)
    interp = Interpreter(path)
    conn.send("ready")
    start.wait(VICTIM_TIMEOUT_S)
    session = interp.create_session(backend=backend, tuning="fast")
    conn.send((session.run({"x": image(EXIT_SHAPE, 1)})["y"], messages))


@stress_test("concurrent_processes")
def concurrent_processes(ctx: StressContext) -> str:
    """4 processes compile and tune at once into one fresh disk cache; the next reuses it."""
    path = model_file(ctx)
    (want,) = cpu_outputs(path, [image(EXIT_SHAPE, 1)])
    for env in ("MNNPY_OPENCL_CACHE", "MNNPY_VULKAN_CACHE"):
        os.environ[env] = os.path.join(ctx.workdir, "shared_" + env.lower())
    start = multiprocessing.get_context("spawn").Event()
    racers = [_spawned(_racer, (path, ctx.backend, start), "ready") for _ in range(PROCESSES)]
    start.set()
    written = []  # the racers' cache messages
    for i, (proc, conn) in enumerate(racers):
        got = conn.recv() if conn.poll(VICTIM_TIMEOUT_S * 2) else None
        status = _ended(proc, f"process {i}")
        assert got is not None and status == 0, f"process {i} of {PROCESSES}: exit code {status}, output {got is not None}"
        check(got[0], want, f"process {i} of {PROCESSES}")
        written += got[1]
    ctx.progress(f"{PROCESSES} processes created and ran at once")
    proc, conn = _spawned(_racer, (path, ctx.backend, start), "ready")  # start is set: it goes on at once
    got = conn.recv() if conn.poll(VICTIM_TIMEOUT_S) else None
    status = _ended(proc, "the process after them")
    assert got is not None and status == 0, f"the process after them: exit code {status}, output {got is not None}"
    check(got[0], want, "the process after them")
    damaged = [m for m in got[1] if "discarded" in m]
    assert not damaged, f"the process after {PROCESSES} concurrent ones found damaged cache files: {damaged}"
    # OpenCL programs and tuning come from the disk cache; Vulkan pipelines are created in each
    # process (a miss), from the driver's pipeline cache that was loaded from disk
    rebuilt = [m for m in got[1] if ": miss," in m and not m.startswith("Vulkan pipeline ")]
    assert not rebuilt, f"the process after {PROCESSES} concurrent ones compiled or tuned again: {rebuilt[:3]}"
    kinds = {"OpenCL programs": "disk hit", "OpenCL tuning": "hit, local", "Vulkan pipeline cache files": "cache: loaded"}
    counts = {k: sum(v in m for m in got[1]) for k, v in kinds.items()}
    hits = ", ".join(f"{k} {n}" for k, n in counts.items() if n) or "none (no disk cache on this backend)"
    misses = sum(": miss," in m for m in written)
    return (
        f"{PROCESSES} processes at once, all right ({misses} compiles and tunings among them, "
        f"{sum('discarded' in m for m in written)} files discarded); the next one: disk cache hits: {hits}; "
        "nothing compiled, tuned or discarded"
    )


# ------------------------------------------------------------------------------ real models
def _onnxruntime(onnx_path):
    """An onnxruntime CPU session of ``onnx_path``, or None where onnxruntime is not installed;
    without its memory arena, which would grow in the RSS that the tests measure."""
    from mnnpy.apps.reference import onnxruntime_session

    try:
        return onnxruntime_session(onnx_path, memory_arena=False)
    except BackendUnavailableError:
        return None


def _ocr(ctx: StressContext, kind: str, shapes: list[tuple[int, ...]], rounds: int) -> str:
    """OCR model ``kind`` run ``rounds`` times at each of ``shapes`` against the oracle."""
    from mnnpy import models

    try:
        path, onnx_path = models.ocr_mnnpy_path(kind), models.ocr_model_path(kind)
    except models.ModelFetchError as e:
        raise StressSkip(f"PP-OCR {kind} unavailable: {e}") from None
    interp = Interpreter(path)
    session = interp.create_session(backend=ctx.backend)
    ort = _onnxruntime(onnx_path)
    cpu = interp.create_session(backend="cpu") if ort is None and ctx.backend != "cpu" else None
    name, out = interp.inputs[0].name, interp.outputs[0].name
    worst, rss0 = 0.0, None
    for r in range(rounds):
        for n, shape in enumerate(shapes):
            x = image(shape, 1000 * r + n)
            y = session.run({name: x})[out]
            assert np.isfinite(y).all(), f"round {r}, shape {shape}: non-finite outputs"
            if ort is not None:
                worst = max(worst, check(y, ort.run(None, {name: x})[0], f"round {r}, shape {shape} against onnxruntime"))
            elif cpu is not None:
                worst = max(worst, check(y, cpu.run({name: x})[out], f"round {r}, shape {shape} against the CPU backend"))
        rss0 = rss0 if r else settled_rss()
        ctx.progress(f"round {r + 1} of {rounds}")
    oracle = "onnxruntime" if ort is not None else "the CPU backend" if cpu is not None else "nothing (no onnxruntime)"
    memory = check_rss(rss0, settled_rss(), f"{rounds - 1} rounds")
    return f"{rounds} rounds of shapes {shapes}: max |diff| to {oracle} {worst:.2g}; after the first round: {memory}"


@stress_test("ppocr_det")
def ppocr_det(ctx: StressContext) -> str:
    """PP-OCRv4 detection at 5 shapes (more than the plan cache keeps), 4 rounds, against onnxruntime."""
    return _ocr(ctx, "det", [(1, 3, 64, 96), (1, 3, 160, 320), (1, 3, 96, 64), (1, 3, 128, 128), (2, 3, 64, 64)], ctx.count(4))


@stress_test("ppocr_rec")
def ppocr_rec(ctx: StressContext) -> str:
    """PP-OCRv4 recognition at 3 shapes, 4 rounds, against onnxruntime."""
    return _ocr(ctx, "rec", [(1, 3, 48, 320), (1, 3, 48, 160), (2, 3, 48, 320)], ctx.count(4))


@stress_test("ppocr_cls")
def ppocr_cls(ctx: StressContext) -> str:
    """PP-OCR direction classifier at 2 shapes, 10 rounds, against onnxruntime."""
    return _ocr(ctx, "cls", [(1, 3, 48, 192), (3, 3, 48, 192)], ctx.count(10))


@stress_test("silero_vad")
def silero_vad(ctx: StressContext) -> str:
    """silero-vad (If, LSTM) streaming 300 chunks with its state fed back, against onnxruntime."""
    from mnnpy import models
    from mnnpy.apps import vad

    try:
        detector = vad.Vad(sr=16000, backend=ctx.backend)
    except models.ModelFetchError as e:
        raise StressSkip(f"silero-vad unavailable: {e}") from None
    try:
        oracle, which = vad.Vad(sr=16000, backend="onnxruntime"), "onnxruntime"
    except BackendUnavailableError:
        oracle, which = (vad.Vad(sr=16000, backend="cpu"), "the CPU backend") if ctx.backend != "cpu" else (None, "nothing")
    n = ctx.count(300)
    rng = np.random.default_rng(SEED)
    t = np.arange(detector.window) / 16000
    worst, rss0 = 0.0, None
    for i in range(n):
        tone = np.sin(2 * np.pi * rng.uniform(100, 400) * t) * (i // 20 % 2)  # 20 chunks of tone, 20 of noise
        chunk = (0.5 * tone + rng.normal(0, 0.05, t.size)).astype(np.float32).clip(-1, 0.999)
        p = detector(chunk)
        if oracle is not None:
            q = oracle(chunk)
            worst = max(worst, check(np.array([p, *detector.state.ravel()]), np.array([q, *oracle.state.ravel()]), f"chunk {i}"))
        if i == n // 10:
            rss0 = settled_rss()
        if i % 10 == 9:
            ctx.progress(f"chunk {i + 1} of {n}")
    memory = check_rss(rss0, settled_rss(), f"{n - n // 10} chunks")
    return f"{n} chunks streamed: max |diff| (probability and state) to {which} {worst:.2g}; after {n // 10} chunks: {memory}"

"""Programs (backends/cpu/program.py): consecutive native ops of a CPU partition run as one
table per thread with barriers between the ops; outputs bit-identical to each op run on its own,
within tolerance of onnxruntime; the per-op path where a run needs it."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mnnpy
import mnnpy.backends.cpu as cpu
from mnnpy.backends.cpu.kernels import spin
from mnnpy.backends.cpu.kernels.elementwise import add_kernel
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.worker_pool import WorkerPool
from mnnpy.converter import convert
from tests.oracle import ACCUMULATE, assert_outputs, run_ort

pytestmark = pytest.mark.skipif(spin.table_kernel() is None, reason="numba cannot compile the pool's kernels here")


def _block_model(seed: int = 0, side: int = 28):
    """MobileNetV2-like: a stem Conv, two inverted residual blocks (1x1 expand with Clip,
    depthwise 3x3 with Clip, 1x1 project, Add), a strided depthwise, GlobalAveragePool,
    Flatten and a Gemm (the op after the Program)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, *shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name))
        return name

    def conv(x, y, cin, cout, k, group=1, stride=1, clip=True):
        pad = k // 2
        nodes.append(
            helper.make_node(
                "Conv",
                [x, w(y + "_w", cout, cin // group, k, k), w(y + "_b", cout)],
                [y + "_c" if clip else y],
                kernel_shape=[k, k],
                pads=[pad] * 4,
                strides=[stride] * 2,
                group=group,
            )
        )
        if clip:
            nodes.append(helper.make_node("Clip", [y + "_c", "lo", "hi"], [y]))

    inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    conv("x", "s", 3, 32, 3)
    prev = "s"
    for i in range(2):
        conv(prev, f"e{i}", 32, 96, 1)
        conv(f"e{i}", f"d{i}", 96, 96, 3, group=96)
        conv(f"d{i}", f"p{i}", 96, 32, 1, clip=False)
        nodes.append(helper.make_node("Add", [prev, f"p{i}"], [f"r{i}"]))
        prev = f"r{i}"
    conv(prev, "ds", 32, 32, 3, group=32, stride=2)
    nodes.append(helper.make_node("GlobalAveragePool", ["ds"], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", w("fc_w", 10, 32), w("fc_b", 10)], ["y"], transB=1))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, side, side])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "blocks", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal((1, 3, side, side)).astype(np.float32)}


def _sessions(model, feeds, threads):
    data = convert(model)
    made = {}
    for flag in (False, True):
        cpu.PROGRAMS = flag
        try:
            s = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=threads)
            s.resize({k: v.shape for k, v in feeds.items()})
        finally:
            cpu.PROGRAMS = True
        made[flag] = s
    return made


def _programs(session):
    segs = session.runner.plan.steps[0].recording.segments
    return [] if segs is None else [runs for program, runs, _ in segs if program is not None]


@pytest.mark.parametrize("threads", [2, 3])
def test_a_program_gives_the_per_op_outputs_bit_for_bit(threads):
    model, feeds = _block_model()
    s = _sessions(model, feeds, threads)
    programs = _programs(s[True])
    assert programs and max(len(p) for p in programs) >= 10  # the convs, Clips fused, Adds, pool in one Program
    assert _programs(s[False]) == []
    for k in range(3):
        x = {"x": (feeds["x"] * (k + 1)).astype(np.float32)}
        got, per_op = s[True].run(x)["y"], s[False].run(x)["y"]
        np.testing.assert_array_equal(got, per_op)
        assert_outputs(run_ort(model, x), [got], ["y"], **ACCUMULATE)


def test_runs_after_the_workers_slept_and_from_a_busy_pool():
    model, feeds = _block_model(1)
    s = _sessions(model, feeds, 2)
    want = s[False].run(feeds)["y"]
    time.sleep(0.12)  # past the workers' polling: they sleep and are woken by the Program's post
    np.testing.assert_array_equal(s[True].run(feeds)["y"], want)
    pool = s[True].runner.plan.steps[0].backend.pool
    with pool._lock:  # another caller holds the pool: the Program's calls run on this thread
        np.testing.assert_array_equal(s[True].run(feeds)["y"], want)
    got = []
    threads = [threading.Thread(target=lambda: got.append(s[True].run(feeds)["y"])) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and all(np.array_equal(g, want) for g in got)


def test_the_profiler_and_deadlines_see_each_op():
    from mnnpy.tools.profile import op_profile

    model, feeds = _block_model(2)
    s = _sessions(model, feeds, 2)[True]
    rows, _ = op_profile(s, feeds, 3)
    timed = {name for name, _, ms in rows if ms > 0}
    assert {"p0_c", "d1_c", "r0"} <= timed or len(timed) >= 10, rows
    np.testing.assert_array_equal(s.run(feeds, timeout_ms=60_000)["y"], _sessions(model, feeds, 2)[False].run(feeds)["y"])


def _child(conn):
    model, feeds = _block_model(3)
    conn.send(mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2).run(feeds)["y"])


def test_a_forked_child_runs_programs():
    model, feeds = _block_model(3)
    s = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    want = s.run(feeds)["y"]
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_child, args=(b,))
    p.start()
    assert a.poll(60), "the forked child did not answer"
    np.testing.assert_array_equal(a.recv(), want)
    p.join(10)
    assert p.exitcode == 0


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_pool_program_orders_its_phases(n):
    """Phase j+1 reads what phase j wrote, on every thread: each phase adds the previous
    phase's output to a constant, so any call run before its barrier shows; phases of one task
    (the caller's alone, no barrier between two of them) between shared ones."""
    two, _ = add_kernel()
    pool = WorkerPool(n)
    pool.use_spin(spin.kernel(), spin.serve_kernel(), spin.table_kernel())
    size, phases_n = 4096, 12
    bufs = [np.zeros(size, np.float32) for _ in range(phases_n + 1)]
    one = np.ones(size, np.float32)
    phases = []
    for j in range(phases_n):
        cuts = np.linspace(0, size, (1, 1, n, n + 1, 1, n - 1)[j % 6] + 1).astype(int)  # caller alone, or shared
        phases.append([bind(two, bufs[j], one, bufs[j + 1], int(lo), int(hi)) for lo, hi in zip(cuts, cuts[1:])])
    program = pool.program(phases)
    assert program is not None
    pool.wake()
    try:
        for r in range(20):
            bufs[0][:] = r
            pool.run_program(program)
            np.testing.assert_array_equal(bufs[-1], np.full(size, r + phases_n, np.float32))
    finally:
        pool.park()


def test_programs_are_not_made_of_python_tasks():
    pool = WorkerPool(2)
    pool.use_spin(spin.kernel(), spin.serve_kernel(), spin.table_kernel())
    two, _ = add_kernel()
    a = np.zeros(8, np.float32)
    assert pool.program([[bind(two, a, a, a, 0, 8)], [lambda: None]]) is None
    alone = pool.program([[bind(two, a, a, a, 0, 8)], [bind(two, a, a, a, 0, 8)]])
    assert alone is not None and alone.barriers == 0 and alone.calls == [0]  # the caller's alone: no worker posted


def test_fused_pairs_stay_out_of_programs_unless_they_say():
    """A nearest Resize whose Add is fused into it (fusion.py): the Add does nothing on its own,
    so it must not run its own native add in a Program (it would read a tensor never written)."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array((rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(8, np.float32), "b")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("Add", ["r", "skip"], ["a"], name="a_add"),
        helper.make_node("Conv", ["a", "w", "b"], ["y"], kernel_shape=[1, 1]),
    ]
    ins = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 40, 40]),
        helper.make_tensor_value_info("skip", TensorProto.FLOAT, [1, 8, 80, 80]),
    ]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "c")]  # c kept: not under a
    graph = helper.make_graph(nodes, "g", ins, outs, [w, b, scales])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {
        "x": rng.standard_normal((1, 8, 40, 40)).astype(np.float32),
        "skip": rng.standard_normal((1, 8, 80, 80)).astype(np.float32),
    }
    s = _sessions(model, feeds, 2)
    assert [getattr(exe, "fused_with", None) for exe, _, _ in s[True].runner.plan.steps[0].runs][1] == "a_add"
    np.testing.assert_array_equal(s[True].run(feeds)["y"], s[False].run(feeds)["y"])
    assert_outputs(run_ort(model, feeds)[:1], [s[True].run(feeds)["y"]], ["y"], **ACCUMULATE)


def test_a_program_ends_with_winograd_and_its_check_follows():
    """A 3x3 stride-1 Conv on Winograd ends its Program; its check of the input (the exact sums
    where an input is not finite) runs right after: NaN and inf reach only the outputs whose
    window reads them, as in onnxruntime."""
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
        for n, s in (("w1", (32, 16, 1, 1)), ("w3", (32, 32, 3, 3)), ("w2", (16, 32, 1, 1)), ("b", (32,)), ("b2", (16,)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b"], ["a"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["ar", "w3", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["cr"]),
        helper.make_node("Conv", ["cr", "w2", "b2"], ["d"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 24, 24])
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal((1, 16, 24, 24)).astype(np.float32)}
    s = _sessions(model, feeds, 2)
    runs = s[True].runner.plan.steps[0].runs
    kinds = [type(getattr(exe, "kernel", None)).__name__ for exe, _, _ in runs]
    assert "_Winograd" in kinds, kinds
    segs = s[True].runner.plan.steps[0].recording.segments
    assert any(after is not None for program, _, after in segs if program is not None)
    for bad in (np.nan, np.inf):
        f = {"x": feeds["x"].copy()}
        f["x"][0, 3, 10, 10] = bad
        got = s[True].run(f)["y"]
        np.testing.assert_array_equal(got, s[False].run(f)["y"])
        assert np.isnan(got).sum() < got.size // 4  # not spread over whole tiles
        assert_outputs(run_ort(model, f), [got], ["y"], **ACCUMULATE)

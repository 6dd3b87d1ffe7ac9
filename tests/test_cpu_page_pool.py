"""The process's pool of a closed CPU session's mapped pages (backends/cpu/page_pool.py): a
closed session's arena, scratch region and temporaries come back zeroed and serve the next
session; a session that is not closed gives nothing to it; the limit holds."""

import gc

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backends.cpu import page_pool, scratch
from mnnpy.converter import convert
from tests.oracle import make_model

C, H = 16, 320  # 6.5 MB a tensor: from HUGE_MIN_BYTES, the arena is a reserved range


@pytest.fixture
def model():
    rng = np.random.default_rng(0)
    inits = {f"w{i}": (0.1 * rng.standard_normal((C, C, 3, 3))).astype(np.float32) for i in range(3)}
    nodes = [helper.make_node("Conv", ["x" if i == 0 else f"c{i - 1}", f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]) for i in range(3)]
    return convert(make_model(nodes, {"x": np.zeros((1, C, H, H), np.float32)}, ["c2"], inits))


@pytest.fixture(autouse=True)
def empty_pool():
    _settled()
    page_pool.release()
    yield
    _settled()
    page_pool.release()


def _settled():
    """Collect garbage, then wait for the pages thread (zeroing runs there)."""
    gc.collect()
    page_pool.helper().submit(lambda: None).result()


def _run(data, x):
    s = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=2)
    y = s.run({"x": x})
    return s, np.array(next(iter(y.values())) if isinstance(y, dict) else y[0])  # a copy: nothing of the session kept


def test_a_closed_sessions_pages_serve_the_next_session(model):
    x = np.random.default_rng(1).standard_normal((1, C, H, H)).astype(np.float32)
    s, first = _run(model, x)
    arena = s.backends[0].arena
    arena[:] = 0xAB  # what a run leaves: the pool must give back zeros
    del arena
    s.close()
    del s
    _settled()
    held = page_pool.pooled_bytes()
    assert held >= H * H * C * 4  # at least the arena's pages
    ranges = {lease.address for lease in page_pool._pool()._free}
    t, again = _run(model, x)
    assert page_pool.pooled_bytes() < held  # taken
    assert t.backends[0].arena.ctypes.data in ranges  # pages of the closed session
    np.testing.assert_array_equal(again, first)
    t.close()


def test_ranges_come_back_zeroed():
    pages = scratch.ResizeHelper()
    arena = scratch.mapped(8 << 20, pages)
    pages.wait()
    arena[:] = 7
    address = arena.ctypes.data
    pages.close()
    del arena
    _settled()
    again = scratch.mapped(8 << 20, scratch.ResizeHelper())
    assert again.ctypes.data == address and not again.any()


def test_a_session_not_closed_gives_nothing(model):
    """A session dropped without ``close`` (collected): its pages go back to the system."""
    x = np.ones((1, C, H, H), np.float32)
    s, _ = _run(model, x)
    _settled()
    assert page_pool.pooled_bytes() == 0
    del s
    _settled()
    assert page_pool.pooled_bytes() == 0


def test_the_limit_holds(monkeypatch):
    monkeypatch.setenv(page_pool.POOL_ENV, "20")
    held = []
    for _ in range(4):
        pages = scratch.ResizeHelper()
        a = scratch.mapped(8 << 20, pages)
        pages.wait()
        held.append((pages, a))
    for pages, _ in held:
        pages.close()
    held.clear()
    _settled()
    assert 0 < page_pool.pooled_bytes() <= 20 << 20
    monkeypatch.setenv(page_pool.POOL_ENV, "0")
    pages = scratch.ResizeHelper()
    a = scratch.mapped(8 << 20, pages)
    pages.close()
    before = page_pool.pooled_bytes()
    del a
    _settled()
    assert page_pool.pooled_bytes() == before  # nothing given back at a limit of 0


def test_pool_refused_falls_back(monkeypatch):
    """Where no range can be reserved, the arena is a mapping of its own."""
    monkeypatch.setattr(page_pool, "reserve", lambda: None)
    a = scratch.mapped(5 << 20, scratch.ResizeHelper())
    assert a.nbytes == 5 << 20 and not a.any()


def test_a_pooled_range_is_charged_as_handed_out():
    """A range from the pool (its pages mapped) serving the shared temporaries: the plan is still
    charged the bytes handed out, and they read as zero."""
    from mnnpy import limits

    pages = scratch.ResizeHelper()
    a = scratch.mapped(8 << 20, pages)
    pages.wait()
    a[:] = 5
    pages.close()
    del a
    _settled()
    assert page_pool.pooled_bytes() >= 8 << 20
    charge = limits.MemoryBudget(1 << 30).plan("test")
    with limits.planning(charge):
        helper = scratch.ResizeHelper()
        buf = scratch.SharedBuffer(helper).at_least(3 << 20)
        helper.wait()
    assert page_pool.pooled_bytes() == 0  # taken
    assert charge.used == 3 << 20 and not buf[: 3 << 20].any()


@pytest.mark.parametrize("value", ["abc", "", "0.5", "-5", "1e3", str(10**20)])
def test_a_bad_limit_warns_and_keeps_the_default(monkeypatch, value):
    monkeypatch.setenv(page_pool.POOL_ENV, value)
    page_pool._limit_mb.cache_clear()
    with pytest.warns(RuntimeWarning, match=page_pool.POOL_ENV):
        assert page_pool.limit_bytes() == page_pool.DEFAULT_POOL_MB << 20


def test_a_second_close_leaves_a_range_another_session_took_alone():
    """A range back in the pool is a new lease: closing its old session again does not mark
    the range that another session has taken since."""
    first = scratch.ResizeHelper()
    a = scratch.mapped(8 << 20, first)
    first.wait()
    first.close()
    del a
    _settled()
    second = scratch.ResizeHelper()
    b = scratch.mapped(8 << 20, second)
    first.close()  # again
    del b  # the second helper was never closed: back to the system
    _settled()
    assert page_pool.pooled_bytes() == 0

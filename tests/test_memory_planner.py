"""Memory planner: overlapping lifetimes never share bytes, 64-byte alignment, bounded arena."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnnpy.memory_planner import ALIGN, Lifetime, plan_memory


def _aligned(n: int) -> int:
    return (max(n, 1) + ALIGN - 1) // ALIGN * ALIGN


def check_plan(buffers: list[Lifetime]) -> None:
    plan = plan_memory(buffers)
    assert set(plan.offsets) == {b.key for b in buffers}
    for b in buffers:
        off = plan.offsets[b.key]
        assert off % ALIGN == 0 and off >= 0
        assert off + b.nbytes <= plan.arena_bytes
    for i, a in enumerate(buffers):
        for b in buffers[i + 1 :]:
            if a.first <= b.last and b.first <= a.last:  # alive at a common step
                oa, ob = plan.offsets[a.key], plan.offsets[b.key]
                assert oa + _aligned(a.nbytes) <= ob or ob + _aligned(b.nbytes) <= oa, (a, b, oa, ob)
    assert plan.arena_bytes <= sum(_aligned(b.nbytes) for b in buffers)
    steps = {s for b in buffers for s in (b.first, b.last)}
    live = max((sum(_aligned(b.nbytes) for b in buffers if b.first <= s <= b.last) for s in steps), default=0)
    assert plan.arena_bytes >= live


def test_empty():
    assert plan_memory([]).arena_bytes == 0


def test_chain_reuses_memory():
    # a -> b -> c -> d, each alive for two steps: two slots suffice
    bufs = [Lifetime(k, 1000, k, k + 1) for k in range(4)]
    plan = plan_memory(bufs)
    check_plan(bufs)
    assert plan.arena_bytes == 2 * _aligned(1000)


def test_disjoint_lifetimes_share():
    bufs = [Lifetime(0, 4096, 0, 1), Lifetime(1, 4096, 2, 3)]
    assert plan_memory(bufs).offsets == {0: 0, 1: 0}


def test_zero_size_buffers_are_placed():
    check_plan([Lifetime(0, 0, 0, 5), Lifetime(1, 0, 0, 5), Lifetime(2, 10, 1, 2)])


lifetimes = st.lists(
    st.tuples(st.integers(0, 1 << 16), st.integers(-1, 30), st.integers(0, 12)),
    max_size=40,
).map(lambda xs: [Lifetime(k, n, f, f + d) for k, (n, f, d) in enumerate(xs)])


@settings(max_examples=300, deadline=None)
@given(lifetimes)
def test_random_plans(buffers):
    check_plan(buffers)

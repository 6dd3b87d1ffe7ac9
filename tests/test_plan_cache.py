"""Plans in the compilation cache (``mnnpy.plan_cache``): a warm session with a ``cache_dir``
loads the plan of the same inputs and backends (sizes, schedule, memory layout) instead of
computing it, bit for bit the plan the cold session computed, with identical outputs; every
shape, value-input content, segment and control-flow body has its own entry; a tampered or
undecodable entry is rejected with a warning and rebuilt; the memory limit of the loading
session is enforced as if it computed the plan; a plan the codec cannot hold is not cached."""

from __future__ import annotations

import json
import warnings
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy import compilation_cache as cc
from mnnpy import plan_cache, plan_codec
from mnnpy import planner as planner_module
from mnnpy.converter import convert
from mnnpy.ops.geometry import ResizeGeometry, Window
from tests.backend_compare import backends, he_weights
from tests.oracle import make_model, rand
from tests.test_control_flow import if_model, loop_model

SHAPE, OTHER = (1, 3, 16, 20), (2, 3, 12, 12)


def geometry_model(rng) -> bytes:
    """x (N, 3, H, W) -> Conv 3x3 -> Relu -> MaxPool -> Resize x2 (linear) -> Slice -> Pad ->
    {ReduceMean, Reshape to (N, C, -1) by a shape computed from Shape (folded at resize) ->
    Split}: every kind of derived geometry (windows, Resize tables, slices, pads, axes, split)
    and values folded at resize."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Resize", ["p", "", "scales"], ["u"], mode="linear"),
        helper.make_node("Slice", ["u", "starts", "ends", "axes"], ["s"]),
        helper.make_node("Pad", ["s", "pads"], ["d"]),
        helper.make_node("ReduceMean", ["d"], ["m"], axes=[2, 3], keepdims=1),
        helper.make_node("Shape", ["d"], ["sh"]),
        helper.make_node("Slice", ["sh", "zero", "two", "zero"], ["nc"]),
        helper.make_node("Concat", ["nc", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["d", "target"], ["f"]),
        helper.make_node("Split", ["f"], ["y1", "y2"], axis=1),
    ]
    inits = {
        "w": he_weights(rng, 4, 3, 3, 3),
        "b": rand(rng, 4),
        "scales": np.array([1, 1, 2, 2], np.float32),
        "starts": np.array([1], np.int64),
        "ends": np.array([-1], np.int64),
        "axes": np.array([3], np.int64),
        "pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
        "zero": np.array([0], np.int64),
        "two": np.array([2], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    x = rand(rng, *SHAPE)
    return convert(make_model(nodes, {"x": x}, ["m", "y1", "y2"], inits, opset=13, input_shapes={"x": ["n", 3, "h", "w"]}))


@pytest.fixture(scope="module")
def interp():
    return mnnpy.Interpreter(geometry_model(np.random.default_rng(0)))


def feeds(shape, seed=1) -> dict:
    return {"x": rand(np.random.default_rng(seed), *shape)}


def store(session):
    """The main graph's ``PlanStore``."""
    return session.runner.planner.store


def forbid_planning(monkeypatch) -> None:
    """Make computing any part of a plan fail: a session must load every plan it makes."""

    def fail(*args, **kwargs):
        raise AssertionError("a plan was computed, not loaded")

    for name in ("compute_sizes", "build_schedule", "plan_memory", "tensor_lifetimes"):
        monkeypatch.setattr(planner_module, name, fail)


def same(a, b) -> None:
    """``a`` and ``b`` equal in type and bits, recursively (arrays, dataclasses, containers)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif is_dataclass(a):
        for f in fields(a):
            same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b, (a, b)


def same_plan(p, q) -> None:
    """Two plans with the same sizes, schedule and memory layout (bit for bit)."""
    for name in ("shapes", "dtypes", "values", "geometry", "mflops", "runtime_ops", "barrier", "dynamic"):
        same(getattr(p.sizes, name), getattr(q.sizes, name))
    same(vars(p.schedule), vars(q.schedule))
    same([vars(m) for m in p.memory], [vars(m) for m in q.memory])
    assert [list(h) for h in p.handles] == [list(h) for h in q.handles]


def plan_names(folder: Path, token: str) -> list[str]:
    return sorted(n for n in cc.read_mapping(folder).get(token, {}) if n.startswith("plan/"))


def test_warm_session_loads_the_plan_bit_for_bit(interp, tmp_path, monkeypatch):
    want = interp.create_session().run(feeds(SHAPE))
    cold = interp.create_session(cache_dir=tmp_path)
    cold.resize({"x": SHAPE})
    assert (store(cold).hits, store(cold).misses) == (0, 1)
    geometry = cold.runner.plan.sizes.geometry.values()
    assert any(isinstance(g.get("window"), Window) for g in geometry)
    assert any(isinstance(g.get("resize"), ResizeGeometry) for g in geometry)
    assert any(isinstance(g.get("slices"), list) for g in geometry)
    folded = set(cold.runner.plan.sizes.values) - {t for t, d in enumerate(interp.net.main.tensors) if d.data is not None}
    assert folded, "the model folds values at resize"
    assert len(plan_names(tmp_path, interp.model_token())) == 1

    forbid_planning(monkeypatch)
    warm = interp.create_session(cache_dir=tmp_path)
    warm.resize({"x": SHAPE})
    assert (store(warm).hits, store(warm).misses, store(warm).rejected) == (1, 0, 0)
    same_plan(cold.runner.plan, warm.runner.plan)
    got = warm.run(feeds(SHAPE))
    for k in want:
        same(got[k], want[k])
    assert warm.partitions() == cold.partitions()


def test_each_input_shape_has_its_own_entry(interp, tmp_path, monkeypatch):
    cold = interp.create_session(cache_dir=tmp_path)
    for shape in (SHAPE, OTHER):
        cold.run(feeds(shape))
    assert len(plan_names(tmp_path, interp.model_token())) == 2
    forbid_planning(monkeypatch)
    warm = interp.create_session(cache_dir=tmp_path)
    for shape in (OTHER, SHAPE, OTHER):
        got, want = warm.run(feeds(shape)), cold.run(feeds(shape))
        for k in want:
            same(got[k], want[k])
    assert (store(warm).hits, store(warm).misses) == (2, 0)  # the third run reuses the session's own plan


def test_options_that_change_a_plan_are_other_entries(interp, tmp_path):
    for threads in (1, 2, 1):
        interp.create_session(cache_dir=tmp_path, num_threads=threads).resize({"x": SHAPE})
    assert len(plan_names(tmp_path, interp.model_token())) == 2
    s = interp.create_session(cache_dir=tmp_path)
    st = store(s)
    base = st.name({0: SHAPE}, {}, 0, {})
    assert base != st.name({0: OTHER}, {}, 0, {})
    assert base != st.name({0: SHAPE}, {}, 1, {})
    assert base != st.name({0: SHAPE}, {}, 0, {0: np.float64})
    assert base != st.name({0: SHAPE}, {5: np.array([1, 2])}, 0, {})
    assert st.name({0: SHAPE}, {5: np.array([1, 2])}, 0, {}) != st.name({0: SHAPE}, {5: np.array([1, 3])}, 0, {})
    st._context, st.placer = None, "AutoPlacer(preference='low_power')"
    assert base != st.name({0: SHAPE}, {}, 0, {})


def test_other_planning_rules_are_another_entry(interp, tmp_path, monkeypatch):
    """A source tree whose shape functions or planner changed (same mnnpy version) names other
    entries: the key holds the digest of those sources."""
    from mnnpy import plan_cache

    st = store(interp.create_session(cache_dir=tmp_path))
    base = st.name({0: SHAPE}, {}, 0, {})
    st._context = None
    monkeypatch.setattr(plan_cache, "rules_digest", lambda: "0123456789abcdef")
    assert base != st.name({0: SHAPE}, {}, 0, {})


def _entry(folder: Path, token: str) -> tuple[str, dict]:
    """(name, decoded JSON) of the one plan entry of ``token``."""
    (name,) = plan_names(folder, token)
    return name, json.loads(cc.CompilationCache(folder, token).load(name, "plan"))


def _write(folder: Path, token: str, name: str, payload: bytes) -> None:
    """Save ``payload`` as entry ``name``, consistently (the hashes match: only decoding can refuse it)."""
    cache = cc.CompilationCache(folder, token)
    cache.save(name, "plan", payload)
    cache.flush()


def _set(path: tuple, value):
    def edit(entry):
        node = entry
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return edit


TAMPERED = {
    "not JSON": b"{",
    "not UTF-8": b"\xff\xfe\x00",
    "nested past the recursion limit": b"[" * 100_000,
    "a part missing": lambda e: e.pop("schedule"),
    "a negative dim": lambda e: _set(("shapes", 0, 1), [-1, 3])(e),
    "a tensor index out of range": _set(("shapes", 0, 0), 10**6),
    "an object dtype": _set(("dtypes", 0, 1), "|O"),
    "a dtype that is no dtype": _set(("dtypes", 0, 1), "<zz"),
    "a tensor past its arena": lambda e: e["layouts"][0].update(arena=0),
    "an unknown value tag": lambda e: e["geometry"][0][1][0].__setitem__(1, {"p": ["os.system"]}),
    "a class off the allow-list": lambda e: e["geometry"][0][1][0][1]["c"].__setitem__(0, "Popen"),
    "a window of five fields": lambda e: e["geometry"][0][1][0][1]["c"][1].pop(),
    "array bytes that are not base64": lambda e: _array_of(e).__setitem__(2, "!!!"),
    "array bytes of another size": lambda e: _array_of(e).__setitem__(2, "AAAA"),
    "an unhashable dict key": _set(("mflops", 0, 1), {"d": [[{"l": [1]}, 2.0]]}),
    "a schedule that misses an op": lambda e: e["schedule"]["partitions"][0][1].pop(),
    "a negative charge": _set(("charges",), [[-5, "x", None]]),
    "an op outside the graph": lambda e: e["runtime_ops"].append(10**6),
}


def _array_of(entry: dict) -> list:
    """The ``[dtype, shape, base64]`` of the first folded value that is an array."""
    return next(v["a"] for _, v in entry["values"] if isinstance(v, dict) and "a" in v)


@pytest.mark.parametrize("how", list(TAMPERED))
def test_an_undecodable_entry_is_rejected_and_rebuilt(interp, tmp_path, how):
    want = interp.create_session().run(feeds(SHAPE))
    interp.create_session(cache_dir=tmp_path).resize({"x": SHAPE})
    token = interp.model_token()
    name, entry = _entry(tmp_path, token)
    edit = TAMPERED[how]
    if isinstance(edit, bytes):
        payload = edit
    else:
        edit(entry)
        payload = json.dumps(entry).encode()
    _write(tmp_path, token, name, payload)
    with pytest.warns(RuntimeWarning, match="rejected"):
        s = interp.create_session(cache_dir=tmp_path)
        got = s.run(feeds(SHAPE))
    assert (store(s).hits, store(s).rejected) == (0, 1)
    for k in want:
        same(got[k], want[k])
    again = interp.create_session(cache_dir=tmp_path)  # rebuilt and saved again: a hit
    again.resize({"x": SHAPE})
    assert (store(again).hits, store(again).rejected) == (1, 0)


def test_damaged_or_swapped_files_are_rejected_by_the_cache(interp, tmp_path):
    want = interp.create_session().run(feeds(SHAPE))
    cold = interp.create_session(cache_dir=tmp_path)
    cold.run(feeds(OTHER))
    cold.run(feeds(SHAPE))
    token = interp.model_token()
    mapping = cc.read_mapping(tmp_path)[token]
    a, b = (tmp_path / "entries" / token / mapping[n]["file"] for n in plan_names(tmp_path, token))
    good_a, good_b = a.read_bytes(), b.read_bytes()
    for bad in (good_a[:-1] + bytes([good_a[-1] ^ 1]), good_a[: len(good_a) // 2], good_b):  # flipped, cut, swapped
        a.write_bytes(bad)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            s = interp.create_session(cache_dir=tmp_path)
            for shape in (OTHER, SHAPE):
                got = s.run(feeds(shape))
        assert any("rejected" in str(w.message) for w in seen), [str(w.message) for w in seen]
        assert store(s).hits == 1 and store(s).misses == 1
        for k in want:
            same(got[k], want[k])
        a.write_bytes(good_a)
        b.write_bytes(good_b)


def _outcome(interp, limit, cache_dir=None) -> tuple[str, object]:
    s = interp.create_session(memory_limit=limit, cache_dir=cache_dir)
    try:
        s.resize({"x": SHAPE})
    except mnnpy.ShapeError:
        return "refused", s
    return "planned", s


def test_the_memory_limit_holds_for_a_cached_plan(interp, tmp_path):
    plain = interp.create_session()
    plain.resize({"x": SHAPE})
    plan = plain.runner.plan
    largest = max(int(np.prod(s)) * plan.sizes.dtypes[t].itemsize for t, s in plan.sizes.shapes.items())
    held = plain.budget.held
    interp.create_session(cache_dir=tmp_path).resize({"x": SHAPE})
    outcomes = set()
    for limit in (largest - 1, largest, (largest + held) // 2, held - 1, held, held + 4096):
        computed, _ = _outcome(interp, limit)
        loaded, s = _outcome(interp, limit, tmp_path)
        assert store(s).hits == 1  # the refusal (if any) came from the loaded plan
        assert loaded == computed, limit
        outcomes.add(loaded)
    assert outcomes == {"refused", "planned"}


def test_value_inputs_key_their_plans_by_content(rng, tmp_path, monkeypatch):
    x = rand(rng, 2, 3, 4)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])]
    model = make_model(nodes, {"x": x, "shape": np.array([4, 6])}, ["y"], input_shapes={"shape": ["rank"]})
    interp = mnnpy.Interpreter(convert(model))
    targets = ([4, 6], [2, 12], [-1, 3, 2])
    cold = interp.create_session(cache_dir=tmp_path)
    for target in targets:
        cold.run({"x": x, "shape": np.array(target)})
    assert len(plan_names(tmp_path, interp.model_token())) == 3
    forbid_planning(monkeypatch)
    warm = interp.create_session(cache_dir=tmp_path)
    for target in reversed(targets):
        y = warm.run({"x": x, "shape": np.array(target)})["y"]
        same(y, np.maximum(x, 0).reshape(target))
    assert store(warm).hits == 3


def _all_stores(runner) -> list:
    """The PlanStores of ``runner`` and of every body runner below it."""
    out = [runner.planner.store]
    for body in runner.bodies().values():
        out += _all_stores(body)
    return out


@pytest.mark.parametrize("make", [if_model, lambda rng: loop_model(rng, "cond")], ids=["if", "loop"])
def test_control_flow_segments_and_bodies_are_cached(rng, tmp_path, monkeypatch, make):
    model, inputs = make(rng)
    interp = mnnpy.Interpreter(convert(model))
    want = interp.create_session().run(inputs)
    cold = interp.create_session(cache_dir=tmp_path)
    cold.run(inputs)
    made = sum(s.misses for s in _all_stores(cold.runner))
    assert made >= 2 and len(plan_names(tmp_path, interp.model_token())) == made  # the graph and a body at least
    forbid_planning(monkeypatch)
    warm = interp.create_session(cache_dir=tmp_path)
    got = warm.run(inputs)
    assert sum(s.hits for s in _all_stores(warm.runner)) == made
    for k in want:
        same(got[k], want[k])


def test_segments_after_a_data_dependent_op_are_cached(rng, tmp_path, monkeypatch):
    """NonZero on an input too large to key plans by: a second segment, planned at run."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0]),
    ]
    x = rand(rng, 260, 260)
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y", "r"])))
    cold = interp.create_session(cache_dir=tmp_path)
    want = cold.run({"x": x})
    assert len(cold.runner.segments) == 2 and len(plan_names(tmp_path, interp.model_token())) == 2
    forbid_planning(monkeypatch)
    warm = interp.create_session(cache_dir=tmp_path)
    got = warm.run({"x": x})
    assert store(warm).hits == 2
    for k in want:
        same(got[k], want[k])


def test_a_plan_the_codec_cannot_hold_is_not_cached(interp, tmp_path, monkeypatch):
    monkeypatch.setattr(plan_codec, "GEOMETRY", {})  # no geometry class allowed: every Conv's Window is refused
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = interp.create_session(cache_dir=tmp_path)
        s.resize({"x": SHAPE})
    assert store(s).unencodable == 1 and plan_names(tmp_path, interp.model_token()) == []


def test_no_cache_dir_no_store(interp):
    assert store(interp.create_session()) is None


@pytest.mark.parametrize("backend", backends())
def test_every_backend_loads_its_plan(backend, rng, tmp_path, monkeypatch):
    x = rand(rng, 1, 3, 13, 7)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Erf", ["r"], ["e"]),
        helper.make_node("Sigmoid", ["e"], ["y"]),
    ]
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"], input_shapes={"x": [1, 3, "h", "w"]})))
    names = [backend, "cpu"] if backend != "cpu" else "cpu"
    cold = interp.create_session(backend=names, cache_dir=tmp_path)
    want = cold.run({"x": x})
    forbid_planning(monkeypatch)
    warm = interp.create_session(backend=names, cache_dir=tmp_path)
    got = warm.run({"x": x})
    assert store(warm).hits == 1
    same(got["y"], want["y"])
    assert warm.partitions() == cold.partitions()


def test_the_graph_is_named_by_position_or_by_digest(interp, tmp_path):
    """The default token is the model's SHA-256: it names every graph with its position; a
    caller's token does not, so the graph's digest (ops, attributes, tensors, constants' samples)
    stands for it, and another model's digest differs."""
    s = interp.create_session(cache_dir=tmp_path)
    s.resize({"x": SHAPE})
    assert store(s)._context["graph"] == "graph 0 of the model"
    t = interp.create_session(cache_dir=tmp_path, cache_token="ab" * 32)
    t.resize({"x": SHAPE})
    digest = store(t)._context["graph"]
    assert digest == plan_cache.graph_digest(mnnpy.Interpreter(geometry_model(np.random.default_rng(0))).net.main)
    assert digest != plan_cache.graph_digest(mnnpy.Interpreter(geometry_model(np.random.default_rng(1))).net.main)

"""Khronos validation with synchronization validation reports nothing for Vulkan runs.

Each check runs in a fresh interpreter with ``MNNPY_VULKAN_VALIDATION=1`` (the instance is
created once per process). A model with a partition border, constants, reused arena
ranges (read-after-write and write-after-read between dispatches) and an empty tensor is
resized and run three times; every validation warning or error fails the test. A second
run without barriers must report hazards: the check is live. The real models run clean too,
in fp32 and fp16 storage, and so do int32, int64 and bool tensors. Skipped, with the reason,
where Vulkan or the layer (Debian
``vulkan-validationlayers``) is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnnpy.backend import backend_availability
from tests.backend_compare import backend_cases, subprocess_env

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")
ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
import numpy as np
from onnx import helper
from mnnpy.backends.vulkan import commands, validation
from mnnpy.backends.vulkan.device import probe
from tests.backend_compare import compare
from tests.oracle import ELEMENTWISE_CHAIN, EXACT, HALF, make_model, rand

if not validation.layer_available(probe().vk):
    print(json.dumps(None)); sys.exit(0)
if sys.argv[1] == "no-barriers":
    commands.Recorder.barrier = lambda self, *a, **k: None
rng = np.random.default_rng(0)
x = rand(rng, 4, 33, 17)
nodes, prev = [], "x"
for k in range(6):
    nodes.append(helper.make_node(["Neg", "Abs", "Sqrt", "Exp", "Tanh", "Relu"][k], [prev], [f"t{k}"]))
    nodes.append(helper.make_node("Add", [f"t{k}", prev], [f"s{k}"]))
    prev = f"s{k}"
nodes += [helper.make_node("Erf", [prev], ["e"]), helper.make_node("Mul", ["e", "w"], ["y"])]
nodes += [helper.make_node("Relu", ["z"], ["zr"])]
model = make_model(nodes, {"x": x, "z": np.zeros((2, 0), np.float32)}, ["y", "s2", "zr"], {"w": rand(rng, 17)})
feeds = {"x": x, "z": np.zeros((2, 0), np.float32)}
if sys.argv[1] == "fp16-scalars":  # 2-byte tensors next to each other: (1,) and () activations in fp16
    a, b = np.array([3.0], np.float32), np.array([2.0], np.float32)
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "a"], ["s"])]
    nodes += [helper.make_node("ReduceSum", ["s"], ["y"], keepdims=0), helper.make_node("Neg", ["y"], ["n"])]
    model, feeds = make_model(nodes, {"a": a, "b": b}, ["n", "s"]), {"a": a, "b": b}
    session = compare(model, feeds, HALF, True, backend="vulkan", precision="low")
elif sys.argv[1] == "empty-op":  # an op on an empty tensor dispatches nothing; a later output reuses an upload's bytes
    x, b, d = np.zeros((0, 3), np.float32), np.ones((1, 3), np.float32), -np.ones((2, 3), np.float32)
    nodes = [helper.make_node("Add", ["x", "b"], ["c"]), helper.make_node("Relu", ["d"], ["e"])]
    model, feeds = make_model(nodes, {"x": x, "b": b, "d": d}, ["e", "c"]), {"x": x, "b": b, "d": d}
    session = compare(model, feeds, EXACT, True, backend="vulkan")
elif sys.argv[1].startswith("integers"):  # int32/int64/bool tensors: 1-, 4- and 8-byte bindings side by side
    from tests.test_elementwise import loop_body_model
    precision = "low" if sys.argv[1] == "integers-fp16" else "normal"
    for dtype in (np.int32, np.int64):
        model, feeds = loop_body_model(dtype)
        compare(model, feeds, EXACT, True, backend="vulkan", precision=precision).run(feeds)
    x, k = np.arange(-6, 6, dtype=np.float32) / 4, np.arange(12, dtype=np.int64) * 2**33
    nodes = [helper.make_node("Greater", ["x", "zero"], ["g"]), helper.make_node("Not", ["g"], ["ng"])]
    nodes += [helper.make_node("Cast", ["ng"], ["gi"], to=7), helper.make_node("Mul", ["gi", "k"], ["p"])]
    nodes += [helper.make_node("Cast", ["gi"], ["gf"], to=1), helper.make_node("Xor", ["g", "ng"], ["t"])]
    model = make_model(nodes, {"x": x, "k": k}, ["p", "gf", "t", "g"], {"zero": np.zeros(1, np.float32)})
    feeds = {"x": x, "k": k}
    session = compare(model, feeds, EXACT, True, backend="vulkan", precision=precision)
else:
    session = compare(model, feeds, ELEMENTWISE_CHAIN, False, backend="vulkan")
for _ in range(2):
    session.run(feeds)
print(json.dumps(probe().messages))
"""


def _messages(mode: str, printed: list | None = None, script: str = SCRIPT, args=(), timeout=300):
    """The messages the layer reported (``probe().messages``) in a child running ``script``
    with ``mode`` and ``args``; ``printed`` gets the stderr of the run."""
    env = subprocess_env(MNNPY_VULKAN_VALIDATION="1")
    cmd = [sys.executable, "-c", script, mode, *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found is None:
        pytest.skip("the Khronos validation layer is not installed (Debian vulkan-validationlayers)")
    if printed is not None:
        printed.append(done.stderr)
    return found


def test_runs_are_clean_under_synchronization_validation():
    assert _messages("normal") == []


def test_fp16_one_element_tensors_are_clean():
    """fp16 storage: 2-byte tensors, each descriptor ending with its tensor (no hazard on the
    bytes after it, which no barrier covers)."""
    assert _messages("fp16-scalars") == []


def test_op_on_an_empty_tensor_is_clean():
    """A later output planned into an uploaded tensor's bytes, with no dispatch reading the
    upload in between: the upload barrier orders shader writes too."""
    assert _messages("empty-op") == []


@pytest.mark.parametrize("mode", ["integers", "integers-fp16"])
def test_integer_and_bool_tensors_are_clean(mode):
    """int32, int64 and bool bindings (shaderInt64, 8-bit storage) beside float ones, in fp32
    and fp16 storage: the features are enabled and every range is ordered."""
    assert _messages(mode) == []


def test_validation_catches_missing_barriers():
    printed: list[str] = []
    found = _messages("no-barriers", printed)
    assert any("SYNC-HAZARD" in m for m in found), found[:3]
    assert all(f"mnnpy vulkan validation {m.splitlines()[0]}" in printed[0] for m in found)  # also on stderr


def _id(case):
    """A test id: the model and the precision."""
    return "-".join(case)


MODEL_SCRIPT = """
import json, sys
import numpy as np
from mnnpy import models
from mnnpy.backends.vulkan import validation
from mnnpy.backends.vulkan.device import probe
from tests.test_real_models import MAX_DIFF, Pair, _bench_models, _rand
from mnnpy.converter import convert

if not validation.layer_available(probe().vk):
    print(json.dumps(None)); sys.exit(0)
kind, precision = sys.argv[1], sys.argv[2]
tol = MAX_DIFF[precision]
if kind in ("det", "rec", "cls"):
    pair = Pair(models.ocr_model_path(kind).read_bytes(), str(models.ocr_mnnpy_path(kind)), "vulkan", precision, tol)
    shape = {"det": (1, 3, 64, 96), "rec": (1, 3, 48, 96), "cls": (1, 3, 48, 192)}[kind]
    x = _rand(shape, 7)
else:
    proto = _bench_models().MODELS[kind]()
    pair = Pair(proto.SerializeToString(), convert(proto), "vulkan", precision, tol)
    x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
pair.check(x)
pair.check(x)
print(json.dumps(probe().messages))
"""


@pytest.mark.parametrize(
    "backend,kind,precision",
    backend_cases({"vulkan": [(k, "high") for k in ("det", "rec", "cls", "mobilenet_v2", "resnet18")]}, ids=_id)
    + backend_cases({"vulkan": [(k, "low") for k in ("det", "rec", "mobilenet_v2")]}, ids=_id, precision="low"),
)
def test_real_models_are_clean(backend, kind, precision):
    """Each real model (tests/test_real_models.py) run twice in fp32 or fp16 storage: nothing reported."""
    pytest.importorskip("onnxruntime")
    assert _messages(kind, script=MODEL_SCRIPT, args=(precision,), timeout=600) == []

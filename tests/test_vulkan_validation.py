"""Khronos validation with synchronization validation reports nothing for Vulkan runs.

Each check runs in a fresh interpreter with ``MNNPY_VULKAN_VALIDATION=1`` (the instance is
created once per process). A model with a partition border, constants, reused arena
ranges (read-after-write and write-after-read between dispatches) and an empty tensor is
resized and run three times; every validation warning or error fails the test. A second
run without barriers must report hazards: the check is live. Skipped, with the reason,
where Vulkan or the layer (Debian ``vulkan-validationlayers``) is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnnpy.backend import backend_availability
from tests.backend_compare import subprocess_env

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
from tests.oracle import make_model, rand

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
    session = compare(model, feeds, (1e-2, 1e-2), True, backend="vulkan", precision="low")
elif sys.argv[1] == "empty-op":  # an op on an empty tensor dispatches nothing; a later output reuses an upload's bytes
    x, b, d = np.zeros((0, 3), np.float32), np.ones((1, 3), np.float32), -np.ones((2, 3), np.float32)
    nodes = [helper.make_node("Add", ["x", "b"], ["c"]), helper.make_node("Relu", ["d"], ["e"])]
    model, feeds = make_model(nodes, {"x": x, "b": b, "d": d}, ["e", "c"]), {"x": x, "b": b, "d": d}
    session = compare(model, feeds, (0, 0), True, backend="vulkan")
else:
    session = compare(model, feeds, (1e-4, 1e-5), False, backend="vulkan")
for _ in range(2):
    session.run(feeds)
print(json.dumps(probe().messages))
"""


def _messages(mode: str, printed: list | None = None):
    """The messages the layer reported (``probe().messages``); ``printed`` gets the stderr
    of the run."""
    env = subprocess_env(MNNPY_VULKAN_VALIDATION="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
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


def test_validation_catches_missing_barriers():
    printed: list[str] = []
    found = _messages("no-barriers", printed)
    assert any("SYNC-HAZARD" in m for m in found), found[:3]
    assert all(f"mnnpy vulkan validation {m.splitlines()[0]}" in printed[0] for m in found)  # also on stderr

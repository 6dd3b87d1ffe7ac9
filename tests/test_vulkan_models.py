"""The real models on the Vulkan backend against onnxruntime (fp32: max |diff| <= 1e-4),
each as a single Vulkan partition, and each run clean under the Khronos validation layer
with synchronization validation. Skipped, with the reason, where Vulkan is unavailable
(CI installs Mesa's lavapipe and the layer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mnnpy import models
from mnnpy.backend import backend_availability
from mnnpy.converter import convert
from tests.test_real_models import Pair, _bench_models, _rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
ATOL = 1e-4
OCR_SHAPES = {"det": [(1, 3, 160, 320)], "rec": [(1, 3, 48, 320), (2, 3, 48, 160)], "cls": [(2, 3, 48, 192)]}


def _single_partition(pair: Pair) -> None:
    desc = pair.session.partitions()
    assert desc.splitlines()[0].startswith("1 partitions") and "on vulkan" in desc, desc


@pytest.mark.parametrize("kind", ["det", "rec", "cls"])
def test_ppocr(kind):
    pair = Pair(models.ocr_model_path(kind).read_bytes(), str(models.ocr_mnnpy_path(kind)), "vulkan", "high", ATOL)
    for n, shape in enumerate(OCR_SHAPES[kind]):
        pair.check(_rand(shape, 20 + n))
    _single_partition(pair)


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_imagenet_models(name):
    proto = _bench_models().MODELS[name]()
    pair = Pair(proto.SerializeToString(), convert(proto), "vulkan", "high", ATOL)
    x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
    assert pair.check(x).shape == (1, 1000)
    _single_partition(pair)


SCRIPT = """
import json, sys
import numpy as np
from mnnpy import models
from mnnpy.backends.vulkan import validation
from mnnpy.backends.vulkan.device import probe
from tests.test_real_models import Pair, _bench_models, _rand
from mnnpy.converter import convert

if not validation.layer_available(probe().vk):
    print(json.dumps(None)); sys.exit(0)
kind = sys.argv[1]
if kind in ("det", "rec", "cls"):
    pair = Pair(models.ocr_model_path(kind).read_bytes(), str(models.ocr_mnnpy_path(kind)), "vulkan", "high", 1e-4)
    shape = {"det": (1, 3, 64, 96), "rec": (1, 3, 48, 96), "cls": (1, 3, 48, 192)}[kind]
    x = _rand(shape, 7)
else:
    proto = _bench_models().MODELS[kind]()
    pair = Pair(proto.SerializeToString(), convert(proto), "vulkan", "high", 1e-4)
    x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
pair.check(x)
pair.check(x)
print(json.dumps(probe().messages))
"""


@pytest.mark.parametrize("kind", ["det", "rec", "cls", "mobilenet_v2", "resnet18"])
def test_validation_layer_reports_nothing(kind):
    env = dict(os.environ, MNNPY_VULKAN_VALIDATION="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", SCRIPT, kind], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found is None:
        pytest.skip("the Khronos validation layer is not installed (Debian vulkan-validationlayers)")
    assert found == [], found[:5]

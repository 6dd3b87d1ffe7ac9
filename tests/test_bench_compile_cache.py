"""Smoke test of ``bench/bench_compile_cache.py`` on one small model: a cold and a warm child
process on Vulkan, the table's rows (per-process phases, the model, the missing ones) and
identical outputs; never the speed."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from mnnpy.backend import backend_availability
from tests.backend_compare import conv_model
from tests.bench_module import load


def _bench():
    return load("bench_compile_cache.py", "bench_compile_cache")


@pytest.mark.skipif(not backend_availability("vulkan")[0], reason="Vulkan unavailable")
def test_cold_and_warm_rows(tmp_path, capsys):
    bench = _bench()
    model, _ = conv_model(np.random.default_rng(0), bench.MODELS["ppocr_cls"], (4, 3, 3, 3), {"pads": [1, 1, 1, 1]})
    (tmp_path / "models").mkdir()
    onnx.save(model, tmp_path / "models" / "ppocr_cls.onnx")
    out = tmp_path / "table.md"
    assert bench.main(["--models", str(tmp_path / "models"), "--backends", "vulkan", "--output", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert any(r.startswith("| vulkan | process: runtime |") for r in rows), rows
    row = next(r for r in rows if r.startswith("| vulkan | ppocr_cls create+resize"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert float(cells[2]) > 0 and float(cells[3]) > 0 and cells[4].endswith("x") and cells[5] == "yes", row
    assert any("no mobilenet_v2.onnx" in r for r in rows), rows
    assert row in capsys.readouterr().out


def test_models_folder_required(tmp_path):
    with pytest.raises(SystemExit):
        _bench().main(["--models", str(tmp_path / "missing")])


@pytest.mark.skipif(not backend_availability("vulkan")[0], reason="Vulkan unavailable")
def test_per_model_processes(tmp_path):
    """``--per-model``: each model in cold and warm processes of its own; a row per model, the mode in the header."""
    bench = _bench()
    (tmp_path / "models").mkdir()
    for name in ("ppocr_cls", "ppocr_rec"):
        model, _ = conv_model(np.random.default_rng(0), bench.MODELS[name], (4, 3, 3, 3), {"pads": [1, 1, 1, 1]})
        onnx.save(model, tmp_path / "models" / f"{name}.onnx")
    out = tmp_path / "table.md"
    assert bench.main(["--models", str(tmp_path / "models"), "--backends", "vulkan", "--per-model", "--output", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert "each model's cold and warm processes its own" in rows[0], rows[0]
    for name in ("ppocr_rec", "ppocr_cls"):
        row = next(r for r in rows if r.startswith(f"| vulkan | {name} create+resize"))
        assert row.split("|")[-2].strip() == "yes", row


def test_arguments_checked_before_any_work(tmp_path):
    """Newcomer findings: ``--repeat 0`` ended in a StatisticsError, an ``--output`` in a missing
    folder in a FileNotFoundError after the whole run, a folder without the models exited 0."""
    bench = _bench()
    (tmp_path / "models").mkdir()
    onnx.save(conv_model(np.random.default_rng(0), (1, 3, 8, 8), (4, 3, 3, 3), {})[0], tmp_path / "models" / "ppocr_cls.onnx")
    for extra in (["--repeat", "0"], ["--profile", "-3"], ["--output", str(tmp_path / "no" / "t.md")], ["--backends", "auto"]):
        with pytest.raises(SystemExit) as e:
            bench.main(["--models", str(tmp_path / "models"), *extra])
        assert e.value.code == 2, extra
    with pytest.raises(SystemExit):
        bench.main(["--models", str(tmp_path)])  # none of the five models

"""``mnnpy eval ocr`` and ``mnnpy eval classify`` on tiny settings (3 OCR lines, a small
classifier built here): the table, the PNG, the dataset's determinism, the metrics, bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from PIL import Image

from mnnpy.cli import main
from mnnpy.tools import eval_ocr
from mnnpy.tools.eval_classify import generated_images
from mnnpy.tools.eval_ocr import edit_distance, make_dataset
from tests.oracle import make_model

PNG = b"\x89PNG\r\n\x1a\n"


def test_edit_distance():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "abc") == 0


def test_dataset_is_seeded_and_uses_the_fonts():
    fonts = eval_ocr.find_fonts()
    a, b = make_dataset(4, 7, fonts), make_dataset(4, 7, fonts)
    assert [t for _, t, _ in a] == [t for _, t, _ in b] and all(np.array_equal(x, y) for (x, _, _), (y, _, _) in zip(a, b))
    assert [t for _, t, _ in make_dataset(4, 8, fonts)] != [t for _, t, _ in a]
    for img, text, _ in a:
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.shape[1] > img.shape[0]
        assert set(text) <= set(eval_ocr.LETTERS + " ")
    if fonts:
        assert {f for _, _, f in a} <= {f.rsplit("/", 1)[-1] for f in fonts}


def test_eval_ocr_cpu_and_onnxruntime(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("matplotlib")
    plot = tmp_path / "ocr.png"
    assert main(["eval", "ocr", "--lines", "3", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("cpu ", "onnxruntime "))}
    assert set(rows) == {"cpu", "onnxruntime"}
    for cells in rows.values():
        accuracy, cer, mean_ms = float(cells[2]), float(cells[3]), float(cells[4])
        assert 0 <= accuracy <= 100 and 0 <= cer < 50 and mean_ms > 0
    assert rows["cpu"][2:4] == rows["onnxruntime"][2:4]  # the same pipeline reads the same
    assert plot.read_bytes()[:8] == PNG


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """x (1, 3, 16, 16) -> Conv 3x3 (12) -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> (1, 10)."""
    rng = np.random.default_rng(2)
    w, g = rng.standard_normal((12, 3, 3, 3)).astype(np.float32), rng.standard_normal((10, 12)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["y"], transB=1),
    ]
    model = make_model(nodes, {"x": np.zeros((1, 3, 16, 16), np.float32)}, ["y"], {"w": w, "g": g})
    path = tmp_path_factory.mktemp("classify") / "tiny.onnx"
    onnx.save(model, path)
    return path


def test_eval_classify(classifier, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    assert main(["eval", "classify", str(classifier), "--count", "6", "--plot", ""]) == 0
    out = capsys.readouterr().out
    assert "6 generated images at 16x16" in out
    (cpu,) = [line.split() for line in out.splitlines() if line.startswith("cpu ")]
    assert float(cpu[2]) == 100.0 and float(cpu[3]) == 100.0  # fp32 agrees with onnxruntime
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i, img in enumerate(generated_images(2, 0, (20, 30))):
        Image.fromarray(img).save(folder / f"{i}.png")
    assert main(["eval", "classify", str(classifier), "--images", str(folder), "--plot", ""]) == 0
    assert "2 images from" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ocr", "--lines", "0"], "--lines must be between 1"),
        (["ocr", "--precision", "fp8"], "--precision 'fp8'"),
        (["ocr", "--plot", "/no/such/dir/x.png"], "no folder /no/such/dir"),
        (["classify", "MODEL", "--size", "12by12"], "--size '12by12': give HxW"),
        (["classify", "MODEL", "--images", "/no/such/dir"], "--images /no/such/dir: not a folder"),
        (["classify", "/no/such.onnx"], "no such file"),
    ],
)
def test_eval_bad_input(classifier, argv, message, capsys):
    argv = [str(classifier) if a == "MODEL" else a for a in argv]
    assert main(["eval", *argv, "--plot", argv[-1] if argv[-1].endswith(".png") else ""]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """Classifiers without weights: x (N, 3, H, W) -> GlobalAveragePool -> Flatten -> (N, 3);
    float32 with dynamic H, W ("dynamic"), and int32 with a Cast first ("int32"); and a model
    whose output is a feature map, not class scores ("map")."""
    folder = tmp_path_factory.mktemp("pooled")
    x = {"x": np.zeros((1, 3, 8, 8), np.float32)}
    pool = [helper.make_node("GlobalAveragePool", ["f"], ["p"]), helper.make_node("Flatten", ["p"], ["y"])]
    dynamic = make_model([helper.make_node("Identity", ["x"], ["f"]), *pool], x, ["y"], input_shapes={"x": ["N", 3, "H", "W"]})
    cast = helper.make_node("Cast", ["x"], ["f"], to=onnx.TensorProto.FLOAT)
    int32 = make_model([cast, *pool], {"x": np.zeros((1, 3, 8, 8), np.int32)}, ["y"])
    feature_map = make_model([helper.make_node("Relu", ["x"], ["y"])], x, ["y"])  # (1, 3, 8, 8): no class scores
    paths = {"dynamic": folder / "dynamic.onnx", "int32": folder / "int32.onnx", "map": folder / "map.onnx"}
    onnx.save(dynamic, paths["dynamic"])
    onnx.save(int32, paths["int32"])
    onnx.save(feature_map, paths["map"])
    return paths


@pytest.mark.parametrize(
    "model, extra, message",
    [
        ("int32", [], "error: input 'x' is int32: eval classify takes a float image input"),
        ("dynamic", ["--size", "0x0"], "--size '0x0': give HxW"),
        ("dynamic", ["--size", "48x-1"], "--size '48x-1': give HxW"),
        ("dynamic", ["--size", "100000x100000"], "GiB limit"),
        ("static", ["--size", "64x64"], "H and W fixed at 16x16"),
        ("dynamic", ["--precision", "low,,"], "--precision 'low,,': an empty precision name"),
        ("map", [], "not a classifier's (N, classes) scores"),
    ],
)
def test_eval_classify_bad_model_or_size(pooled, classifier, model, extra, message, capsys):
    pytest.importorskip("onnxruntime")
    path = classifier if model == "static" else pooled[model]
    assert main(["eval", "classify", str(path), "--count", "2", "--plot", "", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_eval_plot_checked_up_front(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for plot, message in [(str(tmp_path), "a folder"), (str(tmp_path / "plot.jpg"), "ending in .png")]:
        assert main(["eval", "ocr", "--lines", "1", "--plot", plot]) == 2
        assert message in capsys.readouterr().err


def test_precision_column_is_the_storage_precision():
    from mnnpy.tools.evaluate import precision_label

    assert [precision_label("cpu", p) for p in ("high", "normal", "low")] == ["fp32"] * 3
    assert precision_label("onnxruntime", "fp32") == "fp32"
    assert [precision_label("vulkan", p) for p in ("high", "normal", "low")] == ["fp32/high", "fp32/normal", "fp16/low"]


def test_eval_ocr_counts_a_failed_run_and_goes_on(monkeypatch):
    """A line whose run raises a MnnpyError (a device time-out, say) counts as read as
    nothing and is listed; the other lines are still read."""
    from mnnpy.apps import ocr
    from mnnpy.errors import MnnpyError

    dataset = make_dataset(3, 0, eval_ocr.find_fonts())
    real, calls = ocr.read_text, []

    def flaky(*a, **k):
        calls.append(1)
        if len(calls) == 2:  # the first line after the warm-up
            raise MnnpyError("a submission did not finish in time")
        return real(*a, **k)

    monkeypatch.setattr(ocr, "read_text", flaky)
    r = eval_ocr.evaluate(dataset, "cpu", "normal", None)
    assert len(calls) == 4 and r["lines"] == 3
    assert r["failed"] == [(dataset[0][1], "MnnpyError: a submission did not finish in time")]
    assert r["accuracy"] <= 100 * 2 / 3 and r["cer"] > 0

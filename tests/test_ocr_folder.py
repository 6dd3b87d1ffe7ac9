"""``mnnpy ocr DIR --out FILE`` here (one process, spawned workers), on lines that
``mnnpy eval ocr --save-images`` generates: one sorted result per image, errors per image,
the same bytes whichever way it ran, bad options. The Ray runs: tests/test_ray.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mnnpy.cli import main
from mnnpy.tools.eval_ocr import find_fonts, make_dataset

LINES = 6


@pytest.fixture(scope="module")
def lines_dir(tmp_path_factory):
    """``LINES`` generated lines (seed 3) as PNG files, and a broken one, in a folder."""
    folder = tmp_path_factory.mktemp("lines")
    assert main(["eval", "ocr", "--lines", str(LINES), "--seed", "3", "--save-images", str(folder)]) == 0
    return folder


def _read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_save_images_writes_the_dataset(lines_dir):
    texts = _read(lines_dir / "texts.jsonl")
    want = make_dataset(LINES, 3, find_fonts())
    assert [t["path"] for t in texts] == [f"line_{i:04d}.png" for i in range(LINES)]
    assert [t["text"] for t in texts] == [text for _, text, _ in want]
    for t, (img, _, _) in zip(texts, want):
        assert np.array_equal(np.asarray(Image.open(lines_dir / t["path"])), img)  # PNG: lossless


def test_ocr_folder_here_one_sorted_line_per_image(lines_dir, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out)]) == 0
    assert "6 images in" in capsys.readouterr().out
    got = _read(out)
    truth = {t["path"]: t["text"] for t in _read(lines_dir / "texts.jsonl")}
    assert [g["path"] for g in got] == sorted(truth)
    assert all(g["error"] is None and list(g) == ["path", "text", "lines", "error"] for g in got)
    exact = sum(" ".join(g["text"].split()) == truth[g["path"]] for g in got)
    assert exact >= LINES - 1, [(g["text"], truth[g["path"]]) for g in got]
    line = got[0]["lines"][0]
    assert 0 < line["score"] <= 1 and len(line["box"]) == 4 and line["text"] in got[0]["text"]


def test_spawned_workers_and_parquet_give_the_same_results(lines_dir, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow.parquet")
    one, two, table = tmp_path / "1.jsonl", tmp_path / "2.jsonl", tmp_path / "2.parquet"
    assert main(["ocr", str(lines_dir), "--out", str(one), "--batch-size", "2"]) == 0
    assert main(["ocr", str(lines_dir), "--out", str(two), "--workers", "1024", "--batch-size", "3"]) == 0
    assert "here, 2 process(es)" in capsys.readouterr().out  # 2 batches: 2 of the 1024 started
    assert one.read_bytes() == two.read_bytes()
    assert main(["ocr", str(lines_dir), "--out", str(table)]) == 0
    rows = pa.read_table(table).to_pylist()
    assert str(pa.read_schema(table).field("error").type) == "string"  # a string column, though no image failed
    assert [r["path"] for r in rows] == [g["path"] for g in _read(one)]
    assert [json.loads(r["lines"]) for r in rows] == [g["lines"] for g in _read(one)]


def test_a_broken_image_is_reported_in_its_line(lines_dir, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.png").write_bytes((lines_dir / "line_0000.png").read_bytes())
    (folder / "b.png").write_bytes(b"not a png")
    out = tmp_path / "r.jsonl"
    assert main(["ocr", str(folder), "--out", str(out)]) == 1  # 1: an image failed
    a, b = _read(out)
    assert a["error"] is None and a["text"]
    assert b["path"] == "b.png" and b["text"] == "" and b["error"].startswith("InputError: cannot read image")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["{missing}", "--out", "{out}"], "no such folder"),
        (["{dir}", "--out", "{dir}/r.txt"], "give a .jsonl or .parquet"),
        (["{dir}", "--out", "{out}", "--workers", "0"], "--workers must be"),
        (["{dir}", "--out", "{out}", "--threads", "0"], "--threads must be"),
        (["{empty}", "--out", "{out}"], "no input files"),
        (["{dir}", "--out", "{missing}/r.jsonl"], "no folder"),  # checked before any work
        (["{dir}", "--out", "{dirout}"], "a folder; give a file name"),
        (["{dir}", "--out", "{out}", "--ray-address", ""], "--ray-address is empty"),
    ],
)
def test_bad_options_exit_2(lines_dir, tmp_path, capsys, argv, words):
    (tmp_path / "empty").mkdir()
    (tmp_path / "d.jsonl").mkdir()
    names = {"missing": tmp_path / "none", "out": tmp_path / "r.jsonl", "dir": lines_dir, "empty": tmp_path / "empty"}
    names["dirout"] = tmp_path / "d.jsonl"
    assert main(["ocr", *(a.format(**names) for a in argv)]) == 2
    assert words in capsys.readouterr().err


def test_workers_the_memory_cannot_hold_are_refused_before_any_work(lines_dir, tmp_path, capsys, monkeypatch):
    from mnnpy.apps import folder_cli

    monkeypatch.setattr(folder_cli, "available_bytes", lambda: 3 * folder_cli.PROCESS_BYTES)
    out = tmp_path / "r.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out), "--workers", "4", "--batch-size", "1"]) == 2
    err = capsys.readouterr().err
    assert "error: --workers 4: 4 x worker process of about 90 MiB need" in err and "give at most 3" in err
    assert not out.exists()
    # 6 images in batches of 2 start 3 workers only: they fit
    assert main(["ocr", str(lines_dir), "--out", str(out), "--workers", "4", "--batch-size", "2"]) == 0


def test_an_unavailable_backend_is_one_error_line_before_workers_start(lines_dir, tmp_path, capfd):
    out = tmp_path / "r.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out), "--workers", "2", "--backend", "vulkan:99"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: backend 'vulkan:99' is unavailable") and err.count("\n") == 1, err
    assert not out.exists()


def test_ray_missing_is_an_input_error(lines_dir, tmp_path, capsys, monkeypatch):
    import sys

    import mnnpy

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is not installed
    monkeypatch.delitem(sys.modules, "mnnpy.ray", raising=False)
    monkeypatch.delattr(mnnpy, "ray", raising=False)
    assert main(["ocr", str(lines_dir), "--out", str(tmp_path / "r.jsonl"), "--ray"]) == 2
    assert "pip install 'mnnpy[ray]'" in capsys.readouterr().err


@pytest.mark.parametrize("odd", ["pipe", "dangling", "undecodable"])
def test_inputs_that_cannot_be_read_as_files_stop_the_job_before_any_work(lines_dir, tmp_path, capsys, odd):
    import os

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.png").write_bytes((lines_dir / "line_0000.png").read_bytes())
    if odd == "pipe":
        os.mkfifo(folder / "p.png")  # opening it would block the job
        words = "not regular files: 'p.png'"
    elif odd == "dangling":
        (folder / "d.png").symlink_to(tmp_path / "nowhere.png")
        words = "not regular files: 'd.png'"
    else:
        (folder / os.fsdecode(b"x\xff.png")).write_bytes(b"")
        words = "file names that are not UTF-8"
    assert main(["ocr", str(folder), "--out", str(tmp_path / "r.parquet")]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "r.parquet").exists()


def test_symlinked_files_are_read_and_symlinked_folders_are_not_followed(lines_dir, tmp_path):
    from mnnpy.apps.folder_job import list_inputs

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "link.png").symlink_to(lines_dir / "line_0000.png")
    (tmp_path / "in" / "sub").symlink_to(lines_dir, target_is_directory=True)
    assert list_inputs(tmp_path / "in", (".png",)) == ["link.png"]


def test_ctrl_c_is_a_message_and_status_130(capsys):
    from mnnpy.cli import guarded

    def interrupted():
        raise KeyboardInterrupt

    assert guarded(interrupted) == 130
    assert capsys.readouterr().err == "interrupted\n"

"""Files mnnpy writes and reads (``mnnpy/files.py``): a model file rewritten by ``mnnpy
convert``, ``converter.convert(..., output)`` or ``model_file.save`` while a session has it
loaded (memory-mapped) leaves that session running on the old model, in a child process that
would otherwise die of SIGBUS; replaced files keep their mode and links; a named pipe or a
device where a model is expected is refused at once. The GPU caches' named-pipe cases are in
tests/test_gpu_cache.py and tests/test_opencl_tuning.py."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import helper, numpy_helper

import mnnpy
from mnnpy import files, model_file, models
from mnnpy.converter import convert, to_net
from tests.fifo import within

ROOT = Path(__file__).resolve().parent.parent
N = 1 << 18  # elements of the large constant: 1 MiB, mapped pages the rewrites would truncate


def _add_model(c: np.ndarray) -> bytes:
    """``y = x + c`` (``x``: (N,) float32) with ``c`` a constant."""
    x = helper.make_tensor_value_info("x", 1, [N])
    y = helper.make_tensor_value_info("y", 1, [N])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "add", [x], [y], [numpy_helper.from_array(c, "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import mnnpy
    from mnnpy import cli, model_file
    from mnnpy.converter import convert, to_net

    path, same, small = sys.argv[1:4]
    session = mnnpy.Interpreter(path).create_session(backend="cpu")
    x = np.linspace(-1, 1, {n}, dtype=np.float32)
    before = session.run({{"x": x}})["y"].copy()
    rewrites = {{
        "converter.convert onto the file": lambda: convert(same, path),
        "mnnpy convert onto the file": lambda: cli.main(["convert", small, path]),
        "model_file.save onto the file": lambda: model_file.save(to_net(same), path),
    }}
    for what, rewrite in rewrites.items():
        rewrite()
        after = session.run({{"x": x}})["y"]
        if not np.array_equal(before, after):
            sys.exit(f"after {{what}}: the live session's outputs changed")
        fresh = mnnpy.Interpreter(path).create_session(backend="cpu").run({{"x": x}})["y"]
        if np.array_equal(fresh, before):
            sys.exit(f"after {{what}}: the file was not rewritten")
    print("ok")
    """
).format(n=N)


def test_live_session_survives_rewrites_of_its_file(tmp_path, rng):
    """Defect 1 of issue 12: rewriting in place truncated the pages the session had mapped."""
    big = rng.standard_normal(N).astype(np.float32)
    path = tmp_path / "model.mnnpy"
    convert(_add_model(big), path)
    same = tmp_path / "same.onnx"  # another constant of the same size: in place, outputs would change
    same.write_bytes(_add_model(big + 1))
    small = tmp_path / "small.onnx"  # a smaller file: in place, the old pages past its end would be gone
    small.write_bytes(_add_model(np.float32(2.0)))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(same), str(small)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    if proc.returncode < 0:
        pytest.fail(f"the child died of {signal.Signals(-proc.returncode).name}: {proc.stderr[-2000:]}")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "ok", proc.stderr[-2000:]


def test_atomic_write_modes_and_links(tmp_path):
    old = os.umask(0o027)
    try:
        new = tmp_path / "new.mnnpy"
        files.atomic_write(new, b"a", private=False)
        assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0o666 less the umask, as open() gives
        new.chmod(0o604)
        files.atomic_write(new, b"bb", private=False)
        assert stat.S_IMODE(new.stat().st_mode) == 0o604 and new.read_bytes() == b"bb"
        cache = tmp_path / "entry"
        files.atomic_write(cache, b"c")
        assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    finally:
        os.umask(old)
    link = tmp_path / "link.mnnpy"
    link.symlink_to(new)
    files.atomic_write(link, b"ccc", private=False)
    assert link.is_symlink() and new.read_bytes() == b"ccc"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry", "link.mnnpy", "new.mnnpy"]  # no temporary left


def test_a_cache_write_replaces_a_link_not_its_target(tmp_path):
    """A cache's file that is a symbolic link (someone with write access to the cache folder
    planted it) is replaced as a link: its target, a user's file or a device, is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine")
    victim.chmod(0o644)
    entry = tmp_path / "cache" / "entry.bin"
    entry.parent.mkdir()
    entry.symlink_to(victim)
    files.atomic_write(entry, b"cache bytes")
    assert victim.read_bytes() == b"mine" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not entry.is_symlink() and entry.read_bytes() == b"cache bytes"
    dangling = tmp_path / "cache" / "other.bin"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    files.atomic_write(dangling, b"y")
    assert dangling.read_bytes() == b"y" and not (tmp_path / "nowhere").exists()


def test_atomic_write_failure_leaves_target(tmp_path, monkeypatch):
    target = tmp_path / "m.mnnpy"
    target.write_bytes(b"old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        files.atomic_write(target, b"new", private=False)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["m.mnnpy"]


def test_convert_to_a_device_writes_into_it(tmp_path):
    data = convert(_add_model(np.float32(1.0)), os.devnull)
    assert data and Path(os.devnull).exists() and not Path(os.devnull).is_file()


def test_model_path_that_is_a_named_pipe_is_refused(tmp_path):
    fifo = tmp_path / "model.mnnpy"
    os.mkfifo(fifo)
    with pytest.raises(mnnpy.ModelFormatError, match="named pipe"):
        within(20, lambda: mnnpy.Interpreter(str(fifo)), fifo)
    with pytest.raises(mnnpy.ModelFormatError, match="character device"):
        mnnpy.Interpreter("/dev/zero")
    with pytest.raises(mnnpy.ModelFormatError, match="folder"):
        model_file.load(tmp_path)


def test_cached_conversion_that_is_a_named_pipe_is_redone(tmp_path):
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(_add_model(np.float32(3.0)))
    first = models.converted_path(onnx_path)
    first.unlink()
    os.mkfifo(first)
    again = within(60, lambda: models.converted_path(onnx_path), first)
    assert again == first and again.is_file() and mnnpy.Interpreter(str(again)).inputs
    assert to_net(str(onnx_path)).graphs


def test_the_apps_refuse_named_pipes(tmp_path):
    """A named pipe given as a WAV file, an image or the schedule's ``--dot`` output: an error
    at once, never a read or a write blocked on the other end."""
    from mnnpy.apps import ocr, vad
    from mnnpy.cli import main

    wav, png, dot = tmp_path / "speech.wav", tmp_path / "line.png", tmp_path / "schedule.dot"
    for p in (wav, png, dot):
        os.mkfifo(p)
    with pytest.raises(mnnpy.InputError, match="named pipe"):
        within(20, lambda: vad.read_wav(wav), wav)
    with pytest.raises(mnnpy.InputError, match="named pipe"):
        within(20, lambda: ocr.load_image(png), png)
    model = tmp_path / "m.mnnpy"
    model.write_bytes(convert(_add_model(np.float32(1.0))))
    assert within(20, lambda: main(["info", "--dot", str(dot), str(model)]), dot) == 2
    assert stat.S_ISFIFO(os.stat(dot).st_mode)  # left as it is

"""The compilation cache (``mnnpy.compilation_cache``, ``create_session(cache_dir=...)``):
a warm session loads the Winograd weights of a two-Conv model instead of transforming them,
and its plan (``mnnpy.plan_cache``) instead of computing it; every tampering NNAPI's
compilation caching must survive is rejected with a warning and rebuilt, outputs equal to a
cache-less session's: bytes flipped at every 1/64 of each file, truncation, files swapped
between tokens, another model's entry under this token, the mapping edited, another
environment, a file changed between its hash and its use (the test hook). Also bad options,
LRU eviction, concurrent writers and ``mnnpy cache``."""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import compilation_cache as cc
from mnnpy.cache_file import pack, unpack
from mnnpy.cli import main as cli
from mnnpy.converter import convert
from tests.backend_compare import conv_model, he_weights

PADS = {"pads": [1, 1, 1, 1]}
ENTRIES = 3  # per session of a model: the two Convs' Winograd weights and the plan of its static input shape


def model(seed: int) -> tuple[bytes, dict]:
    """Two 3x3 stride-1 Convs of 8 channels on 12x12 maps (both take Winograd F(2x2))."""
    rng = np.random.default_rng(seed)
    m, feeds = conv_model(rng, (1, 8, 12, 12), (8, 8, 3, 3), PADS, after=[("Conv", PADS, [he_weights(rng, 8, 8, 3, 3)])])
    return convert(m), feeds


@pytest.fixture(scope="module")
def models():
    """``{name: (Interpreter, feeds, cache-less outputs)}`` for models "a" and "b"."""
    out = {}
    for name, seed in (("a", 1), ("b", 2)):
        data, feeds = model(seed)
        interp = mnnpy.Interpreter(data)
        out[name] = interp, feeds, interp.create_session(num_threads=1).run(feeds)
    return out


def session_run(models, name, folder, token=None, expect_warning=False):
    """Outputs, hits and misses of a session of model ``name`` on ``folder``, checked against
    the cache-less outputs; ``expect_warning``: a ``RuntimeWarning`` saying it was rejected."""
    interp, feeds, want = models[name]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        s = interp.create_session(num_threads=1, cache_dir=folder, cache_token=token)
        got = s.run(feeds)
    rejected = [w for w in seen if "rejected" in str(w.message)]
    assert bool(rejected) == expect_warning, [str(w.message) for w in seen]
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    cache = s.backends[0].config.cache
    s.close()
    return cache.hits, cache.misses


def entry_files(folder: Path) -> list[Path]:
    return sorted((folder / "entries").glob("*/*"))


def test_warm_session_loads_what_the_cold_one_saved(models, tmp_path):
    assert session_run(models, "a", tmp_path) == (0, ENTRIES)
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)
    assert len(entry_files(tmp_path)) == ENTRIES
    token = models["a"][0].model_token()
    assert set(cc.read_mapping(tmp_path)) == {token} and token == hashlib.sha256(model(1)[0]).hexdigest()


def test_entries_are_read_once_ahead_or_when_asked_and_still_checked(models, tmp_path, monkeypatch):
    """A warm session's entries come from the read-ahead thread (``mnnpy.cache_read_ahead``),
    or, where the session asks for one the thread has not reached, from the session's own
    thread (the read-ahead then skips it): each entry is read once, and what was read is
    checked against the mapping as before (a damaged file is rejected and rebuilt)."""
    from mnnpy import cache_read_ahead

    session_run(models, "a", tmp_path)
    reads = []
    for module in (cc, cache_read_ahead):
        monkeypatch.setattr(
            module, "read_limited", lambda path, *a, _read=module.read_limited: reads.append(Path(path)) or _read(path, *a)
        )
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)
    entries = [p for p in reads if "entries" in p.parts]
    assert len(entries) == len(set(entries)) == ENTRIES
    victim = entry_files(tmp_path)[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x40
    victim.write_bytes(bytes(data))
    assert session_run(models, "a", tmp_path, expect_warning=True) == (ENTRIES - 1, 1)


def test_a_forked_child_reads_its_entries_itself(models, tmp_path, monkeypatch):
    """A process forked while the read-ahead thread is still reading takes nothing from it (the
    child has no such thread, so waiting for it would hang): it reads the entry itself."""
    import os

    from mnnpy import cache_read_ahead

    session_run(models, "a", tmp_path)
    token = models["a"][0].model_token()
    name, rec = next(iter(cc.read_mapping(tmp_path)[token].items()))
    monkeypatch.setattr(cache_read_ahead.ReadAhead, "_read", lambda self, chosen: threading.Event().wait(30))
    cache = cc.CompilationCache(tmp_path, token)  # its thread never finishes an entry
    pid = os.fork()
    if pid == 0:  # the child: exit 0 when it got the entry
        os._exit(0 if cache.load(name, rec["environment"].rsplit("; ", 1)[-1]) is not None else 1)
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        threading.Event().wait(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child waited for the parent's read-ahead thread")
    assert os.waitstatus_to_exitcode(status) == 0


def test_npy_view_reads_what_save_wrote_and_refuses_the_rest():
    import io

    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    good = buf.getvalue()
    view = cc.npy_view(good)
    np.testing.assert_array_equal(view, a)
    assert view.dtype == a.dtype and not view.flags.writeable
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(a[0]), allow_pickle=False)
    for bad in (good[:-4], good + b"\0" * 4, b"not an array" * 8, fortran.getvalue()):
        with pytest.raises(ValueError):
            cc.npy_view(bad)


def test_default_token_is_the_models_sha256_computed_on_a_thread(tmp_path, monkeypatch):
    from mnnpy import model_file

    monkeypatch.setattr(model_file.SourceDigest, "THREAD_BYTES", 0)  # every model's digest on a thread
    data, _ = model(3)
    path = tmp_path / "m.mnnpy"
    path.write_bytes(data)
    for source in (path, data):
        interp = mnnpy.Interpreter(source)
        assert interp.net.source_digest._thread is not None
        assert interp.model_token() == hashlib.sha256(data).hexdigest()


def damaged(good: bytes) -> list[bytes]:
    """``good`` with one byte flipped at every 1/64 of its length, then truncated three ways."""
    out = []
    for k in range(64):
        bad = bytearray(good)
        bad[k * len(good) // 64] ^= 0x5A
        out.append(bytes(bad))
    return out + [good[: len(good) // 2], good[:7], b""]


def test_flipped_bytes_and_truncation_are_rejected_and_rebuilt(models, tmp_path):
    session_run(models, "a", tmp_path)
    token = models["a"][0].model_token()
    names = {r["file"]: n for n, r in cc.read_mapping(tmp_path)[token].items()}
    for path in [*entry_files(tmp_path), tmp_path / "mapping"]:
        good = path.read_bytes()
        variants = damaged(good)
        for bad in variants:  # every variant through the store (fast) ...
            path.write_bytes(bad)
            with pytest.warns(RuntimeWarning, match="rejected"):
                cache = cc.CompilationCache(tmp_path, token)
                device = "plan" if names.get(path.name, "").startswith("plan/") else "cpu"
                assert path.name == "mapping" or cache.load(names[path.name], device) is None
            assert path.name != "mapping" or cache.records == {}
        for bad in (variants[32], variants[-2]):  # ... and two through a session: rebuilt, outputs equal
            path.write_bytes(bad)
            session_run(models, "a", tmp_path, expect_warning=True)
            path.write_bytes(good)
        assert session_run(models, "a", tmp_path) == (ENTRIES, 0)


def _retarget(folder: Path, token: str, name: str, file: str, sha: str) -> None:
    """Point entry ``name`` of ``token`` in the mapping at ``file`` with ``sha`` (a consistent edit)."""
    tokens = cc.read_mapping(folder)
    tokens[token][name].update(file=file, sha256=sha)
    (folder / "mapping").write_bytes(pack(cc.MAGIC_MAP, cc.FORMAT, "mapping", json.dumps(tokens).encode()))


def test_swapped_files_and_another_models_entry_are_rejected(models, tmp_path):
    ta, tb = "a" * 64, "b" * 64
    session_run(models, "a", tmp_path, ta)
    session_run(models, "b", tmp_path, tb)
    a_files, b_files = sorted((tmp_path / "entries" / ta).iterdir()), sorted((tmp_path / "entries" / tb).iterdir())
    a_bytes = [p.read_bytes() for p in a_files]
    for pa, pb in zip(a_files, b_files):  # files swapped between tokens
        pa.write_bytes(pb.read_bytes())
    session_run(models, "a", tmp_path, ta, expect_warning=True)
    for pa, data in zip(a_files, a_bytes):
        pa.write_bytes(data)
    # b's entry copied under a's token, the mapping edited to match its SHA-256: its key says token b
    name = next(iter(cc.read_mapping(tmp_path)[ta]))
    (tmp_path / "entries" / ta / b_files[0].name).write_bytes(b_files[0].read_bytes())
    _retarget(tmp_path, ta, name, b_files[0].name, b_files[0].name)
    session_run(models, "a", tmp_path, ta, expect_warning=True)
    # model b given model a's token: its weights differ, so its entries are other names (misses, no warning;
    # the plan's name holds a sample of every constant)
    assert session_run(models, "b", tmp_path, ta) == (0, ENTRIES)


@pytest.mark.parametrize(
    "field,value",
    [
        ("used", "yesterday"),
        ("used", float("nan")),
        ("used", True),
        ("size", -1),
        ("size", 1.5),
        ("sha256", 7),
        ("environment", None),
        (None, [1, 2]),
    ],
)
def test_a_mapping_with_ill_typed_records_is_rejected(models, tmp_path, capsys, field, value):
    """A mapping whose envelope is intact (magic, its own hash) but whose records are not what
    ``save`` writes: a RuntimeWarning and a rebuild, never a traceback; the CLI says it is damaged."""
    session_run(models, "a", tmp_path)
    token = models["a"][0].model_token()
    tokens = cc.read_mapping(tmp_path)
    name = next(iter(tokens[token]))
    if field is None:
        tokens[token][name] = value
    else:
        tokens[token][name][field] = value
    (tmp_path / "mapping").write_bytes(pack(cc.MAGIC_MAP, cc.FORMAT, "mapping", json.dumps(tokens).encode()))
    with pytest.raises(ValueError, match="malformed"):
        cc.read_mapping(tmp_path)
    assert cli(["cache", "list", "--dir", str(tmp_path)]) != 0
    assert "damaged" in capsys.readouterr().err
    session_run(models, "a", tmp_path, expect_warning=True)
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)


def test_edited_mapping_and_other_environment_are_rejected(models, tmp_path):
    session_run(models, "a", tmp_path)
    token = models["a"][0].model_token()
    name, rec = next(iter(cc.read_mapping(tmp_path)[token].items()))
    _retarget(tmp_path, token, name, rec["file"], "0" * 64)  # a SHA-256 that is not the file's
    session_run(models, "a", tmp_path, expect_warning=True)
    tokens = cc.read_mapping(tmp_path)
    tokens[token][name]["environment"] = "mnnpy 0.0.0; another driver"
    (tmp_path / "mapping").write_bytes(pack(cc.MAGIC_MAP, cc.FORMAT, "mapping", json.dumps(tokens).encode()))
    session_run(models, "a", tmp_path, expect_warning=True)
    tokens[token][name]["file"] = "../../../etc/passwd"  # never a path outside the folder
    (tmp_path / "mapping").write_bytes(pack(cc.MAGIC_MAP, cc.FORMAT, "mapping", json.dumps(tokens).encode()))
    session_run(models, "a", tmp_path, expect_warning=True)
    data = (tmp_path / "mapping").read_bytes().replace(b'"size": ', b'"size": 1')  # edited without the hash
    (tmp_path / "mapping").write_bytes(data)
    session_run(models, "a", tmp_path, expect_warning=True)
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)


def test_a_file_changed_between_hash_and_use(models, tmp_path, monkeypatch):
    session_run(models, "a", tmp_path)
    changed = []

    def change(path, data):  # the bytes in memory were checked; the file changes under them
        path.write_bytes(data[:-4] + b"evil")
        changed.append(path)

    monkeypatch.setattr(cc, "after_verify", change)
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)  # used the verified bytes: outputs correct
    monkeypatch.setattr(cc, "after_verify", None)
    assert len(changed) == ENTRIES
    session_run(models, "a", tmp_path, expect_warning=True)  # the next session sees the change
    assert session_run(models, "a", tmp_path) == (ENTRIES, 0)


@pytest.mark.parametrize("token", ["abc", "g" * 64, b"x" * 31, 5])
def test_bad_tokens_and_folders(models, tmp_path, token):
    interp = models["a"][0]
    with pytest.raises(mnnpy.MnnpyError, match="cache_token"):
        interp.create_session(cache_dir=tmp_path, cache_token=token)
    with pytest.raises(mnnpy.MnnpyError, match="needs a cache_dir"):
        interp.create_session(cache_token="a" * 64)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(mnnpy.MnnpyError, match="cannot be used"):
        interp.create_session(cache_dir=tmp_path / "file" / "sub")
    assert cc.checked_token(b"\x01" * 32) == "01" * 32 and cc.checked_token("AB" * 32) == "ab" * 32


def test_least_recently_used_entries_are_evicted(tmp_path):
    cache = cc.CompilationCache(tmp_path, "c" * 64, max_bytes=3000)
    for i in range(5):
        cache.save(f"e{i}", "cpu", bytes([i]) * 1000)
        cache.records[f"e{i}"]["used"] = float(i)  # e0 the least recently used
    cache.flush()
    kept = cc.read_mapping(tmp_path)["c" * 64]
    assert sorted(kept) == ["e3", "e4"] and len(entry_files(tmp_path)) == 2


def test_concurrent_writers_keep_every_entry(tmp_path):
    def write(i):
        cache = cc.CompilationCache(tmp_path, f"{i:064x}")
        cache.save("w", "cpu", b"payload %d" % i)
        cache.flush()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tokens = cc.read_mapping(tmp_path)
    assert len(tokens) == 8
    for i in range(8):
        data = (tmp_path / "entries" / f"{i:064x}" / tokens[f"{i:064x}"]["w"]["file"]).read_bytes()
        assert unpack(data, cc.MAGIC_ENTRY, cc.FORMAT, f"{i:064x}/w") == b"payload %d" % i


def test_cli_list_verify_clear(models, tmp_path, capsys):
    session_run(models, "a", tmp_path)
    assert cli(["cache", "list", "--dir", str(tmp_path)]) == 0
    assert f"{ENTRIES} entries" in capsys.readouterr().out
    assert cli(["cache", "verify", "--dir", str(tmp_path)]) == 0
    path = entry_files(tmp_path)[0]
    path.write_bytes(path.read_bytes()[:-1])
    assert cli(["cache", "verify", "--dir", str(tmp_path)]) == 1
    assert "1 bad entries" in capsys.readouterr().out
    assert cli(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert entry_files(tmp_path) == [] and cc.read_mapping(tmp_path) == {}
    capsys.readouterr()
    assert cli(["cache", "list", "--dir", str(tmp_path)]) == 0
    assert "no entries" in capsys.readouterr().out


def test_an_entry_is_saved_after_the_folder_was_cleared_under_it(tmp_path, capsys):
    """``mnnpy cache clear`` from another process while a session's cache is open removes the
    entries folder: the next save makes it again (a newcomer's concurrent clear lost every
    later entry of the process with a warning)."""
    cache = cc.CompilationCache(tmp_path, "d" * 64)
    cache.save("a", "cpu", b"first")
    cache.flush()
    assert cli(["cache", "clear", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.save("b", "cpu", b"second")
    cache.flush()
    assert cc.CompilationCache(tmp_path, "d" * 64).load("b", "cpu") == b"second"


def test_cache_dir_and_cli_refuse_what_is_not_a_cache(tmp_path, capsys):
    """A cache_dir that is not a path, or empty, is an InputError (not the working folder);
    ``mnnpy cache`` on a file or an ordinary folder says it is not a cache and removes nothing."""
    from mnnpy.cli import main as cli
    from mnnpy.compilation_cache import CompilationCache
    from mnnpy.errors import InputError

    for bad in (3, "", None):
        with pytest.raises(InputError, match="cache_dir must be"):
            CompilationCache(bad, "ab" * 32)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("keep")
    afile = tmp_path / "afile"
    afile.write_text("hi")
    for where in (plain, afile, tmp_path / "missing"):
        for action in ("list", "verify", "clear"):
            assert cli(["cache", action, "--dir", str(where)]) == 2
            assert "not a compilation cache folder" in capsys.readouterr().err
    assert (plain / "keep.txt").read_text() == "keep" and afile.read_text() == "hi"


def test_a_nul_in_cache_dir_and_a_clear_the_file_system_refuses(tmp_path, monkeypatch, capsys):
    """Newcomer findings: a NUL character in ``cache_dir`` was a plain ``ValueError``; ``mnnpy
    cache clear`` on a folder it cannot write (read-only) ended in a ``PermissionError`` traceback."""
    from mnnpy.errors import InputError
    from mnnpy.tools import cache as cache_tool

    with pytest.raises(InputError, match="NUL"):
        cc.CompilationCache(str(tmp_path) + "/x\x00y", "ab" * 32)
    cc.CompilationCache(tmp_path, "ab" * 32)

    def refused(folder):
        raise PermissionError(13, "Permission denied", str(folder / "lock"))

    monkeypatch.setattr(cache_tool, "locked", refused)
    assert cli(["cache", "clear", "--dir", str(tmp_path)]) == 2
    assert "cannot clear" in capsys.readouterr().err and (tmp_path / "lock").is_file()

"""The default token guessed from the model file (``mnnpy.cache_sources``): a warm session is
planned under the token recorded for the same file while the model's SHA-256 still runs,
writes nothing under it, and plans again under the hash when the guess was wrong (a sources
file pointing at another model's token must not make it use that model's weights or plan).
The hash is made to look unfinished (``SourceDigest.done``) so that the guess is taken
whatever the machine's speed."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import cache_sources
from mnnpy import compilation_cache as cc
from mnnpy.cache_file import pack
from mnnpy.converter import convert
from mnnpy.model_file import SourceDigest
from tests.backend_compare import conv_model, he_weights

PADS = {"pads": [1, 1, 1, 1]}


def model_file(folder: Path, name: str, seed: int, convs: int) -> tuple[Path, dict, dict]:
    """``(path, feeds, cache-less outputs)`` of ``convs`` 3x3 Convs of 8 channels (Winograd)."""
    rng = np.random.default_rng(seed)
    after = [("Conv", PADS, [he_weights(rng, 8, 8, 3, 3)]) for _ in range(convs - 1)]
    m, feeds = conv_model(rng, (1, 8, 12, 12), (8, 8, 3, 3), PADS, after=after)
    path = folder / f"{name}.mnnpy"
    path.write_bytes(convert(m))
    return path, feeds, mnnpy.Interpreter(path).create_session(num_threads=1).run(feeds)


@pytest.fixture
def unfinished_hash(monkeypatch):
    """Every model's SHA-256 looks unfinished when the cache is opened (the guess is taken)."""
    monkeypatch.setattr(SourceDigest, "done", lambda self: False)


def run_once(path: Path, feeds: dict, want: dict, folder: Path):
    """The cache of a session of ``path`` on ``folder`` after a run whose outputs equal ``want``."""
    interp = mnnpy.Interpreter(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no entry may be rejected: a wrong guess is not damage
        s = interp.create_session(num_threads=1, cache_dir=folder)
        got = s.run(feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    cache = s.backends[0].config.cache
    s.close()
    return interp, cache


def spy_for_model(monkeypatch) -> list:
    """The caches ``CompilationCache.for_model`` opens from now on, in order."""
    opened, real = [], cc.CompilationCache.for_model.__func__
    monkeypatch.setattr(cc.CompilationCache, "for_model", classmethod(lambda cls, *a: opened.append(c := real(cls, *a)) or c))
    return opened


def test_a_warm_session_starts_under_the_recorded_token(tmp_path, unfinished_hash, monkeypatch):
    path, feeds, want = model_file(tmp_path, "a", 1, 2)
    folder = tmp_path / "cache"
    interp, cold = run_once(path, feeds, want, folder)
    token = interp.model_token()
    assert cache_sources.read_sources(folder) == {interp.net.source_digest.key: token}  # recorded at the first flush
    guessed = spy_for_model(monkeypatch)
    interp, warm = run_once(path, feeds, want, folder)
    assert guessed == [warm] and warm.token == token and not warm.wrong and warm.hits == 3 and warm.misses == 0
    assert interp.model_token() == token


def test_nothing_is_written_under_a_guess_until_it_is_confirmed(tmp_path, unfinished_hash):
    path, feeds, want = model_file(tmp_path, "a", 1, 2)
    folder = tmp_path / "cache"
    interp = mnnpy.Interpreter(path)
    key = interp.net.source_digest.key
    other = "ab" * 32  # a token recorded for this file that is not its hash: nothing is in it
    folder.mkdir()
    with cc.locked(folder):
        cache_sources.remember(folder, key, other)
    cache = cc.CompilationCache.for_model(folder, interp.net.source_digest)
    assert cache.guessed and cache.token == other
    cache.flush()
    assert not (folder / "mapping").exists()  # a flush under a guess waits for the confirmation
    cache.save("x", "cpu", b"payload")  # confirms first: the guess was wrong, so nothing is written
    assert cache.wrong and not cache.guessed and not list((folder / "entries").glob("*/*"))
    assert cache.load("x", "cpu") is None
    assert not cache.settle() and cache.token == interp.model_token() and not cache.wrong  # the hash from now on
    cache.save("x", "cpu", b"payload")
    cache.flush()
    assert cache.load("x", "cpu") == b"payload" and list(cc.read_mapping(folder)) == [interp.model_token()]
    assert cache_sources.read_sources(folder) == {key: interp.model_token()}


@pytest.mark.parametrize("convs", [2, 3])  # the same graph (another's weights) and another graph (another's plan)
def test_a_wrong_guess_is_prepared_again_under_the_true_token(tmp_path, unfinished_hash, convs, monkeypatch):
    a, feeds_a, want_a = model_file(tmp_path, "a", 1, 2)
    b, feeds_b, want_b = model_file(tmp_path, "b", 2, convs)
    folder = tmp_path / "cache"
    interp_a, _ = run_once(a, feeds_a, want_a, folder)
    interp_b, _ = run_once(b, feeds_b, want_b, folder)
    mapping = cc.read_mapping(folder)
    key_b = interp_b.net.source_digest.key
    with cc.locked(folder):
        cache_sources.remember(folder, key_b, interp_a.model_token())  # b's file now points at a's entries
    opened, settled = spy_for_model(monkeypatch), []
    real_settle = cc.CompilationCache.settle
    monkeypatch.setattr(cc.CompilationCache, "settle", lambda c: settled.append((c.token, r := real_settle(c))) or r)
    interp_b2, cache = run_once(b, feeds_b, want_b, folder)  # outputs b's, not a's
    assert opened == [cache] and settled[0] == (interp_a.model_token(), False)  # the guess, thrown away after the first plan
    assert cache.token == interp_b.model_token() and cache.hits == convs + 1 and not cache.wrong
    assert cc.read_mapping(folder)[interp_a.model_token()].keys() == mapping[interp_a.model_token()].keys()
    assert cache_sources.read_sources(folder)[key_b] == interp_b.model_token()  # the record is corrected


@pytest.mark.parametrize("content", [b"", b"junk", pack(b"MNNPYSRC", 1, "sources", b"[1, 2]"), "damaged"])
def test_a_damaged_sources_file_is_no_guess(tmp_path, unfinished_hash, content):
    path, feeds, want = model_file(tmp_path, "a", 1, 2)
    folder = tmp_path / "cache"
    run_once(path, feeds, want, folder)
    good = (folder / "sources").read_bytes()
    (folder / "sources").write_bytes(good[:-3] + b"xyz" if content == "damaged" else content)
    assert cache_sources.read_sources(folder) == {}
    interp, cache = run_once(path, feeds, want, folder)
    assert cache.hits == 3 and not cache.wrong
    assert cache_sources.read_sources(folder) == {interp.net.source_digest.key: interp.model_token()}


def test_the_sources_file_keeps_the_newest_files(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_sources, "LIMIT", 3)
    for i in range(5):
        cache_sources.remember(tmp_path, f"k{i}", f"{i:064x}")
    assert list(cache_sources.read_sources(tmp_path)) == ["k2", "k3", "k4"]
    inode = (tmp_path / "sources").stat().st_ino
    cache_sources.remember(tmp_path, "k2", f"{2:064x}")  # recorded already: the file is not replaced
    assert (tmp_path / "sources").stat().st_ino == inode
    cache_sources.remember(tmp_path, "k2", f"{7:064x}")  # another token: k2 becomes the newest
    assert cache_sources.read_sources(tmp_path) == {"k3": f"{3:064x}", "k4": f"{4:064x}", "k2": f"{7:064x}"}


def test_model_bytes_have_no_key_and_no_guess(tmp_path, unfinished_hash):
    path, feeds, want = model_file(tmp_path, "a", 1, 2)
    interp = mnnpy.Interpreter(path.read_bytes())
    assert interp.net.source_digest.key is None
    cache = cc.CompilationCache.for_model(tmp_path / "cache", interp.net.source_digest)
    assert not cache.guessed and cache.token == interp.model_token()


def test_cache_clear_forgets_the_sources(tmp_path, capsys):
    from mnnpy.cli import main as cli

    path, feeds, want = model_file(tmp_path, "a", 1, 2)
    folder = tmp_path / "cache"
    run_once(path, feeds, want, folder)
    assert (folder / "sources").is_file()
    assert cli(["cache", "clear", "--dir", str(folder)]) == 0
    assert not (folder / "sources").exists() and cache_sources.read_sources(folder) == {}

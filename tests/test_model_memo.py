"""A model read before in the process is rebuilt from its skeleton (``mnnpy.model_memo``).

The rebuilt ``Net`` must equal a fresh read of the same bytes, share no object with the
first one, view its constants in the new bytes, and never stand in for different bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

import mnnpy
from mnnpy import model_file, model_memo
from mnnpy.model_reader import ModelReader
from tests.test_model_format import small_net


@pytest.fixture(autouse=True)
def _empty_memo():
    model_memo.clear()
    yield
    model_memo.clear()


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """One entry per ``ModelReader.read`` call."""
    calls: list[int] = []
    real = ModelReader.read

    def counting(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(ModelReader, "read", counting)
    return calls


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _inside(a: np.ndarray, buf) -> bool:
    start = _address(np.frombuffer(buf, np.uint8))
    return start <= _address(a) and _address(a) + a.nbytes <= start + len(buf)


def test_a_third_load_is_rebuilt_equal_and_unshared(reads):
    data = model_file.serialize(small_net())
    first = model_file.load(data)
    assert not model_memo._entries  # a model read once costs no skeleton
    model_file.load(data)  # read again: now its skeleton is made
    second = model_file.load(bytearray(data))  # a mutable buffer: copied, so new bytes at a new address
    assert len(reads) == 2  # the third came from the skeleton
    g1, g2 = first.main, second.main
    assert g1.ops == g2.ops and g1.inputs == g2.inputs and g1.outputs == g2.outputs
    assert (second.metadata, second.producer_name, second.producer_version) == (first.metadata, "tests", "9.9")
    for a, b in zip(g1.tensors, g2.tensors):
        assert (a.name, a.shape, a.kind) == (b.name, b.shape, b.kind)
        assert a.dtype is b.dtype  # NumPy's canonical dtype objects, as the reader gives
        if a.data is not None:
            assert np.array_equal(a.data, b.data) and not b.data.flags.writeable
            assert _inside(b.data, second.source) and not _inside(b.data, first.source)
    # nothing shared: changing one Net leaves the other alone
    assert g1.ops[0] is not g2.ops[0] and g1.ops[0].resolved is not g2.ops[0].resolved
    g2.ops[0].inputs.append(4)
    g2.tensors[0].shape = (1,)
    assert g1.ops[0].inputs == [0, 0] and g1.tensors[0].shape == ("batch", 3, None)
    assert model_file.load(data).main.ops[0].inputs == [0, 0]


def test_different_bytes_of_the_same_length_are_read(reads):
    data = model_file.serialize(small_net())
    first = model_file.load(data)
    model_file.load(data)  # its skeleton made
    w = first.main.tensors[1].data
    at = _address(w) - _address(np.frombuffer(first.source, np.uint8))
    changed = bytearray(data)
    changed[at : at + 4] = np.float32(123.5).tobytes()  # W[0, 0], same length
    second = model_file.load(bytes(changed))
    assert len(reads) == 3
    assert second.main.tensors[1].data[0, 0] == np.float32(123.5) and w[0, 0] == 0
    renamed = bytearray(data)
    at = bytes(data).index(b"relu")
    renamed[at : at + 4] = b"RELU"  # the op's name, same length
    assert model_file.load(bytes(renamed)).main.ops[1].name == "RELU"
    assert len(reads) == 4


def test_a_model_that_failed_is_never_kept(reads):
    data = bytearray(model_file.serialize(small_net()))
    data[4:8] = b"XXXX"
    for _ in range(2):
        with pytest.raises(mnnpy.ModelFormatError, match="identifier"):
            model_file.load(bytes(data))
    assert len(reads) == 2


def test_a_file_after_its_bytes_views_the_mapping(tmp_path, reads):
    path = tmp_path / "m.mnnpy"
    model_file.save(small_net(), path)
    model_file.load(path.read_bytes())
    model_file.load(path.read_bytes())
    net = model_file.load(path)
    assert len(reads) == 2
    assert _inside(net.main.tensors[1].data, net.source)
    s = mnnpy.Interpreter(path).create_session()
    x = np.ones((2, 3, 4), np.float32)
    assert s.run({"x": x})["y"].shape == (2, 3, 4)


def test_turned_off_reads_every_time(monkeypatch, reads):
    monkeypatch.setenv(model_memo.ENV, "0")
    data = model_file.serialize(small_net())
    model_file.load(data)
    model_file.load(data)
    assert len(reads) == 2


def test_least_recently_used_is_dropped(monkeypatch, reads):
    monkeypatch.setattr(model_memo, "MAX_ENTRIES", 2)
    models = []
    for k in range(3):
        net = small_net()
        net.metadata["k"] = str(k)  # different bytes (and lengths alike)
        models.append(model_file.serialize(net))
    model_file.load(models[0])
    model_file.load(models[0])  # a length read before: its skeleton is made
    model_file.load(models[1])  # the same length: read, its skeleton made
    model_file.load(models[1])
    assert len(reads) == 3 and len(model_memo._entries) == 2
    model_file.load(models[0])  # a hit: models[0] is now the most recent
    model_file.load(models[2])  # read, its skeleton made, models[1]'s dropped
    assert len(reads) == 4
    model_file.load(models[0])
    model_file.load(models[2])
    assert len(reads) == 4
    model_file.load(models[1])
    assert len(reads) == 5


def test_bytes_quicker_to_read_than_to_hash_are_read(reads):
    """ResNet-18's 46.8 MB take longer to hash than its few ops take to read: no skeleton."""
    data = model_file.serialize(small_net())
    model_file.load(data)
    second = model_file.load(data)  # its skeleton made, with this load's hash
    model_file.load(data)
    assert len(reads) == 2
    second.source_digest.seconds = 10.0  # that hash "took" longer than the read
    model_file.load(data)
    assert len(reads) == 3


def test_a_strided_memoryview_is_copied_and_read():
    data = model_file.serialize(small_net())
    doubled = bytearray(len(data) * 2)
    doubled[::2] = data
    net = model_file.load(memoryview(doubled)[::2])  # not contiguous: gathered once
    assert net.main.ops[1].name == "relu" and net.main.tensors[1].data.shape == (16, 3)

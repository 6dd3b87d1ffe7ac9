"""Capabilities (``device.capabilities()``, ``mnnpy devices --measure``): NNAPI's ``Capabilities``
relative to the CPU backend, measured on the tiny reference workloads (one timed run each) and
cached in a hash-checked file that is rejected, with a warning, when damaged, edited or
written by another mnnpy version."""

from __future__ import annotations

import math
import warnings

import pytest

import mnnpy
from mnnpy import cache_file
from mnnpy import capabilities as caps
from mnnpy.capability_workloads import WORKLOADS
from mnnpy.cli import main
from tests.backend_compare import gpu_backends


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One capabilities cache folder for the module (a GPU measured once serves the CLI test)."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("capabilities")
        mp.setenv(caps.CACHE_ENV, str(folder))
        yield folder


@pytest.fixture
def counted(monkeypatch, cache):
    """``caps.measure`` wrapped so that the test can count its calls."""
    calls = []
    real = caps.measure

    def measure(device, *args):
        calls.append(device.id)
        return real(device, *args)

    monkeypatch.setattr(caps, "measure", measure)
    for path in cache.glob("cpu-*"):
        path.unlink()
    return calls


def test_the_cpu_is_the_reference(counted):
    got = mnnpy.get_device("cpu").capabilities(scale="tiny", runs=1)
    assert [w.name for w in WORKLOADS] == list(got.performance)
    assert all(p == caps.PerformanceInfo(1.0, 1.0) for p in got.performance.values())
    assert got.if_performance.exec_time == got.while_performance.exec_time == 1.0
    assert set(got.operand_performance) == {"TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM", "TENSOR_INT32", "TENSOR_BOOL8"}
    assert got.relaxed_float32_to_float16_performance_scalar == got.relaxed_float32_to_float16_performance_tensor


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_gpu_gets_finite_positive_float32_values(backend, cache):
    got = caps.capabilities(backend, scale="tiny", runs=1)
    assert got.device == mnnpy.get_device(backend).id
    for name in ("float32", "relaxed", "int32", "bool", "if", "while"):
        perf = got.performance[name]
        assert 0 < perf.exec_time < math.inf and perf.power_usage == perf.exec_time, (name, perf)  # lavapipe, PoCL: type cpu
    quant = got.performance["quant8"]
    assert quant.exec_time < math.inf or "no " in got.reasons["quant8"]  # unsupported: inf, with the reason
    for value in (got.cpu_us_per_mflop, got.copy_latency_us, got.bandwidth):  # the cost model's constants
        assert value is not None and 0 < value < math.inf, got
    assert caps.capabilities(backend, scale="tiny") == got  # cached: the same values


def test_the_cache_file_is_reused(counted, cache):
    first = caps.capabilities("cpu", scale="tiny", runs=1)
    assert caps.capabilities("cpu:0", scale="tiny") == first and counted == ["cpu:0"]
    assert len(list(cache.glob("cpu-0-*-tiny.cap"))) == 1


def _rewritten(path, change) -> None:
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda d: d.__setitem__(-3, d[-3] ^ 0x20), "content hash mismatch"),  # a byte flipped in the values
        (lambda d: d.__setitem__(slice(-5, None), b"99999"), "content hash mismatch"),  # a value edited
        (lambda d: d.__delitem__(slice(-10, None)), "payload length"),  # truncated
        (lambda d: d.__setitem__(0, ord("X")), "bad magic"),
    ],
)
def test_a_damaged_or_edited_cache_file_is_measured_again(counted, cache, damage, why):
    first = caps.capabilities("cpu", scale="tiny", runs=1)
    (path,) = cache.glob("cpu-0-*-tiny.cap")
    _rewritten(path, damage)
    with pytest.warns(RuntimeWarning, match=f"rejected: {why}.*measuring the capabilities of cpu:0 again"):
        assert caps.capabilities("cpu", scale="tiny", runs=1) == first
    assert counted == ["cpu:0", "cpu:0"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file written again is valid
        caps.capabilities("cpu", scale="tiny")
    assert len(counted) == 2


def test_auto_says_when_it_leaves_out_a_damaged_cache_file(cache):
    """AUTO reads cached capabilities only (it never measures): a damaged file is a warning
    naming it, and the device is placed as one without figures."""
    from mnnpy.auto_devices import cached_capabilities

    caps.capabilities("cpu", scale="tiny", runs=1)
    (path,) = cache.glob("cpu-0-*-tiny.cap")
    _rewritten(path, lambda d: d.__setitem__(-3, d[-3] ^ 0x20))
    with pytest.warns(RuntimeWarning, match="capabilities of cpu:0: cache file .* rejected: content hash mismatch"):
        assert cached_capabilities(mnnpy.get_device("cpu")) == (None, "")


def test_another_mnnpy_version_is_measured_again(counted, cache):
    dev = mnnpy.get_device("cpu")
    old = caps.measure(dev, "tiny", 1)
    path = caps.cache_path(dev, "tiny")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cache_file.pack(caps.MAGIC, caps.FORMAT, caps._key(dev, "tiny", version="0.0.1"), old.to_json()))
    assert caps.load_cached(dev, "tiny")[0] is None
    with pytest.warns(RuntimeWarning, match=r"written for .*mnnpy 0\.0\.1"):
        caps.capabilities(dev, scale="tiny", runs=1)
    assert counted == ["cpu:0", "cpu:0"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"device": "metal:0"}, mnnpy.BackendUnavailableError, "unknown backend 'metal'"),
        ({"device": "cpu:5"}, mnnpy.BackendUnavailableError, "no cpu device 5"),
        ({"device": "cpu", "scale": "huge"}, mnnpy.InputError, "scale must be one of"),
        ({"device": "cpu", "runs": 0}, mnnpy.InputError, "runs must be an integer >= 1"),
    ],
)
def test_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        caps.capabilities(**kwargs)


def test_an_unavailable_device_entry_has_no_capabilities():
    entry = mnnpy.Device("fakegpu", "fakegpu", None, "other", "", "", "", reason="no driver")
    with pytest.raises(mnnpy.BackendUnavailableError, match="'fakegpu' is unavailable: no driver"):
        entry.capabilities()


def test_cli_measures_and_prints_the_table(cache, capsys):
    assert main(["devices", "--measure", "--scale", "tiny", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    for d in mnnpy.devices():
        assert f"capabilities of {d.id} (relative to the CPU backend; lower is better; tiny workloads)" in out
    assert "  float32 relaxed to float16" in out and "  While (Loop)" in out
    assert main(["devices", "--scale", "tiny"]) == 0  # cached ones, without --measure
    assert capsys.readouterr().out == out
    assert main(["devices"]) == 0  # no --scale: what AUTO uses, here the tiny figures (no full ones)
    assert capsys.readouterr().out == out
    assert main(["devices", "--scale", "full"]) == 0
    assert "capabilities: not measured (mnnpy devices --measure)" in capsys.readouterr().out
    assert main(["devices", "--runs", "0"]) == 2
    assert "error: --runs must be between 1 and 1000, got 0" in capsys.readouterr().err
    assert main(["devices", "--runs", "2"]) == 2  # --runs only with --measure
    assert "give it with --measure" in capsys.readouterr().err

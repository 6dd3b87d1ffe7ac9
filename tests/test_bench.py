"""Smoke test of ``bench/bench.py``: two runs per engine on the silero VAD model (the smallest),
checking the shape of the table it prints, never the speed. Engines that are not installed
are skipped with the reason; their rows must say so instead of failing."""

from __future__ import annotations

import importlib.util

import pytest

from tests.bench_module import load


def _bench():
    return load("bench.py", "bench_bench")


def _installed(engine: str) -> bool:
    return importlib.util.find_spec(_bench().IMPORT_NAME[engine]) is not None


@pytest.fixture(scope="module")
def silero_result():
    pytest.importorskip("onnxruntime", reason="onnxruntime is the reference engine of the benchmark")
    bench = _bench()
    data, feeds = bench.load_models(["silero_vad"])["silero_vad"]
    res = bench.bench_model(data, feeds, threads=1, runs=2, warmup=1, profile=True)
    return bench, feeds, res


@pytest.mark.parametrize("engine", ["onnxruntime", "mnnpy", "MNN", "OpenVINO"])
def test_engine_row(silero_result, engine):
    """Each engine gives one row of the table's width: numbers where it ran, the reason where not."""
    bench, feeds, res = silero_result
    rows = bench.table_rows("silero_vad", feeds, res)
    assert len(rows) == len(bench.ENGINES)
    assert all(r.count("|") == bench.COLUMNS + 1 for r in rows)
    (row,) = [r for r in rows if f"| {engine} |" in r]
    if not _installed(engine):
        assert "not installed" in row
        pytest.skip(f"{engine} is not installed (pip install -e .[bench])")
    r = res[engine]
    assert "median" in r, r
    assert 0 < r["min"] <= r["median"]
    assert r["cores"] > 0
    assert r["max_diff"] is not None and r["max_diff"] < 1e-3  # the same model, fp32
    assert f"{r['median']:.2f}" in row


def test_flops_profile_and_summary(silero_result):
    """mnnpy's FLOPs come from the schemas, the profile lists op types, the summary has a ratio."""
    bench, _, res = silero_result
    assert res["_model"]["mflops"] > 0
    rows, whole = res["_model"]["profile"]
    kinds = {k for k, _, _ in rows}
    assert {"LSTM", "Conv"} <= kinds and whole > 0
    assert all(n >= 1 and ms >= 0 for _, n, ms in rows)
    text = "\n".join(bench.format_profile("silero_vad", res["_model"]["profile"]))
    assert "LSTM" in text
    line = bench.summary_row("silero_vad", res)
    assert line.count("|") == bench.SUMMARY_HEADER.count("|")
    ratio = float(line.split("|")[-3])
    assert ratio == pytest.approx(res["mnnpy"]["median"] / res["onnxruntime"]["median"], rel=0.01)


def test_peak_rss_child():
    """A child process measures one engine's peak RSS (above the import alone's, in MiB), its
    import and its first session's creation (ms)."""
    pytest.importorskip("onnxruntime")
    bench = _bench()
    data, feeds = bench.load_models(["silero_vad"])["silero_vad"]
    base, peak, imported, created, cores = bench.peak_rss_child("onnxruntime", "silero_vad", 1)
    assert 10 < base <= peak < 4096
    assert 0 < imported < 60_000 and 0 < created < 60_000
    assert 0 < cores < 64


def test_unknown_model_is_a_clear_error():
    with pytest.raises(SystemExit, match="unknown model"):
        _bench().load_models(["no_such_model"])


def test_missing_engine_is_a_row(monkeypatch):
    """An engine that cannot be used gives a row with the reason, and the others still run."""
    pytest.importorskip("onnxruntime")
    bench = _bench()

    def missing(*_):
        raise bench.EngineMissing("not installed (simulated)")

    monkeypatch.setitem(bench.PREPARE, "OpenVINO", missing)
    data, feeds = bench.load_models(["silero_vad"])["silero_vad"]
    res = bench.bench_model(data, feeds, 1, 2, 0, ("onnxruntime", "OpenVINO"))
    rows = bench.table_rows("silero_vad", feeds, res)
    assert "not installed (simulated)" in rows[1] and rows[1].count("|") == bench.COLUMNS + 1
    assert "median" in res["onnxruntime"]
    assert bench.summary_row("silero_vad", res).count(" - ") >= 2  # no mnnpy: no ratios


def test_write_section_keeps_the_other_sections(tmp_path):
    bench = _bench()
    path = tmp_path / "RESULTS.md"
    path.write_text("# CPU\nold table\n\n# GPU\nkept\n")
    bench.write_section(path, "# CPU\nnew table\n")
    assert path.read_text() == "# CPU\nnew table\n\n# GPU\nkept\n"

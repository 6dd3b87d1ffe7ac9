"""How ``mnnpy bench`` prints its report: a table (default), ``--json`` or ``--csv``."""

from __future__ import annotations

import json

from mnnpy.tools.table import format_csv, format_table

STATS = ("avg", "std", "min", "max", "p50", "p90", "p99")
HEADERS = ["engine", "create", "first", "runs", *STATS, "x first", "GFLOP/s", "device p50", "arena MiB", "device MiB"]
TOP_OPS = 10  # slowest ops listed by --profile


def _num(v, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def rows(report: dict) -> list[list[str]]:
    """One row per engine (cells as text; ms unless the header says otherwise); an engine
    that did not run has its reason in the second cell."""
    out = []
    for name, r in report["engines"].items():
        if "missing" in r:
            out.append([name, r["missing"]] + [""] * (len(HEADERS) - 2))
            continue
        arena = "+".join(f"{k} {v:.1f}" for k, v in r.get("arena_mib", {}).items() if v) or "-"
        device = "+".join(f"{k} {v:.2f}" for k, v in r.get("device_mib", {}).items() if v) or "-"
        cells = [name, _num(r["create_ms"], ".1f"), _num(r["first_ms"]), str(r["runs"])]
        cells += [_num(r[k]) for k in STATS]
        cells += [_num(r["ratio"], ".2f"), _num(r["gflops_per_s"], ".2f"), _num(r.get("device_ms")), arena, device]
        out.append(cells)
    return out


def profile_lines(report: dict) -> list[str]:
    """The ``--profile`` section: per engine, the slowest ops and the time per op type (ms per run)."""
    lines = []
    for name, p in report.get("profile", {}).items():
        run = f", run mean {p['run_ms']:.3f} ms" if p["run_ms"] is not None else ""
        lines += ["", f"{name}: {p['how']}{run}"]
        if p["ops"]:
            slow = sorted(p["ops"], key=lambda r: -r[2])[:TOP_OPS]
            lines.append(format_table(["op", "type", "ms"], [[n, t, f"{ms:.3f}"] for n, t, ms in slow]))
            lines.append("")
        types = [[t, "-" if c is None else c, f"{ms:.3f}"] for t, c, ms in p["types"]]
        lines.append(format_table(["op type", "ops", "ms"], types))
    return lines


def print_report(report: dict, args) -> None:
    """Print ``report`` (``mnnpy.tools.bench.run``'s) as ``args`` asks: JSON, CSV or a table."""
    if args.json:
        print(json.dumps(report, indent=1))
        return
    if args.csv:
        print(format_csv(HEADERS, rows(report)), end="")
        return
    inputs = ", ".join(f"{k} {d} {tuple(s)}" for k, (d, s) in report["inputs"].items())
    gflops = "-" if report["gflops"] is None else f"{report['gflops']:.3f}"
    print(f"model: {report['model']} (loaded in {report['load_ms']:.1f} ms); inputs: {inputs}; GFLOPs per run: {gflops}")
    print("latency in ms (create: session creation and resize; x first: avg / the first engine's avg)")
    print(format_table(HEADERS, rows(report)))
    print(f"peak RSS of this process: {report['peak_rss_mib']:.1f} MiB")
    for line in profile_lines(report):
        print(line)

"""``python -m mnnpy.tools.cts``: run seeded random graphs on mnnpy's backends against
onnxruntime, shrink each failure to a spec, and print a summary.

    python -m mnnpy.tools.cts --graphs 1000 --backend cpu --backend opencl --seed 0 \\
        [--shrink-dir DIR] [--expected tests/cts_expected_failures.json] [--json summary.json]
    python -m mnnpy.tools.cts --replay tests/cts_specs/*.json --backend all

Needs the ``cts`` extra (onnxruntime, tqdm). Exit status 1 where a graph failed that the
expected-failures file does not list, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from mnnpy.tools.cts import expected as expectations
from mnnpy.tools.cts import spec as specs
from mnnpy.tools.cts.generator import generate
from mnnpy.tools.cts.judge import STATUSES, judge
from mnnpy.tools.cts.shrinker import shrink

BACKENDS = ("cpu", "opencl", "vulkan")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m mnnpy.tools.cts", description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=int, default=100, help="graphs to run (default 100)")
    p.add_argument("--seed", type=int, default=0, help="the series: graph i is generate(seed, i)")
    p.add_argument("--start", type=int, default=0, help="first graph index")
    p.add_argument("--backend", action="append", help="cpu, opencl, vulkan or all (repeatable; default cpu)")
    p.add_argument("--max-ops", type=int, default=12, help="most op draws per graph (default 12)")
    p.add_argument("--replay", nargs="+", type=Path, help="judge these spec files instead of generating")
    p.add_argument("--shrink-dir", type=Path, help="shrink each failure and save its spec here")
    p.add_argument("--budget", type=int, default=300, help="shrinking attempts per failure (default 300)")
    p.add_argument("--expected", type=Path, help="expected-failures JSON (failures it lists do not fail the run)")
    p.add_argument("--json", type=Path, help="write the summary here as JSON")
    return p.parse_args(argv)


def backends(names: list[str] | None) -> list[str]:
    """The backends asked for that can run here (the others reported on stderr)."""
    from mnnpy.backend import backend_availability

    wanted = [b for n in names or ["cpu"] for b in (BACKENDS if n == "all" else [n])]
    usable = []
    for b in dict.fromkeys(wanted):
        if b not in BACKENDS:
            raise SystemExit(f"unknown backend {b!r}: one of {', '.join(BACKENDS)} or all")
        ok, why = backend_availability(b)
        if ok:
            usable.append(b)
        else:
            print(f"skipping {b}: {why}", file=sys.stderr)
    return usable


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from tqdm import tqdm

    args = parse(argv)
    names = backends(args.backend)
    known = expectations.load(args.expected) if args.expected else {}
    if args.replay:
        items = [(p.stem, specs.load(p)) for p in args.replay]
    else:
        items = ((f"s{args.seed}_g{i}", None) for i in range(args.start, args.start + args.graphs))
    counts = {b: Counter() for b in names}
    placed = {b: defaultdict(Counter) for b in names}
    seconds = Counter()
    failures = []
    bar = tqdm(items, total=len(args.replay) if args.replay else args.graphs, unit="graph", file=sys.stderr)
    for key, spec in bar:
        spec = spec if spec is not None else generate(args.seed, int(key.rsplit("_g", 1)[1]), args.max_ops)
        for out in judge(spec, names):
            counts[out.backend][out.status] += 1
            seconds[out.backend] += out.seconds
            for where, ops in out.placement.items():
                placed[out.backend][where].update(ops)
            if out.status in ("pass", "invalid"):
                continue
            reason = expectations.reason(known, key, out.backend)
            entry = {"graph": key, "backend": out.backend, "status": out.status, "detail": out.detail, "expected": reason}
            if args.shrink_dir and not args.replay:
                small, small_out = shrink(spec, out.backend, out, args.budget)
                path = specs.save(
                    {**small, "found": {"backend": out.backend, "detail": small_out.detail}},
                    args.shrink_dir / f"{out.backend}_{key}.json",
                )
                entry.update(shrunk=str(path), ops=specs.op_types(small), nodes=specs.node_count(small))
            failures.append(entry)
            bar.set_postfix(failures=len(failures))
    bar.close()
    summary = {"backends": {b: _backend_summary(counts[b], placed[b], seconds[b]) for b in names}, "failures": failures}
    print(report(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if any(not f["expected"] for f in failures) else 0


def _backend_summary(counts: Counter, placed: dict, seconds: float) -> dict:
    judged = sum(counts[s] for s in STATUSES if s != "invalid")
    return {
        "counts": {s: counts[s] for s in STATUSES},
        "ms_per_graph": round(1000 * seconds / max(1, judged), 1),
        "placement": {where: dict(ops.most_common()) for where, ops in placed.items()},
    }


def report(summary: dict) -> str:
    """The summary as text: per backend the outcome counts, time per graph and the op types
    that ran on each device; then each failure (and its shrunk spec)."""
    lines = []
    for b, s in summary["backends"].items():
        counts = ", ".join(f"{n} {s['counts'][n]}" for n in STATUSES)
        lines.append(f"{b}: {counts}; {s['ms_per_graph']} ms per graph (convert, prepare, run)")
        for where, ops in s["placement"].items():
            listed = ", ".join(f"{op} {n}" for op, n in ops.items())
            lines.append(f"  ran on {where}: {sum(ops.values())} ops: {listed}")
    for f in summary["failures"]:
        tag = f"expected: {f['expected']}" if f["expected"] else "UNEXPECTED"
        lines.append(f"{f['backend']} {f['graph']}: {f['status']} ({tag}): {f['detail'][:300]}")
        if "shrunk" in f:
            lines.append(f"  shrunk to {f['nodes']} nodes ({', '.join(f['ops'])}): {f['shrunk']}")
    unexpected = sum(1 for f in summary["failures"] if not f["expected"])
    lines.append(f"{len(summary['failures'])} failures, {unexpected} unexpected")
    return "\n".join(lines)


if __name__ == "__main__":
    started = time.perf_counter()
    status = main()
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    sys.exit(status)

"""AUTO placement: each op on the device that runs it soonest (or on the least energy), by the
devices' capabilities and the cost of the copies at partition borders (NNAPI's partitioner).

NNAPI (``ANeuralNetworksCompilation_setPreference``, ``ExecutionPlan``'s partitioning) puts each
op on the device whose ``PerformanceInfo`` for the op's operand type is best for the
compilation's preference: ``exec_time`` for ``ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER`` (1)
and ``_SUSTAINED_SPEED`` (2), ``power_usage`` for ``_LOW_POWER`` (0). mnnpy adds the copies:

Cost model (µs per run; every figure an estimate, to compare devices, not to predict):
- an op on device d: ``MFLOPs x figure(d, operand type) x CPU_US_PER_MFLOP``: the op schemas'
  FLOPs rule (``mnnpy.ops.flops``), the device's capability relative to the CPU backend
  (``exec_time``, or ``power_usage`` for ``low_power``: energy relative to the CPU's), and
  the CPU backend's µs per MFLOP (``AutoPlacer.us_per_mflop``: measured with the devices'
  capabilities, ``mnnpy.cost_constants``, else ``CPU_US_PER_MFLOP``). Ops without arithmetic (reshapes,
  copies) cost 0 everywhere; a tie stays on the device of the op's first input.
- a tensor copied between devices (once per tensor and reading device, as the Schedule
  copies): ``latency + bytes / bandwidth`` for each device that is not the CPU, the host in
  between (``MnnpyDevice.latency_us`` and ``bandwidth``: measured with the device's
  capabilities, else ``COPY_LATENCY_US`` and ``mnnpy.auto_devices.BANDWIDTH``). Graph inputs start on the host, graph outputs
  (and what later segments read) end there; constants are uploaded at resize, not per run.

Rule: (1) greedy: each op on its cheapest supported device (``mnnpy.schedule.placeable``
decides support); (2) merge: a partition (consecutive ops on one device) moves to the device
of a neighbouring partition, or the CPU, whenever that lowers the total (its saving is below
the cost of its copies); repeated until no move lowers it (each move lowers a finite total,
so it ends). The reasons are kept per op (``Schedule.placement_reasons``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mnnpy.backend import OpInfo

# NNAPI's ExecutionPreference (NeuralNetworks.h: ANEURALNETWORKS_PREFER_*)
PREFERENCES = {"low_power": 0, "fast_single_answer": 1, "sustained_speed": 2}
DEFAULT_PREFERENCE = "fast_single_answer"  # NNAPI's default
# PP-OCRv4 det at 1x3x640x640: 4735 MFLOPs in 69 ms on the CPU backend (2 cores, AMD EPYC): 14.5 µs
CPU_US_PER_MFLOP = 15.0
COPY_LATENCY_US = 20.0  # per tensor copied to or from a device: a submission and a wait
OPERAND_KINDS = ("float32", "relaxed", "quant8", "int32", "bool")  # capabilities' operand workloads
EPS_US = 1e-6


def operand_kind(info: OpInfo, relaxed: bool) -> str:
    """The capabilities' operand type an op is priced by: its first run-time input's dtype (else
    its first input's, else its first output's): float -> ``float32`` (``relaxed`` with
    ``precision="low"``), int8/uint8 -> ``quant8``, other integers -> ``int32``, bool -> ``bool``."""
    present = info.present()
    t = next((t for t in present if t.value is None), None) or (present[0] if present else info.outputs[0])
    kind = t.dtype.kind if t is not None else "f"
    if kind == "b":
        return "bool"
    if kind in "iu":
        return "quant8" if t.dtype.itemsize == 1 else "int32"
    return "relaxed" if relaxed else "float32"


@dataclass(frozen=True)
class MnnpyDevice:
    """A candidate device as the cost model sees it: ``id`` (``"vulkan:0"``), ``figure``: operand
    kind -> exec_time (or power_usage) relative to the CPU backend (``inf``: cannot run),
    ``bandwidth``: host <-> device bytes per µs (0: the host itself, no copy), ``source``: where
    the figures come from (measured and cached, or a documented default)."""

    id: str
    figure: dict[str, float]
    bandwidth: float
    source: str
    latency_us: float = COPY_LATENCY_US  # per copy, µs (measured with the capabilities, else the default)

    def copy_us(self, nbytes: int) -> float:
        """µs to move ``nbytes`` between the host and this device (0 on the host)."""
        return 0.0 if not self.bandwidth else self.latency_us + nbytes / self.bandwidth


@dataclass
class AutoPlacer:
    """Places a segment's ops for ``backend="auto"`` (module docstring). ``devices``: one per
    backend of the session, in the same order (the CPU last); ``preference``: a key of
    ``PREFERENCES``; ``relaxed``: float ops priced as float32 relaxed to float16; ``notes``:
    what the session says about its candidates (``session.placement``)."""

    devices: list[MnnpyDevice]
    preference: str
    relaxed: bool = False
    notes: tuple[str, ...] = ()
    us_per_mflop: float = CPU_US_PER_MFLOP  # the CPU backend's µs per MFLOP (measured, else the default)

    def place(self, ops: list[OpInfo], options: list[list[int]], mflops: dict, exports) -> tuple[list[int], dict[int, str]]:
        """``(backend index per op, reason per op index)`` for ``ops`` (a segment's run-time ops
        in order), ``options[n]``: the backends that support ``ops[n]``; ``mflops``: op index
        -> MFLOPs; ``exports``: tensors read after the segment (they end on the host)."""
        from mnnpy.placement_report import explain

        cost = _Costs(self, ops, options, mflops, exports)
        choice = cost.greedy()
        moved = cost.merge(choice)
        return choice, explain(cost, choice, moved)


class _Costs:
    """The cost model of one segment: per op and device the op's µs (``est``), and the total of
    an assignment (ops plus border copies)."""

    def __init__(self, placer: AutoPlacer, ops, options, mflops, exports):
        self.placer, self.ops, self.options = placer, ops, options
        self.devices = placer.devices
        self.cpu = len(self.devices) - 1
        self.kinds = [operand_kind(info, placer.relaxed) for info in ops]
        self.mflops = [float(mflops.get(info.index, 0.0)) for info in ops]
        self.est = [
            [self.mflops[n] * d.figure.get(self.kinds[n], math.inf) * placer.us_per_mflop if k in options[n] else math.inf
             for k, d in enumerate(self.devices)]
            for n in range(len(ops))
        ]  # fmt: skip
        for n, row in enumerate(self.est):  # 0 MFLOPs x inf: an op without arithmetic costs nothing where supported
            row[:] = [0.0 if (math.isnan(v) or (self.mflops[n] == 0 and k in options[n])) else v for k, v in enumerate(row)]
        self.producer = {t.index: n for n, info in enumerate(ops) for t in info.outputs if t is not None}
        self.made = {t.index: t for info in ops for t in info.outputs if t is not None}
        self.exports = [t for t in exports if t in self.made]

    def greedy(self) -> list[int]:
        """Each op on its cheapest supported device; ties: its first input's device, then the
        candidates' order (the CPU last)."""
        choice: list[int] = []
        for n, info in enumerate(self.ops):
            src = next((choice[self.producer[t.index]] for t in info.present() if t.index in self.producer), self.cpu)
            choice.append(min(self.options[n], key=lambda k: (self.est[n][k], k != src, k)))
        return choice

    def copy_us(self, src: int, dst: int, nbytes: int) -> float:
        """µs to move a tensor from device ``src`` to ``dst`` (through the host)."""
        return self.devices[src].copy_us(nbytes) + self.devices[dst].copy_us(nbytes)

    def borders(self, choice: list[int], lo: int = 0, hi: int | None = None) -> list[tuple[int, int, int]]:
        """``(src, dst, bytes)`` of the copies an assignment makes, or (``lo``, ``hi``) only those
        into or out of ops ``lo..hi-1``."""
        hi = len(self.ops) if hi is None else hi
        seen, out = set(), []
        for n, info in enumerate(self.ops):
            for t in info.present():
                if t.value is not None or (t.index, choice[n]) in seen:
                    continue
                p = self.producer.get(t.index)
                src = self.cpu if p is None else choice[p]
                inside = lo <= n < hi or (p is not None and lo <= p < hi)
                if src != choice[n] and inside:
                    seen.add((t.index, choice[n]))
                    out.append((src, choice[n], t.nbytes))
        for t in self.exports:
            p = self.producer[t]
            if choice[p] != self.cpu and lo <= p < hi:
                out.append((choice[p], self.cpu, self.made[t].nbytes))
        return out

    def total(self, choice: list[int]) -> float:
        """µs of an assignment: every op's estimate plus every border copy."""
        ops = sum(self.est[n][k] for n, k in enumerate(choice))
        return ops + sum(self.copy_us(*c) for c in self.borders(choice))

    def merge(self, choice: list[int]) -> dict[int, tuple]:
        """Move partitions to a neighbour's device (or the CPU) while that lowers ``total``, in
        place; returns op -> (device it left, first op, end) of the partition it was moved with."""
        moved: dict[int, tuple] = {}
        changed, best = True, self.total(choice)
        while changed:
            changed = False
            for lo, hi in runs(choice):
                d = choice[lo]
                for a in dict.fromkeys(
                    (choice[lo - 1] if lo else self.cpu, choice[hi] if hi < len(choice) else self.cpu, self.cpu)
                ):
                    if a == d or any(a not in self.options[n] for n in range(lo, hi)):
                        continue
                    trial = choice[:lo] + [a] * (hi - lo) + choice[hi:]
                    t = self.total(trial)
                    if t < best - EPS_US:
                        moved.update({n: (d, lo, hi) for n in range(lo, hi) if n not in moved})
                        choice[:], best, changed = trial, t, True
                        break
                if changed:
                    break
        return moved


def runs(choice: list[int]) -> list[tuple[int, int]]:
    """``(first, end)`` of each run of consecutive equal entries: the partitions."""
    out, lo = [], 0
    for n in range(1, len(choice) + 1):
        if n == len(choice) or choice[n] != choice[lo]:
            out.append((lo, n))
            lo = n
    return out

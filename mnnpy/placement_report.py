"""Why each op went where it did: the reasons AUTO placement gives (``mnnpy.placement``) and
``session.placement``, the report of a session's placement.

Reasons, one per partition (its ops share it), or per op where greedy placement decided:
- a partition on a device other than the CPU: ``"vulkan:0: exec_time 0.1 x CPU for float32;
  partition of 12 ops, 3.1 MFLOPs, pays its 2 copies (0.8 MiB)"``;
- a partition merged away: ``"cpu: the vulkan:0 partition of 1 op would move 4 MiB for
  0.01 MFLOPs"``;
- an op left on the CPU by greedy placement: ``"cpu: fastest for float32 (vulkan:0: 3.2 x
  CPU)"``, ``"cpu: no arithmetic (0 MFLOPs), stays with its input"``, ``"cpu: no other
  candidate supports it"`` (the Schedule's fallback reasons say why), or ``"cpu: the only
  candidate"``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mnnpy.placement import runs

MIB = 1 << 20


def _figure_name(preference: str) -> str:
    return "power_usage" if preference == "low_power" else "exec_time"


def explain(cost, choice: list[int], moved: dict[int, tuple]) -> dict[int, str]:
    """Op index -> the reason for its device, for the final ``choice`` of a ``_Costs``."""
    out: dict[int, str] = {}
    for lo, hi in runs(choice):
        d = choice[lo]
        for n in range(lo, hi):
            if n in moved and moved[n][0] != d:
                why = _moved(cost, *moved[n], d)
            elif d != cost.cpu:
                why = _paying(cost, choice, lo, hi)
            else:
                why = _greedy_cpu(cost, n)
            out[cost.ops[n].index] = why
    return out


def _paying(cost, choice, lo: int, hi: int) -> str:
    """The reason of a partition ``lo..hi-1`` kept on a device other than the CPU."""
    dev = cost.devices[choice[lo]]
    weights = Counter()
    for n in range(lo, hi):
        weights[cost.kinds[n]] += cost.mflops[n]
    kind = weights.most_common(1)[0][0]
    copies = cost.borders(choice, lo, hi)
    mib = sum(b for *_, b in copies) / MIB
    name = _figure_name(cost.placer.preference)
    size = f"partition of {hi - lo} op{'s' * (hi - lo != 1)}, {sum(cost.mflops[lo:hi]):.3g} MFLOPs"
    figure = dev.figure.get(kind, float("inf"))
    return f"{dev.id}: {name} {figure:.2g} x CPU for {kind}; {size}, pays its {len(copies)} copies ({mib:.2g} MiB)"


def _moved(cost, left: int, lo: int, hi: int, now: int) -> str:
    """The reason of an op whose partition ``lo..hi-1`` left device ``left`` for ``now``."""
    trial = [left] * len(cost.ops)  # the partition's copies as they were: its neighbours on ``now``
    trial[:lo], trial[hi:] = [now] * lo, [now] * (len(cost.ops) - hi)
    mib = sum(b for *_, b in cost.borders(trial, lo, hi)) / MIB
    count = f"{hi - lo} op{'s' * (hi - lo != 1)}"
    return (
        f"{cost.devices[now].id}: the {cost.devices[left].id} partition of {count} would move {mib:.2g} MiB "
        f"for {sum(cost.mflops[lo:hi]):.3g} MFLOPs"
    )


def _greedy_cpu(cost, n: int) -> str:
    """The reason of op ``n`` put on the CPU by greedy placement."""
    cpu = cost.devices[cost.cpu].id
    others = [k for k in cost.options[n] if k != cost.cpu]
    if len(cost.devices) == 1:
        return f"{cpu}: the only candidate (the placement's notes say why the others were left out)"
    if not others:
        return f"{cpu}: no other candidate supports it"
    if cost.mflops[n] == 0:
        return f"{cpu}: no arithmetic (0 MFLOPs), stays with its input"
    kind, name = cost.kinds[n], _figure_name(cost.placer.preference)
    rivals = ", ".join(f"{cost.devices[k].id}: {name} {cost.devices[k].figure.get(kind, float('inf')):.2g} x CPU" for k in others)
    return f"{cpu}: fastest for {kind} ({rivals})" if name == "exec_time" else f"{cpu}: least energy for {kind} ({rivals})"


@dataclass(frozen=True)
class Placement:
    """A session's placement (``Session.placement``): ``preference`` (``None`` unless
    ``backend="auto"``), ``candidates`` (device ids considered), ``notes`` (where each
    candidate's figures come from, which were left out and why), and ``ops``: per run-time op
    of the last plan (or of the declared shapes), ``(op name, op type, backend, reason)``."""

    preference: str | None
    candidates: tuple[str, ...]
    notes: tuple[str, ...]
    ops: tuple[tuple[str, str, str, str], ...]

    @property
    def backends(self) -> list[str]:
        """The backends the ops went to, in order of first use."""
        return list(dict.fromkeys(b for _, _, b, _ in self.ops))

    def lines(self) -> list[str]:
        """The report: a header, the notes, then one line per op with its backend and reason."""
        head = f"placement ({self.preference or 'fixed backend list'}; candidates {', '.join(self.candidates)})"
        return [head, *(f"  {n}" for n in self.notes), *(f"  {t} '{o}' on {b}: {w}" for o, t, b, w in self.ops)]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def session_placement(session) -> Placement:
    """``Session.placement``: the placement of the session's last plan (every segment) or, before
    one, of its declared shapes (a dynamic batch dim 1, other dynamic dims 64), with the AUTO placer's notes."""
    from mnnpy.schedule import merge_schedules

    sched = merge_schedules([p.schedule for p in session._described(None)])
    placer = session.runner.placer
    ops = []
    for i, b in sched.backend_of.items():
        op, backend = session.graph.ops[i], sched.backend_names[b]
        why = sched.placement_reasons.get(i) or ("first backend of the list that supports it" if b == 0 else "")
        if i in sched.fallback_reasons:
            why = f"{why}; fell back: {sched.fallback_reasons[i]}" if why else f"fell back: {sched.fallback_reasons[i]}"
        ops.append((op.name, op.type, backend, why))
    if placer is None:
        return Placement(None, tuple(sched.backend_names), (), tuple(ops))
    return Placement(placer.preference, tuple(d.id for d in placer.devices), placer.notes, tuple(ops))

"""Where a session's ops ran: counted from the plans its graph runner kept after a run.

Every op of the graphs that ran (the main graph's segments, and each control-flow body that
ran, recursively) counts once, from the plan of its last run:

- ``device``: scheduled on the session's first backend (the GPU backend under test);
- ``cpu``: scheduled on the CPU backend (a fallback; its reason is kept), or a sequence op
  run by the CPU backend's host kernels;
- ``resize``: computed while planning (``SizeResult`` values: shape computations and small
  ops whose inputs are all known at resize, evaluated by the CPU backend once per plan).

Control-flow ops (If, Loop, Scan) run on the host on every backend and are not counted; the
ops of their bodies are (NNAPI counts a control-flow op on a device only when the device runs
every op of its bodies).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mnnpy.control_flow import RUNNERS as CONTROL_FLOW

SEQUENCE_OP = "run on the host by the CPU backend (an op on sequence values)"


@dataclass
class Placement:
    """Op counts of one session's last run (see the module docstring) and ``reasons``: the
    fallback reason of each op run on the CPU -> how many ops gave it."""

    device: int = 0
    cpu: int = 0
    resize: int = 0
    reasons: Counter = field(default_factory=Counter)


def placement(session) -> Placement:
    """Where the ops of ``session`` (an ``mnnpy.Session`` after a run) ran: ``Placement``."""
    out = Placement()
    _count(session.runner, session.backends[0].name, out)
    return out


def _count(runner, device: str, out: Placement) -> None:
    """Add the ops of ``runner``'s last run (its segments, else its plan) and its bodies' to ``out``."""
    ops = runner.graph.ops
    for plan in runner.segments or ([runner.plan] if runner.plan is not None else []):
        sizes, schedule = plan.sizes, plan.schedule
        end = sizes.barrier if sizes.barrier is not None else len(ops)
        for i in range(plan.start, end):
            if i == sizes.dynamic:
                if ops[i].type not in CONTROL_FLOW:
                    out.cpu += 1
                    out.reasons[SEQUENCE_OP] += 1
            elif i not in schedule.backend_of:
                out.resize += 1
            elif schedule.backend_names[schedule.backend_of[i]] == device != "cpu":
                out.device += 1
            else:
                out.cpu += 1
                out.reasons[_reason(schedule.fallback_reasons.get(i, ""), device)] += 1
    for body in runner.bodies().values():
        _count(body, device, out)


def _reason(reason: str, device: str) -> str:
    """A fallback reason without the backend's name in front ("opencl: no OpenCL execution
    for Erf" -> "no OpenCL execution for Erf")."""
    return reason.removeprefix(f"{device}: ") or "no reason given"

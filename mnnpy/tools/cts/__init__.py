"""Random-graph differential tests (after the Android NNAPI CTS): seeded random ONNX graphs
run on onnxruntime (the reference) and on mnnpy's backends, judged with DESIGN.md's
tolerances; a failing graph is shrunk to a small spec that the test suite replays.

- ``generate(seed, index)``: a spec (``mnnpy.tools.cts.spec``: plain JSON) of a valid graph;
- ``judge(spec, backends)``: an ``Outcome`` per backend (status, worst error, where each op ran);
- ``shrink(spec, backend, outcome)``: a smaller spec that fails the same way;
- ``python -m mnnpy.tools.cts --graphs N --backend B --seed S``: many graphs, a summary.
"""

from mnnpy.tools.cts.generator import generate
from mnnpy.tools.cts.judge import Outcome, judge
from mnnpy.tools.cts.shrinker import shrink
from mnnpy.tools.cts.spec import load, save

__all__ = ["Outcome", "generate", "judge", "load", "save", "shrink"]

"""Tools built on the engine, apart from it: TFLite's benchmark, inference-diff and task
evaluation tools (``mnnpy bench``, ``mnnpy diff``, ``mnnpy eval``: ``bench``, ``diff``,
``evaluate`` and what they share, ``inputs``, ``profile``, ``table``, ``eval_plot``); the random-graph differential tests
(``python -m mnnpy.tools.cts``), the fuzzing harnesses (``python -m mnnpy.tools.fuzz``) and
the numerical tolerances every comparison with the reference uses (``mnnpy.tools.tolerances``)."""

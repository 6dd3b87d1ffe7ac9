"""Tools built on the engine, apart from it: the random-graph differential tests
(``python -m mnnpy.tools.cts``), the fuzzing harnesses (``python -m mnnpy.tools.fuzz``) and
the numerical tolerances every comparison with the reference uses (``mnnpy.tools.tolerances``)."""

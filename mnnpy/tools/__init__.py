"""Tools built on the engine: fuzzing harnesses (``mnnpy.tools.fuzz``)."""

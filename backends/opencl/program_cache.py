"""Built OpenCL programs, cached per source and build options (in memory for now)."""

from __future__ import annotations


class ProgramCache:
    """``get(file, source, options) -> cl.Program``, built once per (source, options)."""

    def __init__(self, runtime):
        self.runtime = runtime
        self._built: dict[tuple[str, tuple[str, ...]], object] = {}

    def get(self, file: str, source: str, options: list[str]):
        key = (source, tuple(options))
        prg = self._built.get(key)
        if prg is None:
            cl = self.runtime.cl
            prg = self._built[key] = cl.Program(self.runtime.context, source).build(options=options)
        return prg

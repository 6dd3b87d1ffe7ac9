"""The registries load their modules once, and threads that arrive meanwhile wait for all of them."""

from __future__ import annotations

import threading
import time

from mnnpy.registry import Registry


def test_concurrent_first_use_sees_every_entry(monkeypatch):
    reg = Registry("test entry", "mnnpy.ops")
    real_import = __import__("importlib").import_module
    calls = []

    def slow_import(name, *a, **k):  # widen the window in which another thread could read a half-filled registry
        module = real_import(name, *a, **k)
        if name.startswith("mnnpy.ops."):
            reg.add(name, module)
            time.sleep(0.01)
        calls.append(name)
        return module

    import mnnpy.registry as registry_module

    monkeypatch.setattr(registry_module.importlib, "import_module", slow_import)
    sizes = []
    threads = [threading.Thread(target=lambda: sizes.append(len(reg.entries()))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    full = len(reg.entries())
    assert full > 5 and sizes == [full] * 6

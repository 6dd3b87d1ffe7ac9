"""GPU backends after fork(): drivers do not survive it, so a child forked after this process
used a GPU backend is told so at once (``BackendUnavailableError`` naming spawn/forkserver),
both when it asks for the backend and when it runs a session inherited from the parent;
before, the child hung (OpenCL) or waited for a fence time-out (Vulkan)."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from tests.backend_compare import API, gpu_backends, sessions
from tests.oracle import make_model


def _child(queue, backend, session, feeds):
    ok, why = backend_availability(backend)
    try:
        session.run(feeds)
        why += " | inherited session ran"
    except mnnpy.MnnpyError as e:
        why += f" | inherited session: {e}"
    queue.put((ok, why))


@pytest.mark.parametrize("backend", gpu_backends())
def test_forked_child_is_told_not_to_use_the_gpu(backend):
    x = np.ones((2, 3), np.float32)
    session = sessions(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"]), backend=backend)[0]
    session.run({"x": x})
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue, backend, session, {"x": x}))
    child.start()
    ok, why = queue.get(timeout=60)
    child.join(60)
    assert not ok and "spawn" in why, why
    assert f"inherited session: {API[backend]} was initialised in the parent process before fork()" in why, why

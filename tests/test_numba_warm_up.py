"""numba loads on a background thread when the first Interpreter is made and this machine has
no compiled kernel files yet (kernels/__init__.py); with them, a process never imports numba
(kernels/native.py)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

CHILD = textwrap.dedent(
    """
    import os, sys, numpy as np
    import mnnpy
    from mnnpy.backends.cpu import kernels
    from onnx import TensorProto, helper, numpy_helper
    from mnnpy.converter import convert
    assert "numba" not in sys.modules, "import mnnpy must not import numba"
    w = numpy_helper.from_array(np.full((4, 1, 3, 3), 0.5, np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=4, pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    interp = mnnpy.Interpreter(convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()))
    started = bool(kernels._WARM)
    pid = os.fork()  # the warm-up is joined first: the child can use numba
    if pid == 0:
        s = interp.create_session()
        s.run({"x": np.ones((1, 4, 9, 9), np.float32)})
        os._exit(0 if "numba" in sys.modules else 3)
    _, status = os.waitpid(pid, 0)
    print(started, os.waitstatus_to_exitcode(status))
    """
)


def _child(env_extra):
    env = {**os.environ, **env_extra}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, env=env, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_warm_up_starts_with_the_first_interpreter_and_is_joined_before_fork(tmp_path):
    assert _child({"MNNPY_CACHE": str(tmp_path)}) == ["True", "0"]


def test_warm_up_can_be_turned_off(tmp_path):
    assert _child({"MNNPY_CACHE": str(tmp_path), "MNNPY_NUMBA_WARMUP": "0"}) == ["False", "0"]


def test_a_process_with_the_kernel_files_never_imports_numba(tmp_path):
    assert _child({"MNNPY_CACHE": str(tmp_path)}) == ["True", "0"]  # compiles and exports the kernels
    assert _child({"MNNPY_CACHE": str(tmp_path)}) == ["True", "3"]  # loads them: the warm-up finds them, no numba


def test_without_the_native_layer_numba_runs_the_kernels(tmp_path):
    _child({"MNNPY_CACHE": str(tmp_path)})
    assert _child({"MNNPY_CACHE": str(tmp_path), "MNNPY_NATIVE_KERNELS": "0"}) == ["True", "0"]

"""Compiled kernels as cached machine code (backends/cpu/kernels/native.py): exported once,
loaded without numba, checked before use, and rebuilt where a file is bad."""

import json
import os
import shutil
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("numba")
pytest.importorskip("llvmlite")

from mnnpy.backends.cpu import kernels as kernels_mod  # noqa: E402
from mnnpy.backends.cpu.kernels import epilogue, native  # noqa: E402

SHARED = sys.platform.startswith("linux") and hasattr(os, "memfd_create") and shutil.which("ld") is not None


@pytest.fixture(autouse=True, params=["so", "object"])
def form(request, monkeypatch):
    """Every test for both forms of a kernel file: a shared library (where ``ld`` is found)
    and object code loaded by MCJIT (``MNNPY_NATIVE_SHARED=0``)."""
    if request.param == "so" and not SHARED:
        pytest.skip("no shared libraries here: needs Linux's memfd_create and ld on PATH")
    monkeypatch.setenv(native.SHARED_ENV, "1" if request.param == "so" else "0")
    return request.param


def _form_of(path) -> str:
    """The ``form`` a kernel file's payload says it holds."""
    from mnnpy import cache_file

    payload = cache_file.unpack(path.read_bytes(), native.MAGIC, native.FORMAT, path.stem)
    (n,) = struct.unpack_from("<I", payload)
    return json.loads(payload[4 : 4 + n])["form"]


def _rows_kernel(tmp_path, monkeypatch):
    """The epilogue rows kernel exported into ``tmp_path`` (a fresh process's view of it)."""
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    return epilogue.kernel()


def _check_rows(kernel):
    rng = np.random.default_rng(0)
    y = rng.standard_normal((6, 40)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    want = y.copy()
    want[1:5, 3:30] = np.clip(want[1:5, 3:30] + b[1:5, None], 0, 6)
    kernel(y, b, 1, 5, 3, 30, 2, np.float32(0), np.float32(6))
    np.testing.assert_array_equal(y, want)


def test_exported_then_loaded_from_the_file(tmp_path, monkeypatch, form):
    kernel = _rows_kernel(tmp_path, monkeypatch)
    assert isinstance(kernel, native.NativeKernel)
    files = list((tmp_path / "kernels").glob("epilogue_rows-*.bin"))
    assert len(files) == 1
    assert _form_of(files[0]) == form
    _check_rows(kernel)
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    monkeypatch.setattr(kernels_mod, "_import_numba", lambda: pytest.fail("numba asked for although the file exists"))
    again = epilogue.kernel()
    assert isinstance(again, native.NativeKernel) and again is not kernel
    _check_rows(again)


def test_bind_fixes_the_arguments_and_keeps_the_arrays_alive(tmp_path, monkeypatch):
    kernel = _rows_kernel(tmp_path, monkeypatch)
    y = np.ones((2, 8), np.float32)
    bound = native.bind(kernel, y, np.full(2, 2.0, np.float32), 0, 2, 0, 8, 0, np.float32(0), np.float32(0))
    bound()
    np.testing.assert_array_equal(y, 3.0)
    bound()
    np.testing.assert_array_equal(y, 5.0)
    assert any(a is y for a in bound.keep[2])
    with pytest.raises(TypeError, match="9 arguments expected, got 2"):
        native.bind(kernel, y, np.zeros(2, np.float32))


@pytest.mark.parametrize(
    "y", [np.zeros((2, 8), np.float64), np.zeros((2, 8), np.float32)[:, ::2], np.zeros(16, np.float32), [[0.0] * 8] * 2]
)
def test_a_wrong_array_is_a_type_error_not_a_wild_write(tmp_path, monkeypatch, y):
    kernel = _rows_kernel(tmp_path, monkeypatch)
    with pytest.raises(TypeError, match="expected a C-contiguous 2-d float32 array"):
        kernel(y, np.zeros(2, np.float32), 0, 2, 0, 8, 0, np.float32(0), np.float32(0))


def _damaged(tmp_path, monkeypatch, damage):
    _rows_kernel(tmp_path, monkeypatch)
    (path,) = (tmp_path / "kernels").glob("epilogue_rows-*.bin")
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(damage(data)))
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with pytest.warns(RuntimeWarning, match="not used"):
        kernel = epilogue.kernel()
    _check_rows(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.setattr(kernels_mod, "_BUILT", {})
        _check_rows(epilogue.kernel())  # rebuilt: the file is good again


def _flip(at):
    def damage(data):
        data[int(at * (len(data) - 1))] ^= 0x40
        return data

    return damage


@pytest.mark.parametrize("at", [0.0, 0.02, 0.1, 0.3, 0.5, 0.75, 0.99])
def test_a_flipped_byte_is_rejected_and_rebuilt(tmp_path, monkeypatch, at):
    _damaged(tmp_path, monkeypatch, _flip(at))


def test_a_truncated_file_is_rejected_and_rebuilt(tmp_path, monkeypatch):
    _damaged(tmp_path, monkeypatch, lambda data: data[: len(data) // 2])


def test_another_kernels_file_is_rejected(tmp_path, monkeypatch):
    _rows_kernel(tmp_path, monkeypatch)
    from mnnpy.backends.cpu.kernels import spin

    spin.kernel()
    (rows,) = (tmp_path / "kernels").glob("epilogue_rows-*.bin")
    (other,) = (tmp_path / "kernels").glob("spin-*.bin")
    rows.write_bytes(other.read_bytes())
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with pytest.warns(RuntimeWarning, match="entry of another key"):
        kernel = epilogue.kernel()
    _check_rows(kernel)


def test_turned_off_gives_numbas_dispatcher(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_NATIVE_KERNELS", "0")
    kernel = _rows_kernel(tmp_path, monkeypatch)
    assert not isinstance(kernel, native.NativeKernel)
    assert not (tmp_path / "kernels").exists()
    _check_rows(kernel)


def test_a_kernel_that_allocates_runs_on_the_runtime_helpers(tmp_path, monkeypatch):
    """The pool kernel allocates a row buffer (numba's NRT, here malloc/free in LLVM IR) and
    reshapes its arguments (numba_attempt_nocopy_reshape): many calls, no leak, right values."""
    import resource

    from mnnpy.backends.cpu.kernels import pool

    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    window = pool.kernel()
    assert isinstance(window, native.NativeKernel)
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 6, 6)
    y = np.zeros((2, 3, 3), np.float32)
    cols = np.array([[0, 3], [0, 3]], np.int64)
    recip = np.ones((1, 1), np.float32)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(20000):
        window(x, y, recip, cols, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 6)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 20_000  # KiB
    np.testing.assert_array_equal(y, x.reshape(2, 3, 2, 3, 2).max(axis=(2, 4)))


def test_files_of_other_environments_are_pruned(tmp_path, monkeypatch):
    _rows_kernel(tmp_path, monkeypatch)
    folder = tmp_path / "kernels"
    (folder / "epilogue_rows-0123456789abcdef.bin").write_bytes(b"older")
    (folder / "epilogue_rows_extra-0123456789abcdef.bin").write_bytes(b"another kernel")
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    monkeypatch.setattr(native, "load", lambda folder, name: None)  # as if the file were stale: exported again
    epilogue.kernel()
    names = sorted(p.name for p in folder.glob("epilogue_rows*"))
    assert names == sorted([f"epilogue_rows-{native.key()}.bin", "epilogue_rows_extra-0123456789abcdef.bin"])


def test_several_shared_libraries_in_one_process(tmp_path, monkeypatch, form):
    """Each kernel's library is its own: loading a second one (a memory file whose descriptor
    number the first one's could have had) gives the second kernel, not the first again."""
    from mnnpy.backends.cpu.kernels import pool

    _rows_kernel(tmp_path, monkeypatch)
    pool.kernel()
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, window = epilogue.kernel(), pool.kernel()
    assert rows.address != window.address
    _check_rows(rows)
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(2, 4, 4)
    y = np.zeros((2, 2, 2), np.float32)
    window(x, y, np.ones((1, 1), np.float32), np.array([[0, 2], [0, 2]], np.int64), 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 4)
    np.testing.assert_array_equal(y, x.reshape(2, 2, 2, 2, 2).max(axis=(2, 4)))
    for path in (tmp_path / "kernels").glob("*.bin"):
        assert _form_of(path) == form


def test_a_new_process_loads_kernels_without_numba_or_llvmlite(tmp_path, monkeypatch, form):
    """What the shared libraries are for: a process whose kernels are on disk imports neither
    numba nor (with shared libraries) llvmlite, whose imports cost 30-700 ms."""
    _rows_kernel(tmp_path, monkeypatch)
    code = (
        "import sys, numpy as np\n"
        "from mnnpy.backends.cpu.kernels import epilogue, native\n"
        "k = epilogue.kernel()\n"
        "y = np.zeros((2, 4), np.float32)\n"
        "k(y, np.ones(2, np.float32), 0, 2, 0, 4, 0, np.float32(0), np.float32(0))\n"
        "print(isinstance(k, native.NativeKernel), float(y.sum()), 'numba' in sys.modules, 'llvmlite.binding' in sys.modules)\n"
    )
    env = {**os.environ, "MNNPY_CACHE": str(tmp_path), native.SHARED_ENV: "1" if form == "so" else "0"}
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "8.0", "False", "True" if form == "object" else "False"]


def _pointwise_model():
    """A 1x1 Conv (bias, Relu) as mnnpy bytes, its input and NumPy's result."""
    from onnx import TensorProto, helper, numpy_helper

    from mnnpy.converter import convert

    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 32, 1, 1)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    data = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    want = np.maximum(np.einsum("mc,chw->mhw", w[:, :, 0, 0], x[0]) + b[:, None, None], 0)[None]
    return data, x, want


def test_turned_off_a_model_runs_on_numbas_dispatchers(tmp_path, monkeypatch):
    """``MNNPY_NATIVE_KERNELS=0``: the products take NumPy's path (numba's dispatcher types
    its arrays writable; a model's weights are read-only views of the file), the model runs."""
    import mnnpy

    monkeypatch.setenv("MNNPY_NATIVE_KERNELS", "0")
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    data, x, want = _pointwise_model()
    for threads in (1, 2):
        s = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=threads)
        np.testing.assert_allclose(s.run({"x": x})["z"], want, rtol=1e-4, atol=1e-4)


def test_kernels_that_cannot_be_saved_are_still_used(tmp_path, monkeypatch):
    """Export loads the kernels, then fails to write the file (a read-only folder): this
    process uses the loaded kernels, with a warning, and the next one builds them again."""

    def refuse(path, data, **kw):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    monkeypatch.setattr(native.cache_file, "atomic_write", refuse)
    with pytest.warns(RuntimeWarning, match="kernels not saved to"):
        kernel = epilogue.kernel()
    assert isinstance(kernel, native.NativeKernel)
    _check_rows(kernel)
    assert not list((tmp_path / "kernels").glob("epilogue_rows-*.bin"))


def test_a_hanging_linker_is_stopped_once_and_not_asked_again(tmp_path, monkeypatch, form):
    """A linker that never finishes is killed with what it started after ``LINK_TIMEOUT_S``;
    the kernel is kept as object code (correct), and the process links no other kernel."""
    if form != "so":
        pytest.skip("the linker is only asked for shared libraries")
    fake = tmp_path / "bin" / "ld"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/ld.pid\nsleep 600\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(native, "LINK_TIMEOUT_S", 1)
    monkeypatch.setattr(native, "_LINK_FAILED", [])
    kernel = _rows_kernel(tmp_path, monkeypatch)
    _check_rows(kernel)
    (path,) = (tmp_path / "kernels").glob("epilogue_rows-*.bin")
    assert _form_of(path) == "object"
    pid = int((tmp_path / "ld.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the script and its sleep were killed, not left behind
    assert native._linker() is None  # not asked again in this process


def test_object_code_kept_for_want_of_a_linker_is_built_again_where_one_is_found(tmp_path, monkeypatch, form):
    """Kernels built once without ``ld`` (object code, llvmlite at every load) are built as a
    shared library by the first process that finds a linker."""
    if form != "so":
        pytest.skip("needs a linker")
    monkeypatch.setattr(native, "_LINK_FAILED", [])
    monkeypatch.setenv(native.SHARED_ENV, "0")  # as if no linker was found
    _rows_kernel(tmp_path, monkeypatch)
    (path,) = (tmp_path / "kernels").glob("epilogue_rows-*.bin")
    assert _form_of(path) == "object"
    monkeypatch.setenv(native.SHARED_ENV, "1")
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel = epilogue.kernel()
    _check_rows(kernel)
    assert _form_of(path) == "so"


def test_addresses_of_writable_read_only_and_empty_arrays():
    from mnnpy.backends.cpu.kernels.native import address as _address

    ro = np.arange(12, dtype=np.float32)
    ro.flags.writeable = False
    for a in (np.zeros((3, 4), np.float32)[1:], ro, np.frombuffer(b"abcdefgh", np.uint8), np.zeros(0, np.float32)):
        assert _address(a) == a.__array_interface__["data"][0]
    assert native._DATA_FIELD is not None  # CPython: the data field is read directly
    sub = np.arange(6.0).view(np.recarray)  # a subclass: through NumPy, not the field
    assert _address(sub) == sub.__array_interface__["data"][0]
    rev = np.arange(10.0)[::-3]  # a negative stride: the field is the first element's address
    assert _address(rev) == rev.__array_interface__["data"][0]

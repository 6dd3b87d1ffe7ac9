"""Real models for tests, demos and benchmarks: PP-OCRv4 (``rapidocr-onnxruntime``), silero-vad.

Core infrastructure, not an application: the tests, the benchmarks and the apps
(``mnnpy.apps``) fetch models through it, and the GPU backends' on-disk caches live
under its ``cache_dir()``.

Each wheel (a zip file) is fetched once with ``pip download --no-deps`` into a cache
directory, its sha256 checked, and its ONNX members extracted on first use (each checked).
``rapidocr-onnxruntime==1.4.4`` (``ocr_model_path(kind)``) holds three models:

- ``det``: PP-OCRv4 text detection (DB), ``x: (N, 3, H, W) float32`` with H, W multiples
  of 32 -> probability map ``(N, 1, H, W)``.
- ``rec``: PP-OCRv4 text recognition (CTC), ``x: (N, 3, 48, W) float32`` ->
  ``(N, W / 8, num_classes)`` softmax; metadata key ``character`` holds the alphabet.
- ``cls``: mobile v2.0 text direction classifier, ``x: (N, 3, 48, 192)`` -> ``(N, 2)``
  (labels "0", "180").

``silero-vad==6.2.3`` (``silero_model_path(name)``) holds six exports of the silero
voice-activity detector, named by their file names in ``SILERO_MODELS``
(``"silero_vad.onnx"``, ...); ``mnnpy.apps.vad`` describes each one's interface and runs them.

>>> from mnnpy.models import ocr_model_path, ocr_mnnpy_path
>>> ocr_model_path("det")      # .../rapidocr-1.4.4/ch_PP-OCRv4_det_infer.onnx
>>> ocr_mnnpy_path("rec")      # converted, cached beside it (with its sha256), redone when the
...                            # converter changes or the cached file does not match its sha256
>>> silero_model_path("silero_vad.onnx")   # .../silero-vad-6.2.3/silero_vad.onnx
>>> silero_mnnpy_path("silero_vad_16k_sequence.onnx")   # converted and cached the same way

Cache directory: ``$MNNPY_CACHE`` when set, else ``platformdirs.user_cache_dir("mnnpy")``.
Every file is written to a temporary name and renamed, so concurrent processes and
interrupted downloads never leave a half-written file under its final name. Failures
(no network, no pip, a bad checksum) raise ``ModelFetchError``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mnnpy.errors import MnnpyError
from mnnpy.files import atomic_write, open_regular, read_regular
from mnnpy.log import get_logger

MAX_MODEL_BYTES = 1 << 31  # bytes: a cached conversion larger than this is converted again, not read
_log = get_logger("cache")


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel on PyPI that carries models: ``project==version``, its file name and sha256;
    ``folder`` is its directory under ``cache_dir()``."""

    project: str
    version: str
    filename: str
    sha256: str
    folder: str


RAPIDOCR_WHEEL = Wheel(
    "rapidocr-onnxruntime",
    "1.4.4",
    "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
    "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
    "rapidocr-1.4.4",
)
SILERO_WHEEL = Wheel(
    "silero-vad",
    "6.2.3",
    "silero_vad-6.2.3-py3-none-any.whl",
    "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    "silero-vad-6.2.3",
)
# the rapidocr wheel's names, as before the second wheel arrived
WHEEL_PROJECT, WHEEL_VERSION = RAPIDOCR_WHEEL.project, RAPIDOCR_WHEEL.version
WHEEL_NAME, WHEEL_SHA256 = RAPIDOCR_WHEEL.filename, RAPIDOCR_WHEEL.sha256

#: kind -> (member path inside the rapidocr wheel, sha256 of the member)
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

#: export name -> (member path inside the silero-vad wheel, sha256 of the member)
SILERO_MODELS: dict[str, tuple[str, str]] = {
    name: (f"silero_vad/data/{name}", digest)
    for name, digest in (
        ("silero_vad.onnx", "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"),
        ("silero_vad_16k_op15.onnx", "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49"),
        ("silero_vad_half.onnx", "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769"),
        ("silero_vad_op18_ifless.onnx", "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28"),
        ("silero_vad_openvino_16k.onnx", "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87"),
        ("silero_vad_16k_sequence.onnx", "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85"),
    )
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


def _wheel_dir(wheel: Wheel) -> Path:
    d = cache_dir() / wheel.folder
    d.mkdir(parents=True, exist_ok=True)
    return d


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a regular file's bytes (read in 1 MiB chunks); ``OSError`` (``mnnpy.files.
    NotRegularFileError`` for a named pipe or a device: never opened blocking) when unreadable."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified(path: Path, want: str) -> bool:
    """Whether ``path`` is a regular file whose sha256 is ``want`` (False when absent or unreadable)."""
    try:
        return sha256_file(path) == want
    except OSError:
        return False


def download_wheel(wheel: Wheel) -> Path:
    """Path of the verified ``wheel`` in the cache, downloading it with pip when absent.

    Raises ``ModelFetchError`` when pip fails (e.g. no network) or the sha256 differs;
    nothing unverified is kept.
    """
    import subprocess  # here, not at import: cache_dir() is on every session's path (7 ms)
    import tempfile

    spec = f"{wheel.project}=={wheel.version}"
    target = _wheel_dir(wheel) / wheel.filename
    if _verified(target, wheel.sha256):
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
            spec,
        ]
        try:
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelFetchError(f"could not run pip to download {spec}: {e}") from e
        got = Path(tmp) / wheel.filename
        if proc.returncode != 0 or not got.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ModelFetchError(
                f"pip could not download {spec} (exit {proc.returncode}); "
                f"is the network (PyPI) reachable? pip said: {' | '.join(tail)}"
            )
        digest = sha256_file(got)
        if digest != wheel.sha256:
            raise ModelFetchError(f"{wheel.filename}: sha256 {digest} differs from the expected {wheel.sha256}")
        os.replace(got, target)
    return target


def fetch_wheel() -> Path:
    """Path of the verified rapidocr wheel in the cache (``download_wheel(RAPIDOCR_WHEEL)``)."""
    return download_wheel(RAPIDOCR_WHEEL)


def fetch_silero_wheel() -> Path:
    """Path of the verified silero-vad wheel in the cache (``download_wheel(SILERO_WHEEL)``)."""
    return download_wheel(SILERO_WHEEL)


def _member_path(wheel: Wheel, fetch, member: str, want: str) -> Path:
    """``member`` of ``wheel`` extracted into its cache folder and checked against ``want``
    (hex sha256); ``fetch()`` gives the wheel's path and runs only when the member is not cached."""
    import zipfile

    target = _wheel_dir(wheel) / Path(member).name
    if _verified(target, want):
        return target
    path = fetch()
    try:
        with zipfile.ZipFile(path) as z:
            data = z.read(member)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise ModelFetchError(f"cannot read {member} from {path}: {e}") from e
    digest = hashlib.sha256(data).hexdigest()
    if digest != want:
        raise ModelFetchError(f"{member}: sha256 {digest} differs from the expected {want}")
    atomic_write(target, data)
    return target


def ocr_model_path(kind: str) -> Path:
    """Path of the verified ONNX model ``kind`` ("det", "rec" or "cls"), fetched on first use."""
    if kind not in OCR_MODELS:
        raise ModelFetchError(f"unknown OCR model {kind!r}; choose one of {sorted(OCR_MODELS)}")
    return _member_path(RAPIDOCR_WHEEL, fetch_wheel, *OCR_MODELS[kind])


def silero_model_path(name: str) -> Path:
    """Path of the verified silero-vad export ``name`` (a key of ``SILERO_MODELS``, e.g.
    ``"silero_vad.onnx"``), fetched on first use; ``ModelFetchError`` for an unknown name."""
    if name not in SILERO_MODELS:
        raise ModelFetchError(f"unknown silero-vad model {name!r}; choose one of {sorted(SILERO_MODELS)}")
    return _member_path(SILERO_WHEEL, fetch_silero_wheel, *SILERO_MODELS[name])


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
        want = read_regular(_sidecar(path), 64 + 2)
        data = read_regular(path, MAX_MODEL_BYTES)
    except (OSError, ValueError):  # unreadable, not a regular file, too large
        return False
    if want is None or data is None:
        return False
    want = want.decode("ascii", "replace").strip()
    return hashlib.sha256(data).hexdigest() == want


def converted_path(onnx_path: Path) -> Path:
    """``onnx_path`` converted to ``.mnnpy``, cached beside it; converted only when not cached.

    The file name carries ``converter_fingerprint()``; stale conversions are removed. The
    sha256 of the converted bytes is kept beside it (``<name>.mnnpy.sha256``, written after
    the model); a cached file whose bytes do not match it (truncated, corrupted) or that
    lacks it is converted again. Conversion errors (``UnsupportedOperatorError``...)
    propagate unchanged, and nothing is cached for them.
    """
    from mnnpy.converter import convert

    target = onnx_path.with_name(f"{onnx_path.stem}.{converter_fingerprint()}.mnnpy")
    if _cached_conversion_ok(target):
        _log.debug("converted model %s: hit", target)
        return target
    _log.info("converted model %s: miss, converting %s", target, onnx_path)
    data = convert(str(onnx_path))
    atomic_write(target, data)
    atomic_write(_sidecar(target), hashlib.sha256(data).hexdigest().encode("ascii") + b"\n")
    for pattern in (f"{onnx_path.stem}.*.mnnpy", f"{onnx_path.stem}.*.mnnpy.sha256"):
        for old in onnx_path.parent.glob(pattern):
            if old not in (target, _sidecar(target)):
                old.unlink(missing_ok=True)
    return target


def ocr_mnnpy_path(kind: str) -> Path:
    """Path of OCR model ``kind`` converted to ``.mnnpy`` (``converted_path``: cached, checked)."""
    return converted_path(ocr_model_path(kind))


def silero_mnnpy_path(name: str) -> Path:
    """Path of silero-vad export ``name`` converted to ``.mnnpy`` (``converted_path``: cached,
    checked). Converts on first use only: an export the converter cannot take raises its
    ``UnsupportedOperatorError`` then (the exports with ``If`` need a converter that takes it)."""
    return converted_path(silero_model_path(name))


def main(argv: list[str] | None = None) -> None:
    """``python -m mnnpy.models``: fetch the OCR models and the silero-vad exports; print their paths."""
    import argparse

    argparse.ArgumentParser(
        prog="python -m mnnpy.models",
        description="Fetch the PP-OCRv4 det/rec/cls ONNX models and the silero-vad exports (pinned wheels, "
        f"SHA-256 checked) into the mnnpy cache ({cache_dir()}; $MNNPY_CACHE moves it) and print their paths.",
    ).parse_args(argv)
    for kind in OCR_MODELS:
        print(f"{kind}: {ocr_model_path(kind)}")
    for name in SILERO_MODELS:
        print(f"{name}: {silero_model_path(name)}")


if __name__ == "__main__":
    main()

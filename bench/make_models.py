"""Write MobileNetV2 and ResNet-18 (``mnnpy.reference_models``: ONNX, opset 13, seeded weights) as files.

python bench/make_models.py [--out bench/out] [--ppocr]   # writes mobilenet_v2.onnx, resnet18.onnx

``--ppocr``: also ``ppocr_det.onnx``, ``ppocr_rec.onnx``, ``ppocr_cls.onnx``, copies of PP-OCRv4's
models as ``mnnpy.models.ocr_model_path`` gives them (fetched once from the pinned
``rapidocr-onnxruntime`` wheel into the mnnpy cache, SHA-256 checked): the five models of
``bench_compile_cache.py`` and ``bench_auto.py``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import onnx

from mnnpy.reference_models import MODELS, mobilenet_v2, resnet18

__all__ = ["MODELS", "mobilenet_v2", "resnet18", "main"]


def main(argv: list[str] | None = None) -> None:
    """Write every model in ``MODELS`` as ``<out>/<name>.onnx``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(Path(__file__).parent / "out"), help="directory (default bench/out)")
    p.add_argument("--ppocr", action="store_true", help="also copy PP-OCRv4 det/rec/cls there as ppocr_*.onnx (fetched once)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        path = out / f"{name}.onnx"
        onnx.save(build(), path)
        print(f"wrote {path}")
    if args.ppocr:
        from mnnpy.models import OCR_MODELS, ocr_model_path

        for kind in OCR_MODELS:
            path = out / f"ppocr_{kind}.onnx"
            shutil.copyfile(ocr_model_path(kind), path)
            print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Write MobileNetV2 and ResNet-18 (``mnnpy.reference_models``: ONNX, opset 13, seeded weights) as files.

python bench/make_models.py [--out bench/out]   # writes mobilenet_v2.onnx, resnet18.onnx
"""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx

from mnnpy.reference_models import MODELS, mobilenet_v2, resnet18

__all__ = ["MODELS", "mobilenet_v2", "resnet18", "main"]


def main(argv: list[str] | None = None) -> None:
    """Write every model in ``MODELS`` as ``<out>/<name>.onnx``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(Path(__file__).parent / "out"), help="directory (default bench/out)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        path = out / f"{name}.onnx"
        onnx.save(build(), path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

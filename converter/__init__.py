"""ONNX -> mnnpy converter: ``convert("model.onnx", "model.mnnpy")`` or ``mnnpy convert``.

Pipeline: import (one converter function per ONNX op, opsets 7..newest, canonical
forms) -> optimise (constant folding, BatchNormalization into Conv, activation into
Conv, dead-code elimination) -> write (``mnnpy.model_file``, then loaded back to check it).
"""

from __future__ import annotations

import os
import time

import onnx

import mnnpy
from mnnpy import model_file
from mnnpy.converter.importer import import_onnx
from mnnpy.converter.optimize import optimize
from mnnpy.errors import InputError, ModelFormatError
from mnnpy.ir import Net
from mnnpy.log import get_logger

_log = get_logger("convert")

PRODUCER = "mnnpy.converter"


def to_net(model: str | os.PathLike | bytes | onnx.ModelProto, optimize_graph: bool = True) -> Net:
    """ONNX model (path, bytes or ModelProto) -> Net. Raises ``ModelFormatError``/``UnsupportedOperatorError``."""
    if isinstance(model, onnx.ModelProto):
        proto = model
    else:
        try:
            proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(os.fspath(model))
        except OSError as e:
            raise ModelFormatError(f"cannot read ONNX model: {e}") from e
        except Exception as e:  # protobuf's DecodeError and friends
            raise ModelFormatError(f"not a valid ONNX model: {type(e).__name__}: {e}") from e
    t0 = time.perf_counter()
    net = import_onnx(proto)
    if optimize_graph:
        optimize(net)
    _log.info("%d ONNX nodes -> %d ops in %.1f ms", len(proto.graph.node), len(net.main.ops), (time.perf_counter() - t0) * 1e3)
    net.producer_name = PRODUCER
    net.producer_version = mnnpy.__version__
    return net


def serialize(net: Net) -> bytes:
    """``net`` -> ``.mnnpy`` bytes, checked by loading them back with ``model_file.load``.

    Raises ``ModelFormatError`` (naming what the loader rejects) instead of returning
    bytes the loader would refuse: an invalid ONNX graph (a tensor nothing defines, a cycle,
    two producers of one tensor) or a converter bug.
    """
    data = model_file.serialize(net)
    try:
        model_file.load(data)
    except ModelFormatError as e:
        raise ModelFormatError(
            f"the converted model does not load back: {e} (the ONNX graph itself may be invalid: "
            "onnx.checker.check_model tells; otherwise this is a converter bug)"
        ) from e
    return data


def write(data: bytes, output: str | os.PathLike) -> None:
    """Write ``data`` to the file ``output``; ``InputError`` ("cannot write <path>: <reason>") on failure."""
    try:
        with open(output, "wb") as f:
            f.write(data)
    except OSError as e:
        raise InputError(f"cannot write {os.fspath(output)}: {e.strerror or e}") from e


def convert(model, output: str | os.PathLike | None = None, optimize_graph: bool = True) -> bytes:
    """Convert an ONNX model to ``.mnnpy`` bytes (verified by loading them back), written to ``output`` when given."""
    data = serialize(to_net(model, optimize_graph))
    if output is not None:
        write(data, output)
    return data


__all__ = ["convert", "to_net", "serialize", "write", "PRODUCER"]

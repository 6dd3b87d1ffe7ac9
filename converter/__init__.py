"""ONNX -> mnnpy converter: ``convert("model.onnx", "model.mnnpy")`` or ``mnnpy convert``.

Pipeline: import (one converter function per ONNX op, opsets 7..newest, canonical
forms) -> optimise (constant folding, BatchNormalization into Conv, activation into
Conv, dead-code elimination) -> write (``mnnpy.model_file``, then loaded back to check it).
"""

from __future__ import annotations

import errno
import os
import stat
import time

import onnx
from onnx import external_data_helper

import mnnpy
from mnnpy import model_file
from mnnpy.converter.importer import import_onnx
from mnnpy.converter.optimize import optimize
from mnnpy.errors import InputError, ModelFormatError
from mnnpy.files import atomic_write
from mnnpy.ir import Net
from mnnpy.log import get_logger
from mnnpy.ops import get_schema

_log = get_logger("convert")

PRODUCER = "mnnpy.converter"


MAX_ONNX_BYTES = 2**31 - 1  # protobuf's limit on one serialized message (larger models keep weights outside)


def read_onnx(path: str | os.PathLike) -> onnx.ModelProto:
    """The ONNX model at ``path``, with its external data (files beside it) loaded.

    Reads at most ``MAX_ONNX_BYTES``: ``ModelFormatError`` for something that is not a
    regular file (a device such as ``/dev/zero``, a pipe, a folder), a larger file, a bad
    protobuf or bad external data (missing, outside the model's folder, shorter than
    declared: onnx's checks); ``ModelFormatError`` also for a path that cannot be opened."""
    where = os.fspath(path) if isinstance(path, (str, os.PathLike)) else repr(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a pipe must not block the open
    except (OSError, ValueError, TypeError) as e:
        raise ModelFormatError(f"cannot read ONNX model {where}: {e}") from e
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ONNX_BYTES:
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelFormatError(f"cannot read ONNX model {where}: not a regular file")
        raise ModelFormatError(f"ONNX model {where} has {info.st_size} bytes, more than protobuf reads ({MAX_ONNX_BYTES})")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_ONNX_BYTES + 1)
    if len(data) > MAX_ONNX_BYTES:
        raise ModelFormatError(f"ONNX model {where} grew past {MAX_ONNX_BYTES} bytes while being read")
    proto = _parse(data)
    try:
        external_data_helper.load_external_data_for_model(proto, os.path.dirname(os.path.abspath(where)))
    except (OSError, ValueError, TypeError, onnx.checker.ValidationError) as e:
        raise ModelFormatError(f"ONNX model {where}: cannot load its external data: {e}") from e
    return proto


def _parse(data: bytes) -> onnx.ModelProto:
    try:
        return onnx.load_model_from_string(data)
    except Exception as e:  # protobuf's DecodeError and friends
        raise ModelFormatError(f"not a valid ONNX model: {type(e).__name__}: {e}") from e


def to_net(model: str | os.PathLike | bytes | onnx.ModelProto, optimize_graph: bool = True) -> Net:
    """ONNX model (path, bytes or ModelProto) -> Net. Raises ``ModelFormatError``/``UnsupportedOperatorError``.

    A path is read by ``read_onnx`` (bounded, external data beside it); bytes and a
    ``ModelProto`` must hold all their data (``ModelFormatError`` for external data).
    Before the optimisation passes every op is checked against its schema (input and
    output counts, attribute names, types and choices), so that the passes see only
    well-formed ops; a pass that still fails raises ``ModelFormatError`` naming it."""
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model))
    else:
        proto = read_onnx(model)
    t0 = time.perf_counter()
    net = import_onnx(proto)
    if optimize_graph:
        check_ops(net)
        try:
            optimize(net)
        except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError, AttributeError) as e:
            raise ModelFormatError(
                f"optimising the converted graph failed: {type(e).__name__}: {e} (the ONNX graph may be invalid: "
                "onnx.checker.check_model tells; otherwise this is a converter bug)"
            ) from e
    _log.info("%d ONNX nodes -> %d ops in %.1f ms", len(proto.graph.node), len(net.main.ops), (time.perf_counter() - t0) * 1e3)
    net.producer_name = PRODUCER
    net.producer_version = mnnpy.__version__
    return net


def check_ops(net: Net) -> None:
    """Check each op of every graph of ``net`` against its schema: input and output counts
    and attributes (names, types, choices; ``OpSchema.resolve_attrs``), as loading will.
    Raises ``ModelFormatError`` naming the op."""
    for g in net.graphs:
        for op in g.ops:
            schema = get_schema(op.type)
            where = f"graph '{g.name}': op '{op.name}'"
            if schema is None:
                raise ModelFormatError(f"{where}: unknown op type '{op.type}' (a converter bug)")
            schema.check_arity(len(op.inputs), len(op.outputs), where)
            schema.resolve_attrs(op.attrs, where)


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
    """Write ``data`` to the file ``output`` atomically (a temporary file beside it renamed over
    it, ``mnnpy.files.atomic_write``: a process that has the old file loaded keeps it whole);
    ``InputError`` ("cannot write <path>: <reason>") on failure."""
    try:
        atomic_write(output, data, private=False, devices_in_place=True)
    except OSError as e:
        why = " (a named pipe with no reader)" if e.errno == errno.ENXIO else ""
        raise InputError(f"cannot write {os.fspath(output)}: {e.strerror or e}{why}") from e


def convert(model, output: str | os.PathLike | None = None, optimize_graph: bool = True) -> bytes:
    """Convert an ONNX model to ``.mnnpy`` bytes (verified by loading them back), written to ``output`` when given."""
    data = serialize(to_net(model, optimize_graph))
    if output is not None:
        write(data, output)
    return data


__all__ = ["convert", "to_net", "read_onnx", "serialize", "write", "PRODUCER", "MAX_ONNX_BYTES"]

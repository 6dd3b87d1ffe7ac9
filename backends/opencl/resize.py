"""OpenCL Resize (ONNX operators.md #Resize, opset-18 form after the converter): nearest and
linear (bilinear) over the last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)`` (NCHW: H, W).

The source index (and linear weights) of every output row and column is computed at
resize with the CPU backend's rules (``mnnpy.backends.cpu.ops.resize``: coordinate
transformation modes, nearest rounding modes), uploaded as small int tables; the kernels
(``shaders/opencl/resize.cl``) only gather. Falls back for cubic, ``antialias``,
``exclude_outside``, ``tf_crop_and_resize`` (extrapolation) and resizes of other axes.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.ops.resize import interp_taps, nearest_index, source_coords
from mnnpy.backends.opencl.registry import opencl_execution
from mnnpy.ops.registry import ShapeContext, get_schema
from mnnpy.ops.resize import resize_scales_sizes

SOURCE = "resize.cl"


def _context(op, infos, attrs) -> ShapeContext:
    """The Resize shape context of ``infos`` (one per op input, ``None`` where absent)."""
    return ShapeContext(
        op,
        get_schema(op.type),
        [None if i is None else i.shape for i in infos],
        [None if i is None else i.dtype for i in infos],
        [None if i is None else i.value for i in infos],
        attrs,
    )


def _expand(op, inputs) -> list:
    """The scheduler passes only present inputs: put ``None`` back where ``op.inputs`` is -1."""
    it = iter(inputs)
    return [next(it) if t >= 0 else None for t in op.inputs]


@opencl_execution("Resize")
class Resize(Execution):
    """Nearest (any ``nearest_mode``) or bilinear resize of the last two axes of X (float32)."""

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        mode, ctm = attrs["mode"], attrs["coordinate_transformation_mode"]
        if mode not in ("nearest", "linear"):
            return False, f"Resize mode '{mode}' (OpenCL runs nearest and linear)"
        if attrs.get("antialias", 0):
            return False, "Resize antialias (OpenCL has no antialias filter)"
        if attrs["exclude_outside"]:
            return False, "Resize exclude_outside=1 (OpenCL does not renormalise taps)"
        if ctm == "tf_crop_and_resize":
            return False, "Resize tf_crop_and_resize (roi crop with extrapolation_value) is not on OpenCL"
        infos = _expand(op, inputs)
        if any(i is not None and i.value is None for i in infos[1:]):
            return False, "Resize scales/sizes computed at run time"
        shape = infos[0].shape
        scales, sizes = resize_scales_sizes(_context(op, infos, attrs))
        moved = [a for a in range(len(shape)) if sizes[a] != shape[a] or scales[a] != 1]
        if any(a < len(shape) - 2 for a in moved):
            return False, f"Resize of axes {moved} (OpenCL resizes only the last two axes, H and W)"
        return True, ""

    def _axis(self, n_in: int, n_out: int, scale: float, linear: bool) -> np.ndarray:
        """The table of one axis: int32 indices (nearest) or (lo, hi, w_lo bits, w_hi bits) rows (linear)."""
        a = self.attrs
        if n_out == n_in and scale == 1:
            idx = np.arange(n_out)
            if not linear:
                return idx.astype(np.int32)
            w = np.stack([np.ones(n_out), np.zeros(n_out)])
            idx = np.stack([idx, idx])
        else:
            c = source_coords(a["coordinate_transformation_mode"], n_out, n_in, scale, (0.0, 1.0))
            if not linear:
                return nearest_index(c, a["nearest_mode"], n_in).astype(np.int32)
            idx, w = interp_taps(c, "linear", n_in, a["cubic_coeff_a"], 0)
        bits = w.astype(np.float32).view(np.int32)
        return np.ascontiguousarray(np.stack([idx[0], idx[1], bits[0], bits[1]], axis=1).astype(np.int32))

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        scales, sizes = resize_scales_sizes(_context(self.op, self.input_infos, self.attrs))
        r = len(x.shape)
        ih, iw = (x.shape[-2] if r >= 2 else 1), x.shape[-1]
        oh, ow = (y.shape[-2] if r >= 2 else 1), y.shape[-1]
        sh = scales[-2] if r >= 2 else 1.0
        planes = math.prod(x.shape[:-2])
        linear = self.attrs["mode"] == "linear"
        # kept on self: the device tables must live as long as the launch
        self.htab = self.backend.constant(self._axis(ih, oh, sh, linear))
        self.wtab = self.backend.constant(self._axis(iw, ow, scales[-1], linear))
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += tuple(np.int32(v) for v in (ih, iw, oh, ow, planes)) + (self.htab.buffer, self.wtab.buffer)
        name = "resize_linear" if linear else "resize_nearest"
        self.launch = self.backend.launch(SOURCE, name, [], args, (-(-ow // 4), oh, planes))  # 4 outputs per work item

    def on_execute(self, inputs, outputs):
        self.launch()

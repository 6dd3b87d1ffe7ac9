"""Vision ops against onnxruntime: MaxUnpool, Col2Im, GridSample, RoiAlign,
NonMaxSuppression, AffineGrid (odd sizes, every mode/padding/alignment)."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand


def _model(op, inputs, inits=None, opset=20, outputs=("y",), names=None, **attrs):
    node = helper.make_node(op, names or (list(inputs) + list(inits or {})), list(outputs), **attrs)
    return make_model([node], inputs, list(outputs), initializers=inits, opset=opset)


@pytest.mark.parametrize("shape,kernel,strides,pads", [((8, 6), [2, 2], [2, 2], None), ((9, 7), [3, 2], [2, 1], [1, 0, 1, 0])])
def test_maxunpool_after_maxpool(rng, shape, kernel, strides, pads):
    x = rand(rng, 2, 3, *shape)
    pool_attrs = {"kernel_shape": kernel, "strides": strides}
    if pads:
        pool_attrs["pads"] = pads
    pool = helper.make_node("MaxPool", ["x"], ["p", "i"], **pool_attrs)
    unpool = helper.make_node("MaxUnpool", ["p", "i"], ["y"], **pool_attrs)
    check(make_model([pool, unpool], {"x": x}, ["y"], opset=11), {"x": x}, **EXACT)


@pytest.mark.parametrize(
    "image,block,attrs",
    [
        ([5, 5], [2, 2], {}),
        ([7, 6], [3, 2], {"strides": [2, 1]}),
        ([6, 7], [2, 3], {"pads": [1, 0, 1, 2], "dilations": [2, 1]}),
        ([4, 5, 3], [2, 2, 1], {}),
    ],
)
def test_col2im(rng, image, block, attrs):
    n = len(image)
    dil = attrs.get("dilations", [1] * n)
    pads = attrs.get("pads", [0] * 2 * n)
    strides = attrs.get("strides", [1] * n)
    nb = [(image[i] + pads[i] + pads[n + i] - (block[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(n)]
    x = rand(rng, 2, 3 * int(np.prod(block)), int(np.prod(nb)))
    inits = {"img": np.array(image, np.int64), "blk": np.array(block, np.int64)}
    check(_model("Col2Im", {"x": x}, inits, 18, **attrs), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(rng, mode, padding, align):
    x = rand(rng, 2, 3, 7, 6)
    grid = rng.uniform(-1.4, 1.4, (2, 5, 4, 2)).astype(np.float32)
    m = _model("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode=padding, align_corners=align)
    check(m, {"x": x, "grid": grid}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset16(rng, mode):
    x = rand(rng, 1, 2, 5, 8)
    grid = rng.uniform(-1.2, 1.2, (1, 3, 7, 2)).astype(np.float32)
    check(_model("GridSample", {"x": x, "grid": grid}, opset=16, mode=mode), {"x": x, "grid": grid}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_grid_sample_3d(rng, mode, padding):
    x = rand(rng, 1, 2, 4, 5, 3)
    grid = rng.uniform(-1.1, 1.1, (1, 3, 2, 4, 3)).astype(np.float32)
    m = _model("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode=padding)
    check(m, {"x": x, "grid": grid}, **ACCUMULATE)


@pytest.mark.parametrize(
    "attrs,opset",
    [
        ({}, 16),
        ({"coordinate_transformation_mode": "output_half_pixel"}, 16),
        ({"output_height": 3, "output_width": 4, "sampling_ratio": 2, "spatial_scale": 0.5}, 16),
        ({"output_height": 2, "output_width": 3}, 10),
    ],
)
def test_roi_align(rng, attrs, opset):
    x = rand(rng, 2, 3, 10, 12)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.2, 7.1, 8.3], [3, 1, 11, 4], [-2, -1, 3, 2]], np.float32)
    bidx = np.array([0, 1, 1, 0], np.int64)
    feeds = {"x": x, "rois": rois, "b": bidx}
    check(_model("RoiAlign", feeds, opset=opset, **attrs), feeds, **ACCUMULATE)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("thresholds", [(3, 0.5, None), (10, 0.3, 0.2), (2, 0.0, 0.5)])
def test_non_max_suppression(rng, center, thresholds):
    max_out, iou, score = thresholds
    corners = rng.uniform(0, 10, (2, 17, 4)).astype(np.float32)
    scores = rng.random((2, 3, 17)).astype(np.float32)
    inits = {"max": np.array([max_out], np.int64), "iou": np.array([iou], np.float32)}
    if score is not None:
        inits["score"] = np.array([score], np.float32)
    m = _model("NonMaxSuppression", {"boxes": corners, "scores": scores}, inits, 11, center_point_box=center)
    check(m, {"boxes": corners, "scores": scores}, **EXACT)


@pytest.mark.parametrize("size,align", [(s, a) for s in ([2, 3, 5, 4], [1, 1, 3, 4, 2]) for a in (0, 1)] + [([2, 1, 1, 3], 0)])
def test_affine_grid(rng, size, align):
    """(A size-1 dim with align_corners=1 is left out: onnxruntime puts it at +1, the ONNX
    reference and PyTorch at -1; mnnpy follows the reference.)"""
    n = len(size) - 2
    theta = rand(rng, size[0], n, n + 1)
    m = _model("AffineGrid", {"theta": theta}, {"size": np.array(size, np.int64)}, align_corners=align)
    check(m, {"theta": theta}, **ACCUMULATE)

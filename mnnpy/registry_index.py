"""Which module registers each key of the indexed registries (``mnnpy.registry``): registry
kind -> module of its package -> its keys (space-separated). Written by ``python -m
mnnpy.registry``; do not edit."""

INDEX = {
    "op schema": {
        "activation": (
            "Relu Clip LeakyRelu Sigmoid HardSigmoid HardSwish Tanh Swish Sqrt Abs Neg Exp Sign Log",
            "Reciprocal Floor Ceil Round Erf Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh",
            "Softplus Softsign Elu Selu Celu ThresholdedRelu Gelu Mish",
        ),
        "control_flow": ("If Loop Scan",),
        "conv": ("Conv ConvTranspose",),
        "elementwise": ("Identity Add Sub Mul Div Pow",),
        "extra": (
            "BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Shrink ReverseSequence Compress Unique Det",
            "RMSNormalization CenterCropPad",
        ),
        "integer": ("MatMulInteger ConvInteger QLinearMatMul QLinearConv",),
        "math_ops": (
            "Not IsNaN IsInf And Or Xor Equal Greater GreaterOrEqual Less LessOrEqual BitShift Mod",
            "PRelu Max Min Mean Sum Where CastLike",
        ),
        "movement": (
            "Expand Tile Range GatherElements GatherND ScatterND ScatterElements OneHot DepthToSpace",
            "SpaceToDepth Trilu CumSum NonZero EyeLike Size Einsum",
        ),
        "nn": ("BatchNormalization Softmax MatMul Gemm",),
        "norm": (
            "LogSoftmax Hardmax LayerNormalization InstanceNormalization GroupNormalization",
            "LpNormalization LRN MeanVarianceNormalization GlobalMaxPool LpPool QuantizeLinear",
            "DequantizeLinear",
        ),
        "pad": ("Pad",),
        "pool": ("AveragePool MaxPool GlobalAveragePool",),
        "recurrent": ("LSTM GRU RNN",),
        "reduce": ("ReduceMean",),
        "reductions": (
            "ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp",
            "ReduceSumSquare ArgMax ArgMin TopK",
        ),
        "resize": ("Resize",),
        "sequence": (
            "SequenceEmpty SequenceConstruct SequenceInsert SequenceAt SequenceLength SequenceErase",
            "ConcatFromSequence SplitToSequence",
        ),
        "shape_ops": ("Reshape Flatten Squeeze Unsqueeze Transpose Concat Shape Gather Cast ConstantOfShape",),
        "signal": ("HannWindow HammingWindow BlackmanWindow DFT STFT MelWeightMatrix",),
        "slice": ("Slice",),
        "split": ("Split",),
        "vision": ("MaxUnpool Col2Im GridSample RoiAlign NonMaxSuppression AffineGrid",),
    },
    "CPU execution": {
        "activation": (
            "Relu LeakyRelu Sigmoid HardSigmoid HardSwish Tanh Swish Sqrt Abs Neg Exp Sign Log",
            "Reciprocal Floor Ceil Round Erf Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh",
            "Softplus Softsign Elu Selu Celu ThresholdedRelu Gelu Mish Clip",
        ),
        "conv": ("Conv",),
        "conv_transpose": ("ConvTranspose",),
        "elementwise": ("Identity Add Sub Mul Div Pow",),
        "extra": (
            "BitwiseAnd BitwiseOr BitwiseXor Shrink ReverseSequence Compress Unique Det",
            "RMSNormalization CenterCropPad",
        ),
        "integer": ("MatMulInteger QLinearMatMul ConvInteger QLinearConv",),
        "math_ops": (
            "Not IsNaN BitwiseNot IsInf And Or Xor Equal Greater GreaterOrEqual Less LessOrEqual",
            "BitShift Mod PRelu Max Min Sum Mean Where CastLike",
        ),
        "movement": (
            "Expand Tile Range GatherElements GatherND ScatterND ScatterElements OneHot DepthToSpace",
            "SpaceToDepth Trilu CumSum NonZero EyeLike Size Einsum",
        ),
        "nn": ("BatchNormalization Softmax MatMul Gemm",),
        "norm": (
            "LogSoftmax Hardmax LayerNormalization InstanceNormalization GroupNormalization",
            "LpNormalization LRN MeanVarianceNormalization LpPool QuantizeLinear DequantizeLinear",
        ),
        "pad": ("Pad",),
        "pool": ("MaxPool AveragePool GlobalAveragePool GlobalMaxPool",),
        "recurrent": ("RNN GRU LSTM",),
        "reduce": ("ReduceMean",),
        "reductions": (
            "ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp",
            "ReduceSumSquare ArgMax ArgMin TopK",
        ),
        "resize": ("Resize",),
        "shape_ops": ("Reshape Flatten Squeeze Unsqueeze Transpose Concat Slice Shape Gather Cast ConstantOfShape",),
        "signal": ("HannWindow HammingWindow BlackmanWindow MelWeightMatrix DFT STFT",),
        "split": ("Split",),
        "vision": ("MaxUnpool Col2Im GridSample RoiAlign NonMaxSuppression AffineGrid",),
    },
    "CPU host kernel": {
        "sequence": (
            "SequenceEmpty SequenceConstruct SequenceInsert SequenceAt SequenceLength SequenceErase",
            "ConcatFromSequence SplitToSequence",
        ),
    },
}

/* Activations of mnnpy's Vulkan shaders (#include "activation.glsl"): the unary ops of
 * unary.comp and the fused activation act_() of gemm.comp and conv.comp.
 *
 * NaN propagates as in numpy. Each form that clamps tests isnan() itself: a compiler may
 * turn `v < lo ? lo : v` into a min/max instruction, which returns the other operand for
 * NaN (NVIDIA's driver does).
 *
 * act_(v) (where the includer defines FUSED_ACTIVATION after declaring the specialization
 * constants ACT, A0, A1): ACT 0 none, 1 Relu, 2 Clip(A0, A1), 3 LeakyRelu(A0), 4 Sigmoid,
 * 5 HardSigmoid(A0, A1), 6 HardSwish, 7 Tanh (Conv's `activation` attribute, written by the
 * converter's fusion pass).
 */
float clip_(float v, float lo, float hi) { return isnan(v) ? v : min(max(v, lo), hi); }
float relu_(float v) { return isnan(v) ? v : max(v, 0.0); }
float leaky_relu_(float v, float alpha) { return v < 0.0 ? v * alpha : v; }
float hard_sigmoid_(float v, float alpha, float beta) { return clip_(v * alpha + beta, 0.0, 1.0); }
float hard_swish_(float v) { return v * clip_(v * (1.0 / 6.0) + 0.5, 0.0, 1.0); }

/* sigmoid(v) = 1 / (1 + exp(-v)), evaluated on the side where exp does not overflow */
float sigmoid_(float v) {
    float e = exp(-abs(v));
    float s = 1.0 / (1.0 + e);
    return isnan(v) ? v : (v >= 0.0 ? s : e * s);
}

/* tanh(v) = sign(v) * (1 - 2 / (exp(2|v|) + 1)); a series near 0 (exact 0 at 0), +-1 for large |v| */
float tanh_(float v) {
    float a = abs(v);
    float t = a < 0.0625 ? a * (1.0 - a * a * (1.0 / 3.0 - a * a * (2.0 / 15.0))) : 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    return isnan(v) ? v : (v < 0.0 ? -t : t);
}

#ifdef FUSED_ACTIVATION
float act_(float v) {
    if (ACT == 1u) return relu_(v);
    if (ACT == 2u) return clip_(v, A0, A1);
    if (ACT == 3u) return leaky_relu_(v, A0);
    if (ACT == 4u) return sigmoid_(v);
    if (ACT == 5u) return hard_sigmoid_(v, A0, A1);
    if (ACT == 6u) return hard_swish_(v);
    if (ACT == 7u) return tanh_(v);
    return v;
}
#endif

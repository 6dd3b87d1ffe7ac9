#version 450
/* Elementwise unary ops of mnnpy's Vulkan backend: y[i] = F(x[i]) for i < n (float32).
 *
 * Variant macro (shaders/vulkan/manifest.json): OP_RELU | OP_SIGMOID | OP_TANH | OP_HARDSWISH
 *   | OP_HARDSIGMOID | OP_LEAKYRELU | OP_CLIP | OP_SQRT | OP_ABS | OP_NEG | OP_EXP | OP_SWISH
 *   | OP_IDENTITY (a copy; with fp16 storage the backend's fp32 <-> fp16 cast at partition borders).
 * Specialization constants: 0 local size x; 1, 2 the op's scalars P0, P1 (HardSigmoid alpha,
 *   beta; LeakyRelu alpha; Clip min, max).
 * Push constants: n (elements), x_off, y_off (offsets in elements from each binding's start).
 * Bindings: 0 x (read), 1 y (written). Dispatch: ceil(n / local) groups, split over x and y
 *   (gl_NumWorkGroups.x groups per row) when that exceeds the device's group-count limit.
 * NaN propagates as in numpy.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const float P0 = 0.0;
layout(constant_id = 2) const float P1 = 0.0;

FLOAT_IN(0, x)
FLOAT_OUT(1, y)
layout(push_constant) uniform Push { uint n; uint x_off; uint y_off; } pc;

#include "activation.glsl"

float F(float v) {
#if defined(OP_RELU)
    return relu_(v);
#elif defined(OP_SIGMOID)
    return sigmoid_(v);
#elif defined(OP_TANH)
    return tanh_(v);
#elif defined(OP_HARDSWISH)
    return hard_swish_(v);
#elif defined(OP_HARDSIGMOID)
    return hard_sigmoid_(v, P0, P1);
#elif defined(OP_LEAKYRELU)
    return leaky_relu_(v, P0);
#elif defined(OP_CLIP)
    return clip_(v, P0, P1);
#elif defined(OP_SQRT)
    return v < 0.0 ? nan_() : sqrt(v);
#elif defined(OP_ABS)
    return abs(v);
#elif defined(OP_NEG)
    return -v;
#elif defined(OP_EXP)
    return exp_accurate(v);
#elif defined(OP_IDENTITY)
    return v;
#elif defined(OP_SWISH)
    return v * sigmoid_(v);
#else
#error "unary.comp: define one OP_* macro"
#endif
}

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    y_st(pc.y_off + i, F(x_ld(pc.x_off + i)));
}

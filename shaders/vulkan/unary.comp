#version 450
/* Elementwise unary ops of mnnpy's Vulkan backend: y[i] = UNARY(x[i], P0, P1) for i < n (float32).
 *
 * Variant macro UNARY: act_<name> (variants unary_<name>, one per op of the activation table
 *   with a GPU expression; shaders/vulkan/build.py makes them from mnnpy/ops/activation.py), or
 *   copy_ (unary_identity in manifest.json: a copy; with fp16 storage the backend's
 *   fp32 <-> fp16 cast at partition borders).
 * Specialization constants: 0 local size x; 1, 2 the op's scalars P0, P1 (HardSigmoid alpha,
 *   beta; LeakyRelu, Swish alpha; Clip min, max).
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

float copy_(float v, float a0, float a1) { return v; }

#ifndef UNARY
#error "unary.comp: define UNARY, the function of the variant (act_<name> of activation.glsl, or copy_)"
#endif

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    y_st(pc.y_off + i, UNARY(x_ld(pc.x_off + i), P0, P1));
}

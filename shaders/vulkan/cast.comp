#version 450
/* Conversions of mnnpy's Vulkan backend: y[i] = CONVERT(x[i]) for i < n (ONNX operators.md #Cast,
 * #Not).
 *
 * Variant macros (shaders/vulkan/manifest.json): the dtypes SRC_<CODE> (x; float without one) and
 *   DST_<CODE> (y), storage.glsl: Cast between float32 (fp32 or fp16 storage), int32, int64 and
 *   bool (variants cast_to_<dst>_<src>, cast_to_<dst> from float32); float -> int truncates toward
 *   zero (out of range: undefined, as in ONNX), int64 -> int32 keeps the low 32 bits, anything ->
 *   bool is x != 0 (NaN included), bool -> number 0 or 1. NOT (variant not_bool): y = !x.
 * Specialization constants: 0 local size x.
 * Push constants: n (elements), x_off, y_off (offsets in elements from each binding's start).
 * Bindings: 0 x (read), 1 y (written). Dispatch as in unary.comp.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"

layout(local_size_x_id = 0) in;

SRC_IN(0, x)
DST_OUT(1, y)
layout(push_constant) uniform Push { uint n; uint x_off; uint y_off; } pc;

#if defined(NOT)
#define CONVERT(v) (!(v))
#elif defined(DST_BOOL)
#define CONVERT(v) (!((v) == SRC_T(0))) /* an ordered ==: NaN is not 0, so true */
#else
#define CONVERT(v) DST_T(v)
#endif

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    y_st(pc.y_off + i, CONVERT(x_ld(pc.x_off + i)));
}

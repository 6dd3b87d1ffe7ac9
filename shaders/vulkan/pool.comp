#version 450
/* Windowed pooling of mnnpy's Vulkan backend, NCHW float32 (ONNX operators.md MaxPool,
 * AveragePool). 1-D and 2-D pools run as 3-D with leading size-1 dims.
 *
 * Variant macro (shaders/vulkan/manifest_reduce.json): POOL_MAX | POOL_AVG.
 * Specialization constants: 0, 10, 11 local size (1-D dispatch: x only); 1 COUNT_INCLUDE_PAD.
 * Push constants (100 bytes): n (outputs), x_off, y_off (elements from each binding's start),
 *   in[3] (D, H, W of X), out[3] (of Y), k[3] kernel, st[3] strides, dil[3] dilations,
 *   pb[3] pads at the start, pe[3] pads at the end.
 * Bindings: 0 x (read), 1 y (written). One invocation per output i < n, i = ((c * OD + od) *
 *   OH + oh) * OW + ow (c over N * C); groups split over x and y as in unary.comp.
 * The window's taps along a dim are o * st - pb + t * dil, t < k; only taps inside X are read
 * (padding never is). MaxPool: max of the taps (-inf for a window of padding only; NaN
 * propagates as in numpy). AveragePool: sum / count, count = taps inside X, or with
 * COUNT_INCLUDE_PAD taps inside the explicitly padded input [-pb, in + pe) (ceil_mode
 * overhang never counts); a count of 0 divides by 1.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
#include "common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;
layout(constant_id = 1) const bool COUNT_INCLUDE_PAD = false;

FLOAT_IN(0, x)
FLOAT_OUT(1, y)
layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint y_off;
    int in_[3];
    int out_[3];
    int k[3];
    int st[3];
    int dil[3];
    int pb[3];
    int pe[3];
} pc;

/* taps [lo, hi) of k taps at start + t * d that fall inside [0, size) */
ivec2 tap_range(int start, int size, int k, int d) {
    int lo = start >= 0 ? 0 : (-start + d - 1) / d;
    int last = size - 1 - start; /* the highest offset from start still inside */
    int hi = last < 0 ? 0 : min(k, last / d + 1);
    return ivec2(lo, max(hi, lo));
}

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    uint rest = i;
    int o[3];
    for (int a = 2; a >= 0; --a) {
        uint sz = uint(pc.out_[a]);
        o[a] = int(rest % sz);
        rest /= sz;
    }
    const uint c = rest;
    int start[3];
    ivec2 r[3];
    for (int a = 0; a < 3; ++a) {
        start[a] = o[a] * pc.st[a] - pc.pb[a];
        r[a] = tap_range(start[a], pc.in_[a], pc.k[a], pc.dil[a]);
    }
    const int ih = pc.in_[1], iw = pc.in_[2];
    const uint base = pc.x_off + c * uint(pc.in_[0] * ih * iw);
#ifdef POOL_MAX
    float acc = -inf_();
#else
    float acc = 0.0;
#endif
    for (int a = r[0].x; a < r[0].y; ++a) {
        const int zd = start[0] + a * pc.dil[0];
        for (int b = r[1].x; b < r[1].y; ++b) {
            const uint row = base + uint((zd * ih + start[1] + b * pc.dil[1]) * iw + start[2]);
            for (int t = r[2].x; t < r[2].y; ++t) {
                float v = x_ld(row + uint(t * pc.dil[2]));
#ifdef POOL_MAX
                acc = (isnan(v) || v > acc) ? v : acc;
#else
                acc += v;
#endif
            }
        }
    }
#ifdef POOL_AVG
    int count = 1;
    for (int a = 0; a < 3; ++a) {
        ivec2 q = COUNT_INCLUDE_PAD ? tap_range(start[a] + pc.pb[a], pc.in_[a] + pc.pb[a] + pc.pe[a], pc.k[a], pc.dil[a]) : r[a];
        count *= q.y - q.x;
    }
    acc = acc / float(max(count, 1));
#elif !defined(POOL_MAX)
#error "pool.comp: define POOL_MAX or POOL_AVG"
#endif
    y_st(pc.y_off + i, acc);
}

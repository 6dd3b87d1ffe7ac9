#version 450
/* Resize (ONNX operators.md #Resize) of mnnpy's Vulkan backend over the last two axes of X
 * viewed as (P, IH, IW) -> Y (P, OH, OW), P = product of the leading axes (N*C for NCHW),
 * float32. The source rows/columns (and linear weights) of every output row and column are
 * computed at resize on the host with the CPU backend's coordinate rules
 * (backends/cpu/ops/resize.py), so every coordinate_transformation_mode and nearest_mode maps
 * exactly as on the CPU; the shader only gathers.
 *
 * Variant macros (shaders/vulkan/manifest_movement.json): NEAREST | LINEAR.
 * NEAREST: tab = [hidx[OH], widx[OW]] (int32): Y[p, h, w] = X[p, hidx[h], widx[w]].
 * LINEAR: tab = [OH rows, then OW rows] of 4 int32 each: (lo, hi, bits of w_lo, bits of w_hi):
 *   Y = wh_lo * (ww_lo X[lo, lo'] + ww_hi X[lo, hi']) + wh_hi * (ww_lo X[hi, lo'] + ww_hi X[hi, hi']).
 * Specialization constants: 0, 10, 11 local sizes (1-D: 64, 1, 1).
 * Push constants: n (= P*OH*OW), x_off, tab_off, y_off, IH, IW, OH, OW.
 * Bindings: 0 x (read), 1 tab (read), 2 y (written). One output per invocation, 1-D dispatch.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"

layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;

FLOAT_IN(0, x)
layout(std430, binding = 1) readonly buffer T { int tab[]; };
FLOAT_OUT(2, y)
layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint tab_off;
    uint y_off;
    uint ih;
    uint iw;
    uint oh;
    uint ow;
} pc;

void main() {
    uint j = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (j >= pc.n) return;
    uint w = j % pc.ow;
    uint t = j / pc.ow;
    uint h = t % pc.oh;
    uint p = t / pc.oh;
    uint plane = pc.x_off + p * pc.ih * pc.iw;
#if defined(NEAREST)
    uint r = uint(tab[pc.tab_off + h]);
    uint c = uint(tab[pc.tab_off + pc.oh + w]);
    y_st(pc.y_off + j, x_ld(plane + r * pc.iw + c));
#elif defined(LINEAR)
    uint th = pc.tab_off + 4u * h;
    uint tw = pc.tab_off + 4u * (pc.oh + w);
    uint r0 = plane + uint(tab[th]) * pc.iw, r1 = plane + uint(tab[th + 1u]) * pc.iw;
    uint c0 = uint(tab[tw]), c1 = uint(tab[tw + 1u]);
    float hl = intBitsToFloat(tab[th + 2u]), hr = intBitsToFloat(tab[th + 3u]);
    float wl = intBitsToFloat(tab[tw + 2u]), wr = intBitsToFloat(tab[tw + 3u]);
    float top = wl * x_ld(r0 + c0) + wr * x_ld(r0 + c1);
    float bot = wl * x_ld(r1 + c0) + wr * x_ld(r1 + c1);
    y_st(pc.y_off + j, hl * top + hr * bot);
#else
#error "resize.comp: define NEAREST or LINEAR"
#endif
}

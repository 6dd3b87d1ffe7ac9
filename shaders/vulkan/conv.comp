#version 450
/* 2-D convolution of mnnpy's Vulkan backend, NCHW float32 (ONNX Conv), bias and fused
 * activation. The 1x1 / stride 1 / unpadded / group 1 case runs on gemm.comp instead.
 *
 * Variant macros (shaders/vulkan/manifest_gemm.json): GENERAL | DEPTHWISE.
 *
 * GENERAL (any group): each invocation computes 4 output channels x VW output pixels along W
 *   (register blocking): per input channel and kernel tap one vec4 of weights (4 output
 *   channels) and VW inputs, 4*VW multiply-adds. Weights re-laid at resize as
 *   (G, MBg, Cg, KH, KW, 4): block mb = g*MBg + q holds output channels g*Mg + 4q .. 4q+3 of
 *   group g (zero where 4q+i >= Mg); bias padded likewise to (G*MBg, 4). The invocations of a
 *   work group share one block (work-group z), so their weight loads are uniform.
 *   Push constants (84 bytes): x_off, y_off, w_off, b_off (w/b in vec4s), C, H, W, M, OH, OW,
 *   Cg, Mg, MBg, G, SH, SW, PH, PW, DH, DW, NZ (= N*G*MBg).
 *   Dispatch: groups (ceil(ceil(OW/VW) / LX), ceil(OH / LY), NZ), local (LX, LY, S).
 *   S > 1 splits the input channels of each output block over S invocations (every S-th
 *   channel each; small outputs, where one invocation per block cannot fill a GPU), their
 *   partial sums added in shared memory.
 * DEPTHWISE (group == C == M): each invocation computes VW output pixels along W of one
 *   channel; per kernel row it loads the ROW inputs its VW windows span into registers once.
 *   Weights (C, KH, KW), bias (C). Stride SW and dilation DW along W are specialization
 *   constants (they size the row).
 *   Push constants (56 bytes): x_off, y_off, w_off, b_off, C, H, W, OH, OW, SH, PH, PW, DH,
 *   NZ (= N*C). Dispatch: groups (ceil(ceil(OW/VW) / LX), ceil(OH / LY), NZ).
 * Specialization constants: 0, 10, 11 local size; 1 ACT, 2 A0, 3 A1 (fused activation, as
 *   in gemm.comp); 4 KH, 5 KW (kernel); DEPTHWISE also 6 SW, 7 DW.
 * Bindings: 0 x, 1 weights, 2 bias (read), 3 y (written). Offsets in elements, 32-bit.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;
layout(constant_id = 1) const uint ACT = 0;
layout(constant_id = 2) const float A0 = 0.0;
layout(constant_id = 3) const float A1 = 0.0;
layout(constant_id = 4) const uint KH = 1;
layout(constant_id = 5) const uint KW = 1;

#define VW 4 /* output pixels along W per invocation */

#define FUSED_ACTIVATION
#include "activation.glsl"

FLOAT_IN(0, x)
FLOAT_OUT(3, y)

#if defined(GENERAL)
layout(std430, binding = 1) readonly buffer BufW { vec4 w4[]; };
layout(std430, binding = 2) readonly buffer BufB { vec4 b4[]; };
layout(push_constant) uniform Push {
    uint x_off, y_off, w_off, b_off;
    uint C, H, W, M, OH, OW;
    uint Cg, Mg, MBg, G;
    uint SH, SW, PH, PW, DH, DW;
    uint NZ;
} pc;

const uint S = gl_WorkGroupSize.z;                      /* input-channel split (1: none) */
const uint SLOTS = gl_WorkGroupSize.x * gl_WorkGroupSize.y; /* output blocks per work group */
shared vec4 part[SLOTS * S * VW];                         /* partial sums of a split */

void main() {
    const uint owb = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y, z = gl_WorkGroupID.z;
    const uint s = gl_LocalInvocationID.z;
    const uint ow0 = owb * VW;
    const bool valid = ow0 < pc.OW && oh < pc.OH;
    if (S == 1u && !valid) return; /* with a split every invocation reaches the barrier */
    const uint MB = pc.G * pc.MBg, n = z / MB, mb = z % MB, g = mb / pc.MBg, m0 = (mb % pc.MBg) * 4u;
    const uint H = pc.H, W = pc.W;

    vec4 acc[VW];
    const vec4 bias = s == 0u ? b4[pc.b_off + mb] : vec4(0.0);
    for (uint j = 0; j < VW; ++j) acc[j] = bias;
    const int ih0 = int(oh * pc.SH) - int(pc.PH), iw0 = int(ow0 * pc.SW) - int(pc.PW);
    const uint c0 = valid ? s : pc.Cg;                        /* this invocation's first channel */
    uint xc = pc.x_off + (n * pc.C + g * pc.Cg + c0) * H * W; /* plane of input channel c */
    uint wi = pc.w_off + (mb * pc.Cg + c0) * KH * KW;         /* vec4 of tap (c, 0, 0) */
    for (uint c = c0; c < pc.Cg; c += S, xc += S * H * W, wi += S * KH * KW) {
        for (uint kh = 0; kh < KH; ++kh) {
            const int ih = ih0 + int(kh * pc.DH);
            if (ih < 0 || ih >= int(H)) continue;
            const uint row = xc + uint(ih) * W;
            for (uint kw = 0; kw < KW; ++kw) {
                const vec4 wv = w4[wi + kh * KW + kw];
                for (uint j = 0; j < VW; ++j) {
                    const int iw = iw0 + int(kw * pc.DW + j * pc.SW);
                    const float xv = (iw >= 0 && iw < int(W)) ? x_ld(row + uint(iw)) : 0.0;
                    acc[j] = fma(vec4(xv), wv, acc[j]);
                }
            }
        }
    }
    if (S > 1u) { /* the S invocations of one output block meet in shared memory; the first stores */
        const uint slot = gl_LocalInvocationID.y * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
        for (uint j = 0; j < VW; ++j) part[(s * SLOTS + slot) * VW + j] = acc[j];
        barrier();
        if (s != 0u || !valid) return;
        for (uint t = 1; t < S; ++t)
            for (uint j = 0; j < VW; ++j) acc[j] += part[(t * SLOTS + slot) * VW + j];
    }
    for (uint i = 0; i < 4u; ++i) {
        if (m0 + i >= pc.Mg) break;
        const uint out_ = pc.y_off + ((n * pc.M + g * pc.Mg + m0 + i) * pc.OH + oh) * pc.OW + ow0;
        for (uint j = 0; j < VW; ++j) {
            if (ow0 + j < pc.OW) y_st(out_ + j, act_(acc[j][i]));
        }
    }
}

#elif defined(DEPTHWISE)
layout(constant_id = 6) const uint SW = 1;
layout(constant_id = 7) const uint DW = 1;
const uint ROW = (VW - 1) * SW + (KW - 1) * DW + 1; /* inputs spanned by VW windows of one row */

layout(std430, binding = 1) readonly buffer BufW { float w[]; };
layout(std430, binding = 2) readonly buffer BufB { float bias[]; };
layout(push_constant) uniform Push {
    uint x_off, y_off, w_off, b_off;
    uint C, H, W, OH, OW;
    uint SH, PH, PW, DH;
    uint NZ;
} pc;

void main() {
    const uint owb = gl_GlobalInvocationID.x, oh = gl_GlobalInvocationID.y, z = gl_WorkGroupID.z;
    const uint ow0 = owb * VW;
    if (ow0 >= pc.OW || oh >= pc.OH || z >= pc.NZ) return;
    const uint c = z % pc.C, H = pc.H, W = pc.W;
    float acc[VW];
    const float b0 = bias[pc.b_off + c];
    for (uint j = 0; j < VW; ++j) acc[j] = b0;
    const int ih0 = int(oh * pc.SH) - int(pc.PH), iw0 = int(ow0 * SW) - int(pc.PW);
    const uint plane = pc.x_off + z * H * W;
    const uint wc = pc.w_off + c * KH * KW;
    for (uint kh = 0; kh < KH; ++kh) {
        const int ih = ih0 + int(kh * pc.DH);
        if (ih < 0 || ih >= int(H)) continue;
        const uint row = plane + uint(ih) * W;
        float r[ROW];
        for (uint t = 0; t < ROW; ++t) {
            const int iw = iw0 + int(t);
            r[t] = (iw >= 0 && iw < int(W)) ? x_ld(row + uint(iw)) : 0.0;
        }
        for (uint kw = 0; kw < KW; ++kw) {
            const float wv = w[wc + kh * KW + kw];
            for (uint j = 0; j < VW; ++j) acc[j] = fma(r[j * SW + kw * DW], wv, acc[j]);
        }
    }
    const uint out_ = pc.y_off + (z * pc.OH + oh) * pc.OW + ow0;
    for (uint j = 0; j < VW; ++j) {
        if (ow0 + j < pc.OW) y_st(out_ + j, act_(acc[j]));
    }
}

#else
#error "conv.comp: define GENERAL or DEPTHWISE"
#endif

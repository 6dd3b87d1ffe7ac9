#version 450
/* ConvTranspose 2-D (ONNX operators.md #ConvTranspose) of mnnpy's Vulkan backend, NCHW
 * float32, gather form:
 *   Y[n, g*MG + m, oh, ow] = B[g*MG + m] + sum_{c, kh, kw} X[n, g*CG + c, ih, iw] * W[g*CG + c, m, kh, kw]
 * over the taps with oh = ih*SH - PH + kh*DH, ow = iw*SW - PW + kw*DW (ih, iw inside X).
 *
 * Register block: each invocation computes 4 output channels (one vec4) at PX = 4 output
 * columns of one phase, ow = ph + SW * (j0 + t), t = 0..3: they share every tap and weight
 * and read 4 neighbouring input columns iw0 + t.
 * Weights re-laid at resize as vec4 w[G][KH][KW][CG][MGP/4] (MGP = MG rounded up to 4, zero
 * padded), bias as vec4 bias[G][MGP/4] (zeros when absent).
 * Index shifts keep every dividend non-negative (GLSL leaves % of negative ints undefined):
 *   th = oh + sh_h - kh*DH with sh_h = PH + SH*kb_h, ih = th / SH - kb_h (likewise for W).
 * Specialization constants: 0, 10, 11 local sizes (64, 1, 1).
 * Variant macro (shaders/vulkan/manifest_movement.json): CONV_TRANSPOSE_2D (the only variant).
 * Push constants (104 bytes): x_off, w_off (vec4s), b_off (vec4s), y_off, C, IH, IW, M, OH,
 *   OW, G, CG, MG, NMB (= MGP/4), KH, KW, SH, SW, DH, DW, sh_h, kb_h, sh_w, kb_w, JB, zmax.
 * Bindings: 0 x, 1 w, 2 bias (read), 3 y (written).
 * Dispatch: groups (ceil(SW*JB / 64), min(OH, limit), min(N*G*NMB, limit)), JB =
 *   ceil(ceil(OW / SW) / PX); invocation x = q has phase q % SW and columns from j0 = PX*(q / SW);
 *   y and z loop over OH and N*G*NMB beyond the group counts.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"

#ifndef CONV_TRANSPOSE_2D
#error "conv_transpose.comp: define CONV_TRANSPOSE_2D (the one variant)"
#endif

layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;

FLOAT_IN(0, x)
layout(std430, binding = 1) readonly buffer W { vec4 w[]; };
layout(std430, binding = 2) readonly buffer B { vec4 bias[]; };
FLOAT_OUT(3, y)
layout(push_constant) uniform Push {
    int x_off;
    int w_off;
    int b_off;
    int y_off;
    int C;
    int IH;
    int IW;
    int M;
    int OH;
    int OW;
    int G;
    int CG;
    int MG;
    int NMB;
    int KH;
    int KW;
    int SH;
    int SW;
    int DH;
    int DW;
    int sh_h;
    int kb_h;
    int sh_w;
    int kb_w;
    int JB;
    int zmax;
} pc;

const int PX = 4;

void main() {
    int q = int(gl_GlobalInvocationID.x);
    if (q >= pc.SW * pc.JB) return;
    int ph = q % pc.SW;
    int j0 = (q / pc.SW) * PX;
    if (ph + pc.SW * j0 >= pc.OW) return;
    int hw = pc.IH * pc.IW;
    for (int oh = int(gl_GlobalInvocationID.y); oh < pc.OH; oh += int(gl_NumWorkGroups.y * gl_WorkGroupSize.y)) {
        for (int z = int(gl_WorkGroupID.z); z < pc.zmax; z += int(gl_NumWorkGroups.z)) {
            int mb = z % pc.NMB;
            int g = (z / pc.NMB) % pc.G;
            int n = z / (pc.NMB * pc.G);
            vec4 b = bias[pc.b_off + g * pc.NMB + mb];
            vec4 acc0 = b, acc1 = b, acc2 = b, acc3 = b;
            int xg = pc.x_off + (n * pc.C + g * pc.CG) * hw;
            for (int kh = 0; kh < pc.KH; ++kh) {
                int th = oh + pc.sh_h - kh * pc.DH;
                if (th % pc.SH != 0) continue;
                int ih = th / pc.SH - pc.kb_h;
                if (ih < 0 || ih >= pc.IH) continue;
                for (int kw = 0; kw < pc.KW; ++kw) {
                    int tw = ph + pc.sh_w - kw * pc.DW;
                    if (tw % pc.SW != 0) continue;
                    int iw0 = tw / pc.SW - pc.kb_w + j0;
                    if (iw0 + PX <= 0 || iw0 >= pc.IW) continue;
                    int xi = xg + ih * pc.IW + iw0;
                    int wi = pc.w_off + ((g * pc.KH + kh) * pc.KW + kw) * pc.CG * pc.NMB + mb;
                    if (iw0 >= 0 && iw0 + PX <= pc.IW) {
                        for (int c = 0; c < pc.CG; ++c) {
                            vec4 wv = w[wi];
                            acc0 += x_ld(xi) * wv;
                            acc1 += x_ld(xi + 1) * wv;
                            acc2 += x_ld(xi + 2) * wv;
                            acc3 += x_ld(xi + 3) * wv;
                            xi += hw;
                            wi += pc.NMB;
                        }
                    } else { /* a column block across the input's left or right edge */
                        bool v0 = iw0 >= 0 && iw0 < pc.IW, v1 = iw0 + 1 >= 0 && iw0 + 1 < pc.IW;
                        bool v2 = iw0 + 2 >= 0 && iw0 + 2 < pc.IW, v3 = iw0 + 3 >= 0 && iw0 + 3 < pc.IW;
                        for (int c = 0; c < pc.CG; ++c) {
                            vec4 wv = w[wi];
                            if (v0) acc0 += x_ld(xi) * wv;
                            if (v1) acc1 += x_ld(xi + 1) * wv;
                            if (v2) acc2 += x_ld(xi + 2) * wv;
                            if (v3) acc3 += x_ld(xi + 3) * wv;
                            xi += hw;
                            wi += pc.NMB;
                        }
                    }
                }
            }
            int m0 = mb * 4;
            int ow0 = ph + pc.SW * j0;
            int yrow = pc.y_off + ((n * pc.M + g * pc.MG + m0) * pc.OH + oh) * pc.OW;
            vec4 acc[PX] = vec4[PX](acc0, acc1, acc2, acc3);
            for (int k = 0; k < 4 && m0 + k < pc.MG; ++k) {
                int yk = yrow + k * pc.OH * pc.OW;
                for (int t = 0; t < PX; ++t) {
                    int ow = ow0 + pc.SW * t;
                    if (ow < pc.OW) y_st(yk + ow, acc[t][k]);
                }
            }
        }
    }
}

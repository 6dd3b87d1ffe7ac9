/* 2-D convolution, NCHW (ONNX Conv), bias and fused activation (ACT_* of common.h).
 * The 1x1 / stride 1 / no-pad case runs on gemm.cl instead.
 *
 * conv2d: general and grouped. Each work item computes 4 output channels x VW output
 *   pixels along W (register blocking): per input channel and kernel tap it reads one float4
 *   of weights (4 output channels) and VW inputs, and does 4*VW multiply-adds.
 *   Weights re-laid at resize as (G, MBg, Cg, KH, KW, 4): block mb = g*MBg + q holds output
 *   channels g*Mg + 4q .. 4q+3 of group g (zero where 4q+i >= Mg); bias padded likewise to
 *   (G*MBg*4). Work: (ceil(OW/VW), OH, N*G*MBg).
 *   -D SPLIT=S (small outputs, where those items cannot fill a GPU): S items share one output
 *   block, each summing every S-th input channel; the partial sums meet in local memory.
 *   Work group (S, 64/S, 1), work (S, ceil(OW/VW)*OH, N*G*MBg).
 * depthwise: group == C == M. Each work item computes VW output pixels along W of one
 *   channel; per kernel row it loads the ROW inputs the VW windows span once into registers.
 *   Weights (C, KH, KW), bias (C). Work: (ceil(OW/VW), OH, N*C). SW and DW are build options.
 *
 * Build options: -D KH, -D KW (kernel size), -D VW (pixels per item, default 4),
 * depthwise also -D SW, -D DW. Offsets in elements; 32-bit indexing.
 */
#ifndef VW
#define VW 4
#endif

/* weights and bias are fp32 in every precision (OpenCLBackend.weights) */
#define WLOAD4(p, i) vload4((i), (p))

#ifdef SPLIT
#define GY (64 / SPLIT) /* output blocks per work group (SPLIT, GY, 1): whole warps */
__kernel __attribute__((reqd_work_group_size(SPLIT, GY, 1)))
#else
__kernel
#endif
void conv2d(__global const store_t *x, int x_off, __global const float *w, __global const float *bias,
            __global store_t *y, int y_off, int C, int H, int W, int M, int OH, int OW, int Cg, int Mg, int MBg, int G, int SH,
            int SW_, int PH, int PW, int DH, int DW_, int NZ, float a0, float a1) {
#ifdef SPLIT
    /* the SPLIT items of a group share one output block and split its input channels */
    const int s = get_local_id(0), OWB = (OW + VW - 1) / VW;
    const int owb = get_global_id(1) % OWB, oh = get_global_id(1) / OWB, z = get_global_id(2);
#else
    const int s = 0, owb = get_global_id(0), oh = get_global_id(1), z = get_global_id(2);
#define SPLIT 1
#endif
    const int ow0 = owb * VW;
    const bool valid = ow0 < OW && oh < OH && z < NZ;
#if SPLIT == 1
    if (!valid) return;
#endif
    const int MB = G * MBg, n = z / MB, mb = z % MB, g = mb / MBg, m0 = (mb % MBg) * 4;

    float acc[4][VW];
    const float4 b4 = s == 0 && valid ? WLOAD4(bias, mb) : (float4)(0.0f);
#pragma unroll
    for (int j = 0; j < VW; ++j) {
        acc[0][j] = b4.x;
        acc[1][j] = b4.y;
        acc[2][j] = b4.z;
        acc[3][j] = b4.w;
    }
    const int ih0 = oh * SH - PH, iw0 = ow0 * SW_ - PW;
    int xc = x_off + (n * C + g * Cg + s) * H * W; /* channel plane of input channel c */
    int wi = (mb * Cg + s) * KH * KW;              /* float4 index of weight block (c, 0, 0) */
    for (int c = valid ? s : Cg; c < Cg; c += SPLIT, xc += SPLIT * H * W, wi += SPLIT * KH * KW) {
#pragma unroll
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = ih0 + kh * DH;
            if (ih >= 0 && ih < H) {
                const int row = xc + ih * W;
#pragma unroll
                for (int kw = 0; kw < KW; ++kw) {
                    const float4 wv = WLOAD4(w, wi + kh * KW + kw);
#pragma unroll
                    for (int j = 0; j < VW; ++j) {
                        const int iw = iw0 + kw * DW_ + j * SW_;
                        const float xv = (iw >= 0 && iw < W) ? LOAD(x, row + iw) : 0.0f;
                        acc[0][j] = mad(xv, wv.x, acc[0][j]);
                        acc[1][j] = mad(xv, wv.y, acc[1][j]);
                        acc[2][j] = mad(xv, wv.z, acc[2][j]);
                        acc[3][j] = mad(xv, wv.w, acc[3][j]);
                    }
                }
            }
        }
    }
#if SPLIT > 1
    __local float part[GY][SPLIT][4 * VW];
    const int gy = get_local_id(1);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < VW; ++j) part[gy][s][i * VW + j] = acc[i][j];
    barrier(CLK_LOCAL_MEM_FENCE); /* every item of the group gets here: no early return above */
    if (!valid) return;
    for (int o = s; o < 4 * VW; o += SPLIT) {
        const int i = o / VW, j = o % VW;
        float v = 0.0f;
        for (int t = 0; t < SPLIT; ++t) v += part[gy][t][o];
        if (m0 + i < Mg && ow0 + j < OW) STORE(ACT(v), y, y_off + ((n * M + g * Mg + m0 + i) * OH + oh) * OW + ow0 + j);
    }
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if (m0 + i < Mg) {
            const int out = y_off + ((n * M + g * Mg + m0 + i) * OH + oh) * OW;
#pragma unroll
            for (int j = 0; j < VW; ++j) {
                if (ow0 + j < OW) STORE(ACT(acc[i][j]), y, out + ow0 + j);
            }
        }
    }
#endif
}
#undef SPLIT
#undef GY

#ifdef SW
#define ROW ((VW - 1) * SW + (KW - 1) * DW + 1)

__kernel void depthwise(__global const store_t *x, int x_off, __global const float *w, __global const float *bias,
                        __global store_t *y, int y_off, int C, int H, int W, int OH, int OW, int SH, int PH, int PW, int DH,
                        int NZ, float a0, float a1) {
    const int owb = get_global_id(0), oh = get_global_id(1), z = get_global_id(2);
    const int ow0 = owb * VW;
    if (ow0 >= OW || oh >= OH || z >= NZ) return;
    const int c = z % C;
    const float b = bias[c];
    float acc[VW];
#pragma unroll
    for (int j = 0; j < VW; ++j) acc[j] = b;
    const int ih0 = oh * SH - PH, iw0 = ow0 * SW - PW;
    const int plane = x_off + z * H * W;
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
        const int ih = ih0 + kh * DH;
        if (ih >= 0 && ih < H) {
            const int row = plane + ih * W;
            float r[ROW];
#pragma unroll
            for (int t = 0; t < ROW; ++t) {
                const int iw = iw0 + t;
                r[t] = (iw >= 0 && iw < W) ? LOAD(x, row + iw) : 0.0f;
            }
#pragma unroll
            for (int kw = 0; kw < KW; ++kw) {
                const float wv = w[(c * KH + kh) * KW + kw];
#pragma unroll
                for (int j = 0; j < VW; ++j) acc[j] = mad(r[j * SW + kw * DW], wv, acc[j]);
            }
        }
    }
    const int out = y_off + (z * OH + oh) * OW;
#pragma unroll
    for (int j = 0; j < VW; ++j) {
        if (ow0 + j < OW) STORE(ACT(acc[j]), y, out + ow0 + j);
    }
}
#endif

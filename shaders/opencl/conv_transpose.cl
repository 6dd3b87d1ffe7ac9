/* ConvTranspose 2-D (ONNX operators.md #ConvTranspose), NCHW, gather form:
 *   Y[n, g*MG + m, oh, ow] = B[m] + sum_{c, kh, kw} X[n, g*CG + c, ih, iw] * W[g*CG + c, m, kh, kw]
 * over the taps with oh = ih*SH - PH + kh*DH, ow = iw*SW - PW + kw*DW (ih, iw inside X).
 * -D OCB=k (1, 2, 4, 8): output channels per work item (register block, one vector), for two
 * output columns ow and ow + SW (same taps and weights, neighbouring input columns).
 * Weights re-laid at resize as fp32 `w[g][c][kh][kw][MGP]` (MGP = MG rounded up to OCB,
 * zero padded), bias as fp32 `bias[g][MGP]`. Work (SW * JB, OH, N * G * MGP / OCB), JB =
 * ceil(ceil(OW / SW) / 2): item (q, oh, z) has phase q % SW and columns ph + SW * (2 * (q / SW) + {0, 1}).
 * Fused activation: ACT (common.h) with a0, a1.
 */

#if OCB == 8
typedef float8 accv;
#define VLOADW(p, i) vload8(0, (p) + (i))
#define VSTOREA(v, a) vstore8((v), 0, (a))
#elif OCB == 4
typedef float4 accv;
#define VLOADW(p, i) vload4(0, (p) + (i))
#define VSTOREA(v, a) vstore4((v), 0, (a))
#elif OCB == 2
typedef float2 accv;
#define VLOADW(p, i) vload2(0, (p) + (i))
#define VSTOREA(v, a) vstore2((v), 0, (a))
#else
typedef float accv;
#define VLOADW(p, i) ((p)[i])
#define VSTOREA(v, a) ((a)[0] = (v))
#endif

/* The input row (column) that output row oh reaches through kernel row kh: oh + P - kh*D
 * = ih*S with 0 <= ih < I; -1 when there is none. */
inline int tap(int oh, int kh, int P, int D, int S, int I) {
    int t = oh + P - kh * D;
    if (t < 0 || t % S) return -1;
    int ih = t / S;
    return ih < I ? ih : -1;
}

__kernel void deconv(__global const store_t *x, int x_off, __global const float *w, __global const float *bias,
                     __global store_t *y, int y_off, int C, int IH, int IW, int M, int OH, int OW, int G, int CG, int MG,
                     int MGP, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int zmax, int qmax, float a0,
                     float a1) {
    int q = get_global_id(0), oh = get_global_id(1), z = get_global_id(2);
    int ow = q % SW + SW * 2 * (q / SW);
    if (q >= qmax || ow >= OW || oh >= OH || z >= zmax) return;
    int nmb = MGP / OCB;
    int mb = z % nmb;
    int g = (z / nmb) % G;
    int n = z / (nmb * G);
    int m0 = mb * OCB;
    accv acc0 = VLOADW(bias, g * MGP + m0), acc1 = acc0;
    int xg = x_off + (n * C + g * CG) * IH * IW;
    for (int kh = 0; kh < KH; ++kh) {
        int ih = tap(oh, kh, PH, DH, SH, IH);
        if (ih < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
            int iw = tap(ow, kw, PW, DW, SW, IW); /* column ow + SW reads iw + 1 */
            if (iw < 0) continue;
            bool second = iw + 1 < IW;
            int xi = xg + ih * IW + iw;
            int wi = ((g * CG * KH + kh) * KW + kw) * MGP + m0;
            for (int c = 0; c < CG; ++c) {
                accv wv = VLOADW(w, wi);
                acc0 += LOAD(x, xi) * wv;
                if (second) acc1 += LOAD(x, xi + 1) * wv;
                xi += IH * IW;
                wi += KH * KW * MGP;
            }
        }
    }
    /* the second column can also get a tap the first does not: iw == -1 for the first */
    for (int kh = 0; kh < KH; ++kh) {
        int ih = tap(oh, kh, PH, DH, SH, IH);
        if (ih < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
            int tw = ow + SW + PW - kw * DW;
            if (tw != 0) continue; /* iw == 0 for the second column, -1 for the first */
            int xi = xg + ih * IW;
            int wi = ((g * CG * KH + kh) * KW + kw) * MGP + m0;
            for (int c = 0; c < CG; ++c) {
                acc1 += LOAD(x, xi) * VLOADW(w, wi);
                xi += IH * IW;
                wi += KH * KW * MGP;
            }
        }
    }
    float out0[OCB], out1[OCB];
    VSTOREA(acc0, out0);
    VSTOREA(acc1, out1);
    int yi = y_off + ((n * M + g * MG + m0) * OH + oh) * OW + ow;
    bool has1 = ow + SW < OW;
#pragma unroll
    for (int j = 0; j < OCB; ++j) {
        if (m0 + j < MG) {
            STORE(ACT(out0[j]), y, yi + j * OH * OW);
            if (has1) STORE(ACT(out1[j]), y, yi + j * OH * OW + SW);
        }
    }
}

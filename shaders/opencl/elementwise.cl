/* Elementwise kernels. One file; the operation is chosen with a build option.
 *
 * unary:  -D ACT_<NAME>, an op of the activation table (mnnpy/ops/activation.py; the macros are
 *         generated after common.h, backends/opencl/activation.py)
 *         kernel `unary(x, x_off, y, y_off, n, a0, a1)`: y[i] = ACT(x[i]) for i < n;
 *         a0/a1 are the op's scalars (HardSigmoid alpha/beta, LeakyRelu alpha, Clip min/max).
 * binary: -D OP_ADD | OP_SUB | OP_MUL | OP_DIV | OP_POW | OP_MAX | OP_MIN, plus -D BROADCAST
 *         kernel `binary(a, a_off, b, b_off, c, c_off, n, dims, astr, bstr)`:
 *         c[i] = G(a[ia], b[ib]). Without BROADCAST ia = ib = i (same shapes; 4 elements per
 *         work item, work ceil(n / 4)). With it (one element per item, work n), i is split
 *         into a rank-8 index over `dims` (outermost first, leading dims 1) and ia/ib are the
 *         dot products with the element strides `astr`/`bstr` (0 where broadcast).
 * affine: kernel `affine(x, x_off, scale, shift, y, y_off, n, inner, channels, a0, a1)`:
 *         y[i] = ACT(x[i] * scale[c] + shift[c]), c = (i / inner) % channels;
 *         work (ceil(inner / 4), n / inner)
 *         (BatchNormalization in inference mode, folded to a per-channel affine).
 * Offsets are in elements into one pooled buffer. NaN propagates as in numpy.
 */
#pragma OPENCL FP_CONTRACT OFF

#if defined(OP_ADD)
#define G(a, b) ((a) + (b))
#elif defined(OP_SUB)
#define G(a, b) ((a) - (b))
#elif defined(OP_MUL)
#define G(a, b) ((a) * (b))
#elif defined(OP_DIV)
#define G(a, b) ((a) / (b))
#elif defined(OP_POW)
#define G(a, b) pow(a, b)
#elif defined(OP_MAX)
#define G(a, b) ((isnan(a) || (a) > (b)) ? (a) : (b))
#elif defined(OP_MIN)
#define G(a, b) ((isnan(a) || (a) < (b)) ? (a) : (b))
#endif

/* unary, affine and same-shape binary: work item i handles elements 4i .. 4i+3 (float4 loads
 * and stores; the last item finishes a tail of 1-3 elements one by one). Work: ceil(n / 4). */
__kernel void unary(__global const store_t *x, int x_off, __global store_t *y, int y_off, int n, float a0, float a1) {
    int i = get_global_id(0) * 4;
    if (i + 4 <= n) {
        float4 v = LOAD4_AT(x, x_off + i);
        v.s0 = ACT(v.s0);
        v.s1 = ACT(v.s1);
        v.s2 = ACT(v.s2);
        v.s3 = ACT(v.s3);
        STORE4_AT(v, y, y_off + i);
    } else {
        for (; i < n; ++i) {
            float v = LOAD(x, x_off + i);
            STORE(ACT(v), y, y_off + i);
        }
    }
}

/* affine: work (ceil(inner / 4), rows) with rows = n / inner; row r is channel r % channels. */
__kernel void affine(__global const store_t *x, int x_off, __global const float *scale, __global const float *shift,
                     __global store_t *y, int y_off, int n, int inner, int channels, float a0, float a1) {
    int j = get_global_id(0) * 4, r = get_global_id(1);
    if (r * inner >= n) return;
    int c = r % channels, base = r * inner;
    float s = scale[c], t = shift[c]; /* fp32 in every precision (OpenCLBackend.weights) */
    if (j + 4 <= inner) {
        float4 v = LOAD4_AT(x, x_off + base + j) * s + t;
        v.s0 = ACT(v.s0);
        v.s1 = ACT(v.s1);
        v.s2 = ACT(v.s2);
        v.s3 = ACT(v.s3);
        STORE4_AT(v, y, y_off + base + j);
    } else {
        for (; j < inner; ++j) {
            float v = LOAD(x, x_off + base + j) * s + t;
            STORE(ACT(v), y, y_off + base + j);
        }
    }
}

/* operands a, b: slots A and B of common.h (fp32 constants while activations are fp16) */
#ifdef A_F32
#define LOAD4_A(p, i) vload4(0, (p) + (i))
#else
#define LOAD4_A(p, i) LOAD4_AT(p, i)
#endif
#ifdef B_F32
#define LOAD4_B(p, i) vload4(0, (p) + (i))
#else
#define LOAD4_B(p, i) LOAD4_AT(p, i)
#endif

#ifdef G
__kernel void binary(__global const a_t *a, int a_off, __global const b_t *b, int b_off, __global store_t *c, int c_off,
                     int n, int8 dims, int8 astr, int8 bstr) {
#ifndef BROADCAST
    int i4 = get_global_id(0) * 4;
    if (i4 + 4 <= n) {
        float4 va = LOAD4_A(a, a_off + i4), vb = LOAD4_B(b, b_off + i4), vc;
        vc.s0 = G(va.s0, vb.s0);
        vc.s1 = G(va.s1, vb.s1);
        vc.s2 = G(va.s2, vb.s2);
        vc.s3 = G(va.s3, vb.s3);
        STORE4_AT(vc, c, c_off + i4);
    } else {
        for (; i4 < n; ++i4) {
            float va = LOAD_A(a, a_off + i4), vb = LOAD_B(b, b_off + i4);
            STORE(G(va, vb), c, c_off + i4);
        }
    }
#else
    int i = get_global_id(0);
    if (i >= n) return;
    int d[8], sa[8], sb[8];
    vstore8(dims, 0, d);
    vstore8(astr, 0, sa);
    vstore8(bstr, 0, sb);
    int rest = i, ia = 0, ib = 0;
    for (int k = 7; k >= 0; --k) {
        int q = rest % d[k];
        rest /= d[k];
        ia += q * sa[k];
        ib += q * sb[k];
    }
    float va = LOAD_A(a, a_off + ia), vb = LOAD_B(b, b_off + ib);
    STORE(G(va, vb), c, c_off + i);
#endif
}
#endif

/* Partition borders with fp16 storage: graph inputs and outputs cross to the host as float32
 * and are converted here, on the device (one element per work item). */
__kernel void to_storage(__global const float *x, __global store_t *y, int y_off, int n) {
    int i = get_global_id(0);
    if (i < n) STORE(x[i], y, y_off + i);
}
__kernel void from_storage(__global const store_t *x, int x_off, __global float *y, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = LOAD(x, x_off + i);
}

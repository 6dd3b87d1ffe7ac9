/* Elementwise kernels. One file; the operation is chosen with a build option.
 *
 * unary:  the activation macros of common.h (-D ACT_RELU | ACT_SIGMOID | ACT_TANH | ACT_HARDSWISH
 *            | ACT_HARDSIGMOID | ACT_LEAKYRELU | ACT_CLIP | ACT_SWISH) or -D OP_SQRT | OP_ABS
 *            | OP_NEG | OP_EXP
 *         kernel `unary(x, x_off, y, y_off, n, a0, a1)`: y[i] = F(x[i]) for i < n;
 *         a0/a1 are the op's scalars (HardSigmoid alpha/beta, LeakyRelu alpha, Clip min/max).
 * binary: -D OP_ADD | OP_SUB | OP_MUL | OP_DIV | OP_POW | OP_MAX | OP_MIN, plus -D BROADCAST
 *         kernel `binary(a, a_off, b, b_off, c, c_off, n, dims, astr, bstr)`:
 *         c[i] = G(a[ia], b[ib]). Without BROADCAST ia = ib = i (same shapes). With it, i is
 *         split into a rank-8 index over `dims` (outermost first, leading dims 1) and
 *         ia/ib are the dot products with the element strides `astr`/`bstr` (0 where broadcast).
 * affine: kernel `affine(x, x_off, scale, shift, y, y_off, n, inner, channels, a0, a1)`:
 *         y[i] = ACT(x[i] * scale[c] + shift[c]), c = (i / inner) % channels
 *         (BatchNormalization in inference mode, folded to a per-channel affine).
 * Offsets are in elements into one pooled buffer. NaN propagates as in numpy.
 */
#pragma OPENCL FP_CONTRACT OFF

#if defined(OP_SQRT)
#define F(x) sqrt(x)
#elif defined(OP_ABS)
#define F(x) fabs(x)
#elif defined(OP_NEG)
#define F(x) (-(x))
#elif defined(OP_EXP)
#define F(x) exp(x)
#else
#define F(x) ACT(x)
#endif

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

__kernel void unary(__global const store_t *x, int x_off, __global store_t *y, int y_off, int n, float a0, float a1) {
    int i = get_global_id(0);
    if (i < n) {
        float v = LOAD(x, x_off + i);
        STORE(F(v), y, y_off + i);
    }
}

__kernel void affine(__global const store_t *x, int x_off, __global const store_t *scale, __global const store_t *shift,
                     __global store_t *y, int y_off, int n, int inner, int channels, float a0, float a1) {
    int i = get_global_id(0);
    if (i < n) {
        int c = (i / inner) % channels;
        float v = LOAD(x, x_off + i) * LOAD(scale, c) + LOAD(shift, c);
        STORE(ACT(v), y, y_off + i);
    }
}

#ifdef G
__kernel void binary(__global const store_t *a, int a_off, __global const store_t *b, int b_off, __global store_t *c, int c_off,
                     int n, int8 dims, int8 astr, int8 bstr) {
    int i = get_global_id(0);
    if (i >= n) return;
#ifdef BROADCAST
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
#else
    int ia = i, ib = i;
#endif
    float va = LOAD(a, a_off + ia), vb = LOAD(b, b_off + ib);
    STORE(G(va, vb), c, c_off + i);
}
#endif

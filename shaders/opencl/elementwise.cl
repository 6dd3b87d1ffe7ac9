/* Elementwise kernels, fp32. One file; the operation is chosen with a build option.
 *
 * unary:  -D OP_RELU | OP_SIGMOID | OP_TANH | OP_HARDSWISH | OP_HARDSIGMOID | OP_LEAKYRELU
 *            | OP_CLIP | OP_SQRT | OP_ABS | OP_NEG | OP_EXP
 *         kernel `unary(x, x_off, y, y_off, n, p0, p1)`: y[i] = F(x[i]) for i < n;
 *         p0/p1 are the op's scalars (HardSigmoid alpha/beta, LeakyRelu alpha, Clip min/max).
 * binary: -D OP_ADD | OP_SUB | OP_MUL | OP_DIV | OP_POW | OP_MAX | OP_MIN, plus -D BROADCAST
 *         kernel `binary(a, a_off, b, b_off, c, c_off, n, dims, astr, bstr)`:
 *         c[i] = G(a[ia], b[ib]). Without BROADCAST ia = ib = i (same shapes). With it, i is
 *         split into a rank-8 index over `dims` (outermost first, leading dims 1) and
 *         ia/ib are the dot products with the element strides `astr`/`bstr` (0 where broadcast).
 * Offsets are in elements into one pooled buffer. NaN propagates as in numpy.
 */
#pragma OPENCL FP_CONTRACT OFF

#if defined(OP_RELU)
#define F(x) ((x) < 0.0f ? 0.0f : (x))
#elif defined(OP_SIGMOID)
#define F(x) (0.5f * (1.0f + tanh(0.5f * (x))))
#elif defined(OP_TANH)
#define F(x) tanh(x)
#elif defined(OP_HARDSWISH)
#define F(x) ((x) * clamp((x) * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f))
#elif defined(OP_HARDSIGMOID)
#define F(x) clamp((x) * p0 + p1, 0.0f, 1.0f)
#elif defined(OP_LEAKYRELU)
#define F(x) ((x) < 0.0f ? (x) * p0 : (x))
#elif defined(OP_CLIP)
#define F(x) clip_(x, p0, p1)
#elif defined(OP_SQRT)
#define F(x) sqrt(x)
#elif defined(OP_ABS)
#define F(x) fabs(x)
#elif defined(OP_NEG)
#define F(x) (-(x))
#elif defined(OP_EXP)
#define F(x) exp(x)
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

/* min(max(x, lo), hi) keeping NaN (fmin/fmax would drop it) */
inline float clip_(float x, float lo, float hi) {
    float t = x < lo ? lo : x;
    return t > hi ? hi : t;
}

#ifdef F
__kernel void unary(__global const float *x, int x_off, __global float *y, int y_off, int n, float p0, float p1) {
    int i = get_global_id(0);
    if (i < n) {
        float v = x[x_off + i];
        y[y_off + i] = F(v);
    }
}
#endif

#ifdef G
__kernel void binary(__global const float *a, int a_off, __global const float *b, int b_off, __global float *c, int c_off,
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
    c[c_off + i] = G(a[a_off + ia], b[b_off + ib]);
}
#endif

/* Elementwise kernels. One file; the operation is chosen with a build option.
 *
 * unary:  -D ACT_<NAME>, an op of the activation table (mnnpy/ops/activation.py; the macros are
 *         generated after common.h, backends/opencl/activation.py)
 *         kernel `unary(x, x_off, y, y_off, n, a0, a1)`: y[i] = ACT(x[i]) for i < n;
 *         a0/a1 are the op's scalars (HardSigmoid alpha/beta, LeakyRelu alpha, Clip min/max).
 * binary: -D OP_<NAME> (ADD SUB MUL DIV POW MAX MIN MOD, EQUAL LESS GREATER LESSOREQUAL
 *         GREATEROREQUAL, AND OR XOR), plus -D BROADCAST; operand dtypes by common.h's
 *         -D SRC_<CODE> (float storage without it), the comparisons and logic ops with -D DST_BOOL.
 *         kernel `binary(a, a_off, b, b_off, c, c_off, n, dims, astr, bstr)`:
 *         c[i] = G(a[ia], b[ib]). Without BROADCAST ia = ib = i (same shapes; 4 elements per
 *         work item, work ceil(n / 4)). With it (one element per item, work n), i is split
 *         into a rank-8 index over `dims` (outermost first, leading dims 1) and ia/ib are the
 *         dot products with the element strides `astr`/`bstr` (0 where broadcast).
 *         Integers: + - * wrap around; Div truncates toward zero (INT_MIN / -1 = INT_MIN); Mod
 *         with -D FMOD=0 (sign of the divisor) or 1 (of the dividend, C's %), 0 for a zero divisor.
 * convert: kernel `convert(x, x_off, y, y_off, n)`: y[i] = x[i] converted by WRITE_DST (Cast:
 *         -D SRC_<CODE> / DST_<CODE> of common.h; float -> int truncates, int64 -> int32 keeps
 *         the low 32 bits, anything -> bool is x != 0); with -D NOT, y[i] = !x[i] (bool).
 * affine: kernel `affine(x, x_off, scale, shift, y, y_off, n, inner, channels, a0, a1)`:
 *         y[i] = ACT(x[i] * scale[c] + shift[c]), c = (i / inner) % channels;
 *         work (ceil(inner / 4), n / inner)
 *         (BatchNormalization in inference mode, folded to a per-channel affine).
 * Offsets are in elements into one pooled buffer. NaN propagates as in numpy.
 */
#pragma OPENCL FP_CONTRACT OFF

#ifdef SRC_TYPED /* integer or bool operands: wrapping arithmetic, no NaN */
#define ADD_(a, b) AS_SRC((src_u)(a) + (src_u)(b))
#define SUB_(a, b) AS_SRC((src_u)(a) - (src_u)(b))
#define MUL_(a, b) AS_SRC((src_u)(a) * (src_u)(b))
#define ISNAN_(a) 0
#endif
#if defined(SRC_I32) || defined(SRC_I64)
/* C division truncates toward zero; MIN / -1 wraps to MIN (an x86 idiv would trap on it) */
inline src_t div_(src_t a, src_t b) { return b == (src_t)-1 ? AS_SRC((src_u)0 - (src_u)a) : a / b; }
/* a - trunc(a / b) * b, with the divisor's sign unless FMOD; 0 for b == 0 (as the CPU backend) */
inline src_t mod_(src_t a, src_t b) {
    if (b == 0 || b == (src_t)-1) return 0;
    src_t r = a % b;
#if !FMOD
    if (r != 0 && (r < 0) != (b < 0)) r += b;
#endif
    return r;
}
#define DIV_(a, b) div_(a, b)
#endif
#ifndef SRC_TYPED
#define ADD_(a, b) ((a) + (b))
#define SUB_(a, b) ((a) - (b))
#define MUL_(a, b) ((a) * (b))
#define DIV_(a, b) ((a) / (b))
#define ISNAN_(a) isnan(a)
#endif

#if defined(OP_ADD)
#define G(a, b) ADD_(a, b)
#elif defined(OP_SUB)
#define G(a, b) SUB_(a, b)
#elif defined(OP_MUL)
#define G(a, b) MUL_(a, b)
#elif defined(OP_DIV)
#define G(a, b) DIV_(a, b)
#elif defined(OP_POW)
#define G(a, b) pow(a, b)
#elif defined(OP_MAX)
#define G(a, b) ((ISNAN_(a) || (a) > (b)) ? (a) : (b))
#elif defined(OP_MIN)
#define G(a, b) ((ISNAN_(a) || (a) < (b)) ? (a) : (b))
#elif defined(OP_MOD)
#define G(a, b) mod_(a, b)
#elif defined(OP_EQUAL)
#define G(a, b) ((a) == (b))
#elif defined(OP_LESS)
#define G(a, b) ((a) < (b))
#elif defined(OP_GREATER)
#define G(a, b) ((a) > (b))
#elif defined(OP_LESSOREQUAL)
#define G(a, b) ((a) <= (b))
#elif defined(OP_GREATEROREQUAL)
#define G(a, b) ((a) >= (b))
#elif defined(OP_AND)
#define G(a, b) ((a) && (b))
#elif defined(OP_OR)
#define G(a, b) ((a) || (b))
#elif defined(OP_XOR)
#define G(a, b) (!(a) != !(b))
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

/* operands a, b: slots A and B of common.h (fp32 constants while activations are fp16), or
 * src_t (-D SRC_<CODE>); result c: dst_t */
#ifdef SRC_TYPED
typedef src_t val_t;
typedef src_t bin_a_t;
typedef src_t bin_b_t;
#define READ_A(p, i) ((p)[(i)])
#define READ_B(p, i) ((p)[(i)])
#else
typedef float val_t;
typedef a_t bin_a_t;
typedef b_t bin_b_t;
#define READ_A(p, i) LOAD_A(p, i)
#define READ_B(p, i) LOAD_B(p, i)
#endif
#if defined(SRC_TYPED) || !defined(DST_FLOAT)
#define SCALAR_ONLY /* no float4 path */
#endif
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
__kernel void binary(__global const bin_a_t *a, int a_off, __global const bin_b_t *b, int b_off, __global dst_t *c,
                     int c_off, int n, int8 dims, int8 astr, int8 bstr) {
#ifndef BROADCAST
    int i4 = get_global_id(0) * 4;
#ifndef SCALAR_ONLY
    if (i4 + 4 <= n) {
        float4 va = LOAD4_A(a, a_off + i4), vb = LOAD4_B(b, b_off + i4), vc;
        vc.s0 = G(va.s0, vb.s0);
        vc.s1 = G(va.s1, vb.s1);
        vc.s2 = G(va.s2, vb.s2);
        vc.s3 = G(va.s3, vb.s3);
        STORE4_AT(vc, c, c_off + i4);
        return;
    }
#endif
    for (int e = i4; e < n && e < i4 + 4; ++e) {
        val_t va = READ_A(a, a_off + e), vb = READ_B(b, b_off + e);
        WRITE_DST(G(va, vb), c, c_off + e);
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
    val_t va = READ_A(a, a_off + ia), vb = READ_B(b, b_off + ib);
    WRITE_DST(G(va, vb), c, c_off + i);
#endif
}
#endif

#ifdef NOT
#define CONVERT_(v) (!(v))
#elif defined(SRC_I64) && defined(DST_I32)
#define CONVERT_(v) as_int((uint)as_ulong(v)) /* the low 32 bits (a signed narrowing is implementation-defined) */
#else
#define CONVERT_(v) (v)
#endif
__kernel void convert(__global const src_t *x, int x_off, __global dst_t *y, int y_off, int n) {
    int i = get_global_id(0);
    if (i < n) WRITE_DST(CONVERT_(READ_SRC(x, x_off + i)), y, y_off + i);
}

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

/* Row reductions: ReduceXxx, GlobalAverage/MaxPool, Softmax/LogSoftmax, LayerNormalization.
 *
 * Every kernel sees its input as (outer, red, inner), contiguous, and produces one result
 * per p in [0, P), P = outer * inner: the reduction runs over x[(p / inner) * red * inner
 * + p % inner + k * inner], k in [0, red). A work-group holds P_N outputs times R_N
 * reducing work items: each of the R_N items folds a strided part of its row, then the
 * group combines the partial results in local memory (a tree; any R_N, P_N * R_N <= GROUP_MAX).
 * The launch makes the reduce-dimension's global size equal its local size (one group
 * along it). With -D ROW (inner == 1) the reducing index is dimension 0 (adjacent work
 * items read adjacent elements of a row); otherwise it is dimension 1 and adjacent work
 * items read adjacent p (adjacent inner positions).
 *
 * reduce:    -D OP_SUM | OP_MEAN | OP_MAX | OP_MIN | OP_PROD | OP_L1 | OP_L2 | OP_SUMSQUARE
 *            | OP_LOGSUM | OP_LOGSUMEXP. kernel `reduce(x, x_off, y, y_off, P, red, inner,
 *            splits, chunk, count)`: y[p] = reduction of a row (numpy semantics: NaN
 *            propagates through max/min; empty rows give the identity, a mean of nothing
 *            is 0; LogSumExp shifts by the row max, 0 when that max is not finite). A row
 *            may be split into `splits` chunks of `chunk` elements (P then counts
 *            outer * splits * inner results, laid out (outer, splits, inner)): pass 1 with
 *            -D NO_FINAL writes fp32 partial results, pass 2 with -D NO_MAP reduces them
 *            (fp32 input) and applies the final step; `count` is the original row length
 *            (ReduceMean's divisor). Unsplit: splits = 1, chunk = count = red.
 * softmax:   -D SOFTMAX [-D LOG]. kernel `softmax(x, x_off, y, y_off, P, red, inner)`:
 *            y = exp(x - max) / sum(exp(x - max)) (LOG: x - max - log(sum)) along the row.
 * layernorm: -D LAYERNORM [-D HAS_BIAS]. kernel `layernorm(x, x_off, s, s_off, b, b_off, y,
 *            y_off, P, red, eps)` (inner = 1): y = (x - mean) / sqrt(var + eps) * s[k] + b[k],
 *            mean and (population) variance of the row, two passes as the CPU backend.
 * -D CACHE=n (softmax, layernorm; red <= n * R_N): each item keeps its n elements of the
 *            row in registers, so x is read once instead of three times.
 */
#pragma OPENCL FP_CONTRACT OFF

#define GROUP_MAX 256

#ifdef ROW
#define R_ID ((int)get_local_id(0))
#define R_N ((int)get_local_size(0))
#define P_LOC ((int)get_local_id(1))
#define P_N ((int)get_local_size(1))
#define P_ID ((int)get_global_id(1))
#else
#define R_ID ((int)get_local_id(1))
#define R_N ((int)get_local_size(1))
#define P_LOC ((int)get_local_id(0))
#define P_N ((int)get_local_size(0))
#define P_ID ((int)get_global_id(0))
#endif

inline float max_nan(float a, float b) { return (isnan(a) || a > b) ? a : b; }
inline float min_nan(float a, float b) { return (isnan(a) || a < b) ? a : b; }
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))

/* group_<name>(s, v): combine v over the R_N reducing items of this p (all items of the
 * group must call it: it holds barriers); every item gets the result. */
#define GROUP_REDUCE(NAME, C)                                                  \
    inline float NAME(__local float *s, float v) {                             \
        const int r = R_ID, at = R_ID * P_N + P_LOC;                           \
        s[at] = v;                                                             \
        barrier(CLK_LOCAL_MEM_FENCE);                                          \
        for (int n = R_N; n > 1;) {                                            \
            int h = (n + 1) >> 1;                                              \
            if (r < n - h) s[at] = C(s[at], s[at + h * P_N]);                  \
            barrier(CLK_LOCAL_MEM_FENCE);                                      \
            n = h;                                                             \
        }                                                                      \
        float out = s[P_LOC];                                                  \
        barrier(CLK_LOCAL_MEM_FENCE);                                          \
        return out;                                                            \
    }
GROUP_REDUCE(group_sum, ADD)
GROUP_REDUCE(group_max, max_nan)
GROUP_REDUCE(group_min, min_nan)
GROUP_REDUCE(group_prod, MUL)

/* the row's first element; rows of out-of-range p read nothing */
#define ROW_BASE(x_off) ((x_off) + (p / inner) * red * inner + p % inner)

/* max over the row, combined across the group */
inline float row_max(__global const store_t *x, int base, int red, int inner, int live, __local float *s) {
    float m = -INFINITY;
    if (live)
        for (int k = R_ID; k < red; k += R_N) m = max_nan(m, LOAD(x, base + k * inner));
    return group_max(s, m);
}

/* sum of exp(x - m) over the row, combined across the group */
inline float row_sum_exp(__global const store_t *x, int base, int red, int inner, int live, float m, __local float *s) {
    float acc = 0.0f;
    if (live)
        for (int k = R_ID; k < red; k += R_N) acc += exp(LOAD(x, base + k * inner) - m);
    return group_sum(s, acc);
}

/* per op: identity, elementwise map, combine, group combine, final step (n: the row length) */
#if defined(OP_SUM)
#define INIT 0.0f
#define MAP(v) (v)
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) (a)
#elif defined(OP_MEAN)
#define INIT 0.0f
#define MAP(v) (v)
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) ((n) > 0 ? (a) / (float)(n) : 0.0f)
#elif defined(OP_MAX)
#define INIT (-INFINITY)
#define MAP(v) (v)
#define COMBINE max_nan
#define GROUP group_max
#define FINAL(a, n) (a)
#elif defined(OP_MIN)
#define INIT INFINITY
#define MAP(v) (v)
#define COMBINE min_nan
#define GROUP group_min
#define FINAL(a, n) (a)
#elif defined(OP_PROD)
#define INIT 1.0f
#define MAP(v) (v)
#define COMBINE MUL
#define GROUP group_prod
#define FINAL(a, n) (a)
#elif defined(OP_L1)
#define INIT 0.0f
#define MAP(v) fabs(v)
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) (a)
#elif defined(OP_L2)
#define INIT 0.0f
#define MAP(v) ((v) * (v))
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) sqrt(a)
#elif defined(OP_SUMSQUARE)
#define INIT 0.0f
#define MAP(v) ((v) * (v))
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) (a)
#elif defined(OP_LOGSUM)
#define INIT 0.0f
#define MAP(v) (v)
#define COMBINE ADD
#define GROUP group_sum
#define FINAL(a, n) log(a)
#endif

#ifdef NO_MAP /* pass 2 of a split reduction: fp32 partial results, already mapped */
#undef MAP
#define MAP(v) (v)
typedef float in_t;
#define ILOAD(p, i) ((p)[(i)])
#else
typedef store_t in_t;
#define ILOAD(p, i) LOAD(p, i)
#endif
#ifdef NO_FINAL /* pass 1 of a split reduction: fp32 partial results */
#undef FINAL
#define FINAL(a, n) (a)
typedef float out_t;
#define OSTORE(v, p, i) ((p)[(i)] = (v))
#else
typedef store_t out_t;
#define OSTORE(v, p, i) STORE(v, p, i)
#endif

#if defined(GROUP) || defined(OP_LOGSUMEXP)
__kernel void reduce(__global const in_t *x, int x_off, __global out_t *y, int y_off, int P, int red, int inner, int splits,
                     int chunk, int count) {
    __local float s[GROUP_MAX];
    const int p = P_ID, live = p < P;
    const int o = p / (splits * inner), rest = p % (splits * inner);
    const int k0 = (rest / inner) * chunk, k1 = min(red, k0 + chunk);
    const int base = x_off + o * red * inner + rest % inner;
#ifdef OP_LOGSUMEXP /* never split */
    float m = row_max(x, base, red, inner, live, s);
    if (!isfinite(m)) m = 0.0f;
    const float result = log(row_sum_exp(x, base, red, inner, live, m, s)) + m;
#else
    float acc = INIT;
    if (live)
        for (int k = k0 + R_ID; k < k1; k += R_N) {
            float v = ILOAD(x, base + k * inner);
            acc = COMBINE(acc, MAP(v));
        }
    const float result = FINAL(GROUP(s, acc), count);
#endif
    if (live && R_ID == 0) OSTORE(result, y, y_off + p);
}
#endif

/* CACHE: element j of this item's part of the row is k = R_ID + j * R_N */
#ifdef CACHE
#define FOR_CACHED(j, k) for (int j = 0, k = R_ID; j < CACHE; ++j, k += R_N)
#endif

#ifdef SOFTMAX
__kernel void softmax(__global const store_t *x, int x_off, __global store_t *y, int y_off, int P, int red, int inner) {
    __local float s[GROUP_MAX];
    const int p = P_ID, live = p < P;
    const int base = ROW_BASE(x_off), out = ROW_BASE(y_off);
#ifdef CACHE
    float v[CACHE];
    float m = -INFINITY;
#pragma unroll
    FOR_CACHED(j, k) {
        v[j] = (live && k < red) ? LOAD(x, base + k * inner) : -INFINITY;
        m = max_nan(m, v[j]);
    }
    m = group_max(s, m);
    float sum = 0.0f;
#pragma unroll
    FOR_CACHED(j, k) if (k < red) sum += exp(v[j] - m);
    sum = group_sum(s, sum);
    if (!live) return;
#ifdef LOG
    const float ls = log(sum);
#pragma unroll
    FOR_CACHED(j, k) if (k < red) STORE((v[j] - m) - ls, y, out + k * inner);
#else
#pragma unroll
    FOR_CACHED(j, k) if (k < red) STORE(exp(v[j] - m) / sum, y, out + k * inner);
#endif
#else /* rows longer than the registers hold: three passes over x */
    const float m = row_max(x, base, red, inner, live, s);
    const float sum = row_sum_exp(x, base, red, inner, live, m, s);
    if (!live) return;
#ifdef LOG
    const float ls = log(sum);
    for (int k = R_ID; k < red; k += R_N) STORE((LOAD(x, base + k * inner) - m) - ls, y, out + k * inner);
#else
    for (int k = R_ID; k < red; k += R_N) STORE(exp(LOAD(x, base + k * inner) - m) / sum, y, out + k * inner);
#endif
#endif
}
#endif

#ifdef LAYERNORM
/* Scale is operand slot B, the bias slot C (common.h: -D B_F32 / C_F32 for fp32 constants) */
#ifdef HAS_BIAS
#define BIAS(k) LOAD_C(b, b_off + (k))
#else
#define BIAS(k) 0.0f
#endif
__kernel void layernorm(__global const store_t *x, int x_off, __global const b_t *sc, int sc_off, __global const c_t *b,
                        int b_off, __global store_t *y, int y_off, int P, int red, float eps) {
    __local float s[GROUP_MAX];
    const int p = P_ID, live = p < P, inner = 1;
    const int base = ROW_BASE(x_off), out = ROW_BASE(y_off);
    float acc = 0.0f;
#ifdef CACHE
    float v[CACHE];
#pragma unroll
    FOR_CACHED(j, k) {
        v[j] = (live && k < red) ? LOAD(x, base + k) : 0.0f;
        acc += v[j];
    }
    const float mean = group_sum(s, acc) / (float)red;
    acc = 0.0f;
#pragma unroll
    FOR_CACHED(j, k) {
        float d = k < red ? v[j] - mean : 0.0f;
        acc += d * d;
    }
    const float inv = 1.0f / sqrt(group_sum(s, acc) / (float)red + eps);
    if (!live) return;
#pragma unroll
    FOR_CACHED(j, k) if (k < red) STORE(((v[j] - mean) * inv) * LOAD_B(sc, sc_off + k) + BIAS(k), y, out + k);
#else /* rows longer than the registers hold: three passes over x */
    if (live)
        for (int k = R_ID; k < red; k += R_N) acc += LOAD(x, base + k);
    const float mean = group_sum(s, acc) / (float)red;
    acc = 0.0f;
    if (live)
        for (int k = R_ID; k < red; k += R_N) {
            float d = LOAD(x, base + k) - mean;
            acc += d * d;
        }
    const float inv = 1.0f / sqrt(group_sum(s, acc) / (float)red + eps);
    if (!live) return;
    for (int k = R_ID; k < red; k += R_N) STORE(((LOAD(x, base + k) - mean) * inv) * LOAD_B(sc, sc_off + k) + BIAS(k), y, out + k);
#endif
}
#endif

#version 450
/* Row reductions of mnnpy's Vulkan backend (float32): ReduceXxx, Global{Average,Max}Pool,
 * Softmax/LogSoftmax, LayerNormalization; and the per-channel affine of BatchNormalization.
 * Sources: ONNX operators.md (ReduceSum ... ReduceLogSumExp, Softmax, LogSoftmax,
 * LayerNormalization, BatchNormalization).
 *
 * Row view: the input is (outer, red, inner), contiguous; one result per p < P = outer * inner
 * from x[(p / inner) * red * inner + p % inner + k * inner], k < red. A work group
 * (local size L = LP * LR, 1-D) holds LP outputs times LR reducing invocations (LR a power of
 * two): each of the LR folds a strided part of its row, then the group combines the partial
 * results in shared memory (a tree). ROW (inner == 1): the reducing index is the fast one
 * (neighbouring invocations read neighbouring elements of a row); otherwise the output index
 * is (neighbouring invocations read neighbouring inner positions). Work group g (linear over
 * gl_NumWorkGroups.x, y) holds outputs [g * LP, g * LP + LP).
 *
 * Variant macros (shaders/vulkan/manifest_reduce.json):
 *   OP_SUM | OP_MEAN | OP_MAX | OP_MIN | OP_PROD | OP_L1 | OP_L2 | OP_SUMSQUARE | OP_LOGSUM
 *     | OP_LOGSUMEXP: y[p] = the reduction of row p (numpy semantics: NaN propagates through
 *     max/min; an empty row gives the identity, a mean of nothing 0; LogSumExp shifts by the
 *     row max, 0 where that max is not finite). A row may be split into `splits` chunks of
 *     `chunk` elements (P then counts outer * splits * inner results laid out (outer, splits,
 *     inner)): pass 1 with FINISH = false writes partial results, pass 2 with MAPPED = false
 *     reduces them and applies the final step; `count` is the original row length (the
 *     mean's divisor). Unsplit: splits = 1, chunk = count = red. LogSumExp is never split.
 *   SOFTMAX [LOG]: y = exp(x - max) / sum(exp(x - max)) (LOG: (x - max) - log(sum)) per row.
 *   LAYERNORM: y = (x - mean) / sqrt(var + eps) * scale[k] + bias[k] (inner == 1; mean and
 *     population variance of the row in two passes, as the CPU backend).
 *   AFFINE: y[i] = x[i] * st[c] + st[C + c], c = (i / inner) % C (BatchNormalization folded);
 *     1-D dispatch of n invocations, no shared memory.
 * Specialization constants: 0, 10, 11 local size (x = L, y = z = 1); 1 LR; 2 ROW; 3 CACHE and
 *   4 USE_CACHE (Softmax, LayerNorm: each invocation keeps its CACHE elements of the row in
 *   registers, red <= CACHE * LR, so x is read once instead of three times); 5 MAPPED; 6 FINISH;
 *   7 HAS_BIAS (LayerNorm).
 * Push constants and bindings: per variant below (offsets in elements from each binding's start).
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
#include "common.glsl"

layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;
layout(constant_id = 1) const uint LR = 1;
layout(constant_id = 2) const bool ROW = true;
layout(constant_id = 3) const uint CACHE = 1;
layout(constant_id = 4) const bool USE_CACHE = false;
layout(constant_id = 5) const bool MAPPED = true;
layout(constant_id = 6) const bool FINISH = true;
layout(constant_id = 7) const bool HAS_BIAS = false;

#define GROUP_MAX 256

float max_nan(float a, float b) { return (isnan(a) || a > b) ? a : b; }
float min_nan(float a, float b) { return (isnan(a) || a < b) ? a : b; }

#ifndef AFFINE
shared float s[GROUP_MAX];

uint LP_() { return gl_WorkGroupSize.x / LR; }
uint r_id() { return ROW ? gl_LocalInvocationIndex % LR : gl_LocalInvocationIndex / LP_(); }
uint p_loc() { return ROW ? gl_LocalInvocationIndex / LR : gl_LocalInvocationIndex % LP_(); }
uint p_id() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * LP_() + p_loc(); }

/* group_<name>(v): combine v over the LR reducing invocations of this output; every
 * invocation of the group must call it (barriers) and gets the result. */
#define GROUP_REDUCE(NAME, C)                                \
    float NAME(float v) {                                    \
        const uint lp = LP_(), at = r_id() * lp + p_loc();   \
        s[at] = v;                                           \
        memoryBarrierShared();                               \
        barrier();                                           \
        for (uint h = LR >> 1; h > 0u; h >>= 1) {            \
            if (r_id() < h) s[at] = C(s[at], s[at + h * lp]); \
            memoryBarrierShared();                           \
            barrier();                                       \
        }                                                    \
        float out_ = s[p_loc()];                             \
        barrier();                                           \
        return out_;                                         \
    }
float add_(float a, float b) { return a + b; }
float mul_(float a, float b) { return a * b; }
GROUP_REDUCE(group_sum, add_)
GROUP_REDUCE(group_max, max_nan)
GROUP_REDUCE(group_min, min_nan)
GROUP_REDUCE(group_prod, mul_)
#endif

#if defined(OP_SUM) || defined(OP_MEAN) || defined(OP_MAX) || defined(OP_MIN) || defined(OP_PROD) || defined(OP_L1) \
    || defined(OP_L2) || defined(OP_SUMSQUARE) || defined(OP_LOGSUM) || defined(OP_LOGSUMEXP)
/* Bindings: 0 x (read), 1 y (written). */
FLOAT_IN(0, x)
FLOAT_OUT(1, y)
layout(push_constant) uniform Push {
    uint x_off;
    uint y_off;
    uint P;
    uint red;
    uint inner;
    uint splits;
    uint chunk;
    uint count;
} pc;

/* per op: identity, elementwise map, combine, group combine, final step (n: the row length) */
#if defined(OP_SUM) || defined(OP_MEAN) || defined(OP_LOGSUM)
#define INIT 0.0
#define MAP(v) (v)
#define COMBINE add_
#define GROUP group_sum
#elif defined(OP_MAX)
#define INIT (-inf_())
#define MAP(v) (v)
#define COMBINE max_nan
#define GROUP group_max
#elif defined(OP_MIN)
#define INIT inf_()
#define MAP(v) (v)
#define COMBINE min_nan
#define GROUP group_min
#elif defined(OP_PROD)
#define INIT 1.0
#define MAP(v) (v)
#define COMBINE mul_
#define GROUP group_prod
#elif defined(OP_L1)
#define INIT 0.0
#define MAP(v) abs(v)
#define COMBINE add_
#define GROUP group_sum
#elif defined(OP_L2) || defined(OP_SUMSQUARE)
#define INIT 0.0
#define MAP(v) ((v) * (v))
#define COMBINE add_
#define GROUP group_sum
#endif

float final_(float a, uint n) {
#if defined(OP_MEAN)
    return n > 0u ? a / float(n) : 0.0;
#elif defined(OP_L2)
    return sqrt(a);
#elif defined(OP_LOGSUM)
    return log(a);
#else
    return a;
#endif
}

void main() {
    const uint p = p_id(), r = r_id();
    const bool live = p < pc.P;
    const uint per = pc.splits * pc.inner;
    const uint o = p / per, rest = p % per;
    const uint base = pc.x_off + o * pc.red * pc.inner + rest % pc.inner;
    float result;
#ifdef OP_LOGSUMEXP
    float m = -inf_();
    if (live)
        for (uint k = r; k < pc.red; k += LR) m = max_nan(m, x_ld(base + k * pc.inner));
    m = group_max(m);
    if (isinf(m)) m = 0.0; /* NaN stays NaN */
    float acc = 0.0;
    if (live)
        for (uint k = r; k < pc.red; k += LR) acc += exp(x_ld(base + k * pc.inner) - m);
    result = log(group_sum(acc)) + m;
#else
    const uint k0 = (rest / pc.inner) * pc.chunk, k1 = min(pc.red, k0 + pc.chunk);
    float acc = INIT;
    if (live)
        for (uint k = k0 + r; k < k1; k += LR) {
            float v = x_ld(base + k * pc.inner);
            acc = COMBINE(acc, MAPPED ? MAP(v) : v);
        }
    result = GROUP(acc);
    if (FINISH) result = final_(result, pc.count);
#endif
    if (live && r == 0u) y_st(pc.y_off + p, result);
}
#endif

#ifdef SOFTMAX
/* Bindings: 0 x (read), 1 y (written). Push: x_off, y_off, P (rows), red, inner. */
FLOAT_IN(0, x)
FLOAT_OUT(1, y)
layout(push_constant) uniform Push {
    uint x_off;
    uint y_off;
    uint P;
    uint red;
    uint inner;
} pc;

void main() {
    const uint p = p_id(), r = r_id(), inner = pc.inner, red = pc.red;
    const bool live = p < pc.P;
    const uint row = (p / inner) * red * inner + p % inner;
    const uint base = pc.x_off + row, out_ = pc.y_off + row;
    float m = -inf_(), sum = 0.0;
    if (USE_CACHE) {
        float v[CACHE];
        for (uint j = 0u; j < CACHE; ++j) {
            uint k = r + j * LR;
            v[j] = (live && k < red) ? x_ld(base + k * inner) : -inf_();
            m = max_nan(m, v[j]);
        }
        m = group_max(m);
        for (uint j = 0u; j < CACHE; ++j)
            if (r + j * LR < red) sum += exp(v[j] - m);
        sum = group_sum(sum);
        if (!live) return;
#ifdef LOG
        const float ls = log(sum);
        for (uint j = 0u; j < CACHE; ++j) {
            uint k = r + j * LR;
            if (k < red) y_st(out_ + k * inner, (v[j] - m) - ls);
        }
#else
        const float inv = 1.0 / sum;
        for (uint j = 0u; j < CACHE; ++j) {
            uint k = r + j * LR;
            if (k < red) y_st(out_ + k * inner, exp(v[j] - m) * inv);
        }
#endif
    } else { /* rows longer than the registers hold: three passes over x */
        if (live)
            for (uint k = r; k < red; k += LR) m = max_nan(m, x_ld(base + k * inner));
        m = group_max(m);
        if (live)
            for (uint k = r; k < red; k += LR) sum += exp(x_ld(base + k * inner) - m);
        sum = group_sum(sum);
        if (!live) return;
#ifdef LOG
        const float ls = log(sum);
        for (uint k = r; k < red; k += LR) y_st(out_ + k * inner, (x_ld(base + k * inner) - m) - ls);
#else
        const float inv = 1.0 / sum;
        for (uint k = r; k < red; k += LR) y_st(out_ + k * inner, exp(x_ld(base + k * inner) - m) * inv);
#endif
    }
}
#endif

#ifdef LAYERNORM
/* Bindings: 0 x, 1 scale, 2 bias (read; bias unused without HAS_BIAS), 3 y (written).
 * Push: x_off, s_off, b_off, y_off, P (rows), red (row length), eps. ROW is true. */
FLOAT_IN(0, x)
layout(std430, binding = 1) readonly buffer S { float sc[]; };
layout(std430, binding = 2) readonly buffer B { float bi[]; };
FLOAT_OUT(3, y)
layout(push_constant) uniform Push {
    uint x_off;
    uint s_off;
    uint b_off;
    uint y_off;
    uint P;
    uint red;
    float eps;
} pc;

float affine_(float d, uint k) { return d * sc[pc.s_off + k] + (HAS_BIAS ? bi[pc.b_off + k] : 0.0); }

void main() {
    const uint p = p_id(), r = r_id(), red = pc.red;
    const bool live = p < pc.P;
    const uint base = pc.x_off + p * red, out_ = pc.y_off + p * red;
    const float n = float(red);
    float acc = 0.0;
    if (USE_CACHE) {
        float v[CACHE];
        for (uint j = 0u; j < CACHE; ++j) {
            uint k = r + j * LR;
            v[j] = (live && k < red) ? x_ld(base + k) : 0.0;
            acc += v[j];
        }
        const float mean = group_sum(acc) / n;
        acc = 0.0;
        for (uint j = 0u; j < CACHE; ++j) {
            float d = r + j * LR < red ? v[j] - mean : 0.0;
            acc += d * d;
        }
        const float inv = 1.0 / sqrt(group_sum(acc) / n + pc.eps);
        if (!live) return;
        for (uint j = 0u; j < CACHE; ++j) {
            uint k = r + j * LR;
            if (k < red) y_st(out_ + k, affine_((v[j] - mean) * inv, k));
        }
    } else { /* rows longer than the registers hold: three passes over x */
        if (live)
            for (uint k = r; k < red; k += LR) acc += x_ld(base + k);
        const float mean = group_sum(acc) / n;
        acc = 0.0;
        if (live)
            for (uint k = r; k < red; k += LR) {
                float d = x_ld(base + k) - mean;
                acc += d * d;
            }
        const float inv = 1.0 / sqrt(group_sum(acc) / n + pc.eps);
        if (!live) return;
        for (uint k = r; k < red; k += LR) y_st(out_ + k, affine_((x_ld(base + k) - mean) * inv, k));
    }
}
#endif

#ifdef AFFINE
/* Bindings: 0 x (read), 1 st (read: C scales then C shifts), 2 y (written).
 * Push: n, inner, C, x_off, st_off, y_off. Dispatch as in unary.comp. */
FLOAT_IN(0, x)
layout(std430, binding = 1) readonly buffer ST { float st[]; };
FLOAT_OUT(2, y)
layout(push_constant) uniform Push {
    uint n;
    uint inner;
    uint C;
    uint x_off;
    uint st_off;
    uint y_off;
} pc;

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    uint c = (i / pc.inner) % pc.C;
    precise float v = x_ld(pc.x_off + i) * st[pc.st_off + c];
    y_st(pc.y_off + i, v + st[pc.st_off + pc.C + c]);
}
#endif

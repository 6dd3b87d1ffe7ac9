/* Shared by mnnpy's Vulkan compute shaders (#include "common.glsl"; included once).
 *
 * nan_/inf_: quiet NaN and +inf. two_prod/two_sum/fast_two_sum: error-free transformations,
 * log2_hl: log2 as a (hi, lo) pair, exp2_half: 2^f for |f| <= 1/2, exp2_hl: 2^(hi + lo),
 * exp_accurate: e^x to within about 2 ulp (the Vulkan specification allows exp 3 + 2|x| ulp).
 * At the end, the helpers of the activation expressions (activation.glsl).
 * Functions a shader does not call are left out of its SPIR-V (glslang drops them).
 */
#ifndef COMMON_GLSL
#define COMMON_GLSL
float nan_() { return uintBitsToFloat(0x7fc00000u); }
float inf_() { return uintBitsToFloat(0x7f800000u); }
float with_sign_of(float r, float x) { return uintBitsToFloat(floatBitsToUint(r) | (floatBitsToUint(x) & 0x80000000u)); }

/* Error-free transformations (Dekker; Knuth TAOCP vol. 2, 4.2.2): value pairs (hi, lo) with
 * hi + lo carrying about 48 bits, so that pow is accurate to a few ulp and not only to
 * exp2(y * log2(x))'s (the Vulkan specification allows 3 + 2|y log2 x| ulp for that; lavapipe's
 * exp2 alone is 3 ulp off and its fma is not fused). */
/* a * b = p + e exactly: Veltkamp's split into 12-bit halves, products exact in float
 * (no fma: drivers need not fuse it; `precise` keeps the compiler from contracting) */
vec2 split_(float a) {
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}
vec2 two_prod(float a, float b) {
    vec2 x = split_(a), y = split_(b);
    precise float p = a * b;
    precise float e = ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(p, e);
}
vec2 two_sum(float a, float b) {
    precise float s = a + b;
    precise float v = s - a;
    precise float e = (a - (s - v)) + (b - v);
    return vec2(s, e);
}
vec2 fast_two_sum(float a, float b) { /* |a| >= |b| */
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

/* log2(x) for finite x > 0 as (hi, lo): x = m 2^k with m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: the leading 2s term in two parts,
 * the series tail (2 s^3 / 3 + ... + 2 s^13 / 13, relative truncation < 1e-12) in one. */
vec2 log2_hl(float x) {
    int k;
    float m = frexp(x, k);
    if (m < 0.70710678) {
        m *= 2.0;
        k -= 1;
    }
    precise float num = m - 1.0; /* exact */
    vec2 den = two_sum(m, 1.0);
    precise float s = num / den.x;
    vec2 p = two_prod(s, den.x);
    precise float s_lo = (((num - p.x) - p.y) - s * den.y) / den.x;
    float s2 = s * s;
    float tail = s * s2 * (2.0 / 3.0 + s2 * (2.0 / 5.0 + s2 * (2.0 / 7.0 + s2 * (2.0 / 9.0 + s2 * (2.0 / 11.0 + s2 * (2.0 / 13.0))))));
    vec2 ln_m = fast_two_sum(2.0 * s, tail);
    ln_m.y += 2.0 * s_lo;
    /* times log2(e) = 1.4426950408889634 = LOG2E_HI + LOG2E_LO */
    const float LOG2E_HI = 1.44269502162933349609375;
    const float LOG2E_LO = 1.925963033500011e-08;
    vec2 q = two_prod(ln_m.x, LOG2E_HI);
    q.y += ln_m.x * LOG2E_LO + ln_m.y * LOG2E_HI;
    vec2 lm = fast_two_sum(q.x, q.y);
    vec2 r = two_sum(float(k), lm.x);
    return fast_two_sum(r.x, r.y + lm.y);
}

/* 2^f for |f| <= 1/2 (and a little more) to within about one ulp: Taylor series of
 * e^(f ln 2) to degree 7 (truncation < 6e-9 relative), 1 added last */
float exp2_half(float f) {
    float g = f * 0.693147180559945309;
    precise float q = g * (1.0 + g * (1.0 / 2.0 + g * (1.0 / 6.0 + g * (1.0 / 24.0 + g * (1.0 / 120.0 + g * (1.0 / 720.0 + g * (1.0 / 5040.0)))))));
    precise float r = 1.0 + q;
    return r;
}

/* 2^(t.x + t.y) for a (hi, lo) exponent: n + f with n = round(hi), |f| <= 1/2 */
float exp2_hl(vec2 t) {
    if (t.x >= 128.0) return inf_();
    if (t.x <= -150.0) return 0.0;
    float n = round(t.x);
    precise float f = (t.x - n) + t.y;
    return ldexp(exp2_half(f), int(n));
}

/* e^x = 2^(x log2 e), the product kept as (hi, lo) */
float exp_accurate(float x) {
    if (isnan(x)) return x;
    if (x > 89.0) return inf_(); /* also keeps split_ clear of overflow */
    if (x < -104.0) return 0.0;
    const float LOG2E_HI = 1.44269502162933349609375;
    const float LOG2E_LO = 1.925963033500011e-08;
    vec2 t = two_prod(x, LOG2E_HI);
    return exp2_hl(fast_two_sum(t.x, t.y + x * LOG2E_LO));
}

/* Helpers of the activation expressions (mnnpy/ops/activation.py, written in the common subset
 * of OpenCL C and GLSL; shaders/opencl/common.h has the OpenCL side). NaN propagates as in
 * numpy: each form that clamps tests isnan() itself, since a compiler may turn `v < lo ? lo : v`
 * into a min/max instruction, which returns the other operand for NaN (NVIDIA's driver does). */
#define fabs(x) abs(x)
float clip_(float v, float lo, float hi) { return isnan(v) ? v : min(max(v, lo), hi); }
float exp_(float v) { return exp_accurate(v); }
float sqrt_(float v) { return v < 0.0 ? nan_() : sqrt(v); }

/* sigmoid(v) = 1 / (1 + exp(-v)), evaluated on the side where exp does not overflow */
float sigmoid_(float v) {
    float e = exp(-abs(v));
    float s = 1.0 / (1.0 + e);
    return isnan(v) ? v : (v >= 0.0 ? s : e * s);
}

/* tanh(v) = sign(v) * (1 - 2 / (exp(2|v|) + 1)); a series near 0 (exact 0 at 0), +-1 for large |v| */
float tanh_(float v) {
    float a = abs(v);
    float t = a < 0.0625 ? a * (1.0 - a * a * (1.0 / 3.0 - a * a * (2.0 / 15.0))) : 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    return isnan(v) ? v : (v < 0.0 ? -t : t);
}
#endif

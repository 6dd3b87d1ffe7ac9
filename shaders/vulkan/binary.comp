#version 450
/* Elementwise binary ops of mnnpy's Vulkan backend with numpy broadcasting:
 * c[i] = G(a[ia], b[ib]) for i < n.
 *
 * Variant macros (shaders/vulkan/manifest.json): OP_ADD | OP_SUB | OP_MUL | OP_DIV | OP_POW
 *   | OP_MAX | OP_MIN | OP_MOD (c has a's dtype), OP_EQUAL | OP_LESS | OP_GREATER | OP_LESSOREQUAL
 *   | OP_GREATEROREQUAL (with DST_BOOL), OP_AND | OP_OR | OP_XOR (SRC_BOOL); the operands' dtype
 *   by SRC_I32 | SRC_I64 | SRC_BOOL (storage.glsl; float without one).
 * Specialization constants: 0 local size x; 1 BROADCAST (false: a, b and c have one shape and
 *   ia = ib = i; true: i is split into an index over dims[0..rank) (outermost first) and ia,
 *   ib are its dot products with the element strides astr/bstr, 0 where broadcast); 2 FMOD
 *   (Mod: true for the dividend's sign, C's %; false for the divisor's).
 * Push constants (116 bytes): n, rank (<= 8), a_off, b_off, c_off (elements from each
 *   binding's start), dims[8], astr[8], bstr[8].
 * Bindings: 0 a, 1 b (read), 2 c (written). Dispatch as in unary.comp.
 * NaN propagates as in numpy (Max/Min included); Pow follows C's pow for special values.
 * Integers wrap around (GLSL's + - *); Div truncates toward zero, computed on magnitudes in
 * unsigned arithmetic (so MIN / -1 wraps to MIN); Mod is a - trunc(a / b) * b moved to the
 * divisor's sign unless FMOD, 0 for a zero divisor.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool BROADCAST = false;
#ifdef OP_MOD
layout(constant_id = 2) const bool FMOD = false;
#endif

SRC_IN(0, a)
SRC_IN(1, b)
DST_OUT(2, c)
layout(push_constant) uniform Push {
    uint n;
    uint rank;
    uint a_off;
    uint b_off;
    uint c_off;
    uint dims[8];
    uint astr[8];
    uint bstr[8];
} pc;

bool odd_integer(float y) { return floor(y) == y && floor(y * 0.5) * 2.0 != y; }

/* C99 pow for special values: x**0 = 1, 1**y = 1, a negative base takes only integer
 * exponents (sign from their parity), zero and infinite bases and exponents as C defines.
 * Finite cases: 2^(y log2 x) with the exponent as (hi, lo), split into n + f, |f| <= 1/2. */
float pow_(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return nan_();
    float ax = abs(x);
    bool odd = odd_integer(y);
    if (isinf(y)) return ax == 1.0 ? 1.0 : ((ax > 1.0) == (y > 0.0) ? inf_() : 0.0);
    float r;
    if (x == 0.0 || isinf(x)) {
        r = (x == 0.0) == (y < 0.0) ? inf_() : 0.0;
    } else {
        if (x < 0.0 && floor(y) != y) return nan_();
        vec2 l = log2_hl(ax);
        float rough = y * l.x; /* settles overflow and underflow before split_ could overflow */
        if (rough >= 129.0) return odd ? with_sign_of(inf_(), x) : inf_();
        if (rough <= -151.0) return odd ? with_sign_of(0.0, x) : 0.0;
        vec2 t = two_prod(y, l.x);
        t = fast_two_sum(t.x, t.y + y * l.y);
        r = exp2_hl(t);
    }
    return odd ? with_sign_of(r, x) : r;
}

#ifdef SRC_INTEGER
/* trunc(u / v) for v != 0, on magnitudes (unsigned division is defined for every operand) */
SRC_T div_(SRC_T u, SRC_T v) {
    SRC_U q = SRC_U(u < 0 ? -u : u) / SRC_U(v < 0 ? -v : v);
    return (u < 0) != (v < 0) ? -SRC_T(q) : SRC_T(q);
}
#ifdef OP_MOD
SRC_T mod_(SRC_T u, SRC_T v) {
    if (v == 0) return SRC_T(0);
    SRC_T r = u - div_(u, v) * v;
    if (!FMOD && r != 0 && (r < 0) != (v < 0)) r += v;
    return r;
}
#endif
#endif

DST_T G(SRC_T u, SRC_T v) {
#if defined(OP_ADD)
    return u + v;
#elif defined(OP_SUB)
    return u - v;
#elif defined(OP_MUL)
    return u * v;
#elif defined(OP_DIV) && defined(SRC_INTEGER)
    return div_(u, v);
#elif defined(OP_DIV)
    return u / v;
#elif defined(OP_POW)
    return pow_(u, v);
#elif defined(OP_MAX) && defined(SRC_INTEGER)
    return u > v ? u : v;
#elif defined(OP_MAX)
    return (isnan(u) || u > v) ? u : v;
#elif defined(OP_MIN) && defined(SRC_INTEGER)
    return u < v ? u : v;
#elif defined(OP_MIN)
    return (isnan(u) || u < v) ? u : v;
#elif defined(OP_MOD) && defined(SRC_INTEGER)
    return mod_(u, v);
#elif defined(OP_EQUAL)
    return u == v;
#elif defined(OP_LESS)
    return u < v;
#elif defined(OP_GREATER)
    return u > v;
#elif defined(OP_LESSOREQUAL)
    return u <= v;
#elif defined(OP_GREATEROREQUAL)
    return u >= v;
#elif defined(OP_AND)
    return u && v;
#elif defined(OP_OR)
    return u || v;
#elif defined(OP_XOR)
    return u != v;
#else
#error "binary.comp: define one OP_* macro (OP_MOD: with an integer SRC_)"
#endif
}

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    uint ia = i, ib = i;
    if (BROADCAST) {
        uint rest = i;
        ia = 0u;
        ib = 0u;
        for (int k = int(pc.rank) - 1; k >= 0; --k) {
            uint q = rest % pc.dims[k];
            rest /= pc.dims[k];
            ia += q * pc.astr[k];
            ib += q * pc.bstr[k];
        }
    }
    c_st(pc.c_off + i, G(a_ld(pc.a_off + ia), b_ld(pc.b_off + ib)));
}

#version 450
/* Tiled GEMM of mnnpy's Vulkan backend, shared by MatMul, Gemm and the 1x1 Conv (float32):
 *
 *   Y[b](i, j) = ACT(ALPHA * sum_k A[b](i, k) * B[b](k, j) + BETA * C(i, j)),  i < M, j < N
 *
 * Operands row-major with leading dimensions lda, ldb, ldy (elements). Variant macros
 * (shaders/vulkan/manifest_gemm.json): GEMM_NN (neither operand transposed), TRANS_A (A
 * stored (K, M): element (i, k) at A[k*lda + i]), TRANS_B (B stored (N, K): element (k, j)
 * at B[j*ldb + k]), or both; GEMV (B stored (N, K), one batch, few rows: see its main());
 * SPLITK_SUM (the second pass of split-K, below).
 * Split-K (specialization constant 18 SPLIT > 1, grids too small for the GPU): work group z
 * = b*SPLIT + s sums the s-th TK-aligned slice of K and stores its raw float32 partial tile
 * at Y[((b*SPLIT + s)*M + i)*N + j] (Y bound to a float32 scratch; no ALPHA, C or ACT);
 * gemm_splitk then adds the slices.
 * Specialization constants: 0, 10, 11 local size (LX, LY, 1); 1 ACT (fused activation, see
 *   act_), 2 A0, 3 A1 (its scalars); 4 HAS_C (C term: C(i, j) = C[c_off + i*csm + j*csn],
 *   strides 0 where broadcast; Conv bias: csm = 1, csn = 0); 5 BATCH_TABLE (batch b reads A
 *   and B at table[t_off + 2b], table[t_off + 2b + 1] instead of b*sa, b*sb: MatMul's
 *   broadcast batch dims); 6 ALPHA, 7 BETA.
 * Push constants (64 bytes): a_off, b_off, c_off, t_off, y_off (elements from each binding's
 *   start), M, N, K, lda, ldb, ldy, sa, sb, sy (per-batch strides of A, B, Y), csm, csn.
 * Bindings: 0 A, 1 B, 2 C, 3 table (uint) (read), 4 Y (written); unused C/table bound to A.
 * Dispatch: groups (ceil(N / TN), ceil(M / TM), batches), local (LX, LY, 1).
 *
 * Tiling: a work group computes a TM x TN = (LY*RM) x (LX*RN) tile of Y; each invocation a
 * register block of RM x RN outputs (rows ty + i*LY, columns tx + j*LX, so that neighbouring
 * invocations store neighbouring columns). K advances by TK through shared-memory tiles of A
 * (TK x TM) and B (TK x TN), loaded by the whole group (zero outside the matrices, so the
 * inner loop has no bounds checks). Every invocation reaches every barrier (no early exit).
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"
layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;
layout(constant_id = 1) const uint ACT = 0;
layout(constant_id = 2) const float A0 = 0.0;
layout(constant_id = 3) const float A1 = 0.0;
layout(constant_id = 4) const bool HAS_C = false;
layout(constant_id = 5) const bool BATCH_TABLE = false;
layout(constant_id = 6) const float ALPHA = 1.0;
layout(constant_id = 7) const float BETA = 1.0;
layout(constant_id = 18) const uint SPLIT = 1; /* split-K: slices of K (see below) */

#define RM 4
#define RN 4
#define TK 16
const uint LX = gl_WorkGroupSize.x;
const uint LY = gl_WorkGroupSize.y;
const uint TM = LY * RM;
const uint TN = LX * RN;
const uint GROUP = LX * LY;
const uint TMP = TM + 1; /* padded rows of the shared tiles: the loads that walk k store */
const uint TNP = TN + 1; /* along a column without bank conflicts */

FLOAT_IN(0, a)
FLOAT_IN(1, b)
FLOAT_IN(2, c)
layout(std430, binding = 3) readonly buffer BufT { uint table[]; };
FLOAT_OUT(4, y)
layout(push_constant) uniform Push {
    uint a_off, b_off, c_off, t_off, y_off;
    uint M, N, K, lda, ldb, ldy;
    uint sa, sb, sy, csm, csn;
} pc;

#define FUSED_ACTIVATION
#include "activation.glsl"

#if !defined(GEMV) && !defined(SPLITK_SUM)
shared float As[TK * TMP]; /* As[kk*TMP + r] = A(row0 + r, k0 + kk) */
shared float Bs[TK * TNP]; /* Bs[kk*TNP + j] = B(k0 + kk, col0 + j) */

void main() {
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint lid = ty * LX + tx;
    const uint col0 = gl_WorkGroupID.x * TN, row0 = gl_WorkGroupID.y * TM;
    const uint bz = gl_WorkGroupID.z / SPLIT, slice = gl_WorkGroupID.z % SPLIT;
    uint a_off = pc.a_off, b_off = pc.b_off;
    if (BATCH_TABLE) {
        a_off += table[pc.t_off + 2u * bz];
        b_off += table[pc.t_off + 2u * bz + 1u];
    } else {
        a_off += bz * pc.sa;
        b_off += bz * pc.sb;
    }
    const uint M = pc.M, N = pc.N;
    /* split-K: this group sums k in [k_begin, K) of slice `slice` (TK-aligned slices) */
    const uint KC = ((pc.K + SPLIT - 1u) / SPLIT + TK - 1u) / TK * TK;
    const uint k_begin = min(pc.K, slice * KC), K = min(pc.K, k_begin + KC);

    float acc[RM][RN];
    for (uint i = 0; i < RM; ++i)
        for (uint j = 0; j < RN; ++j) acc[i][j] = 0.0;

    for (uint k0 = k_begin; k0 < K; k0 += TK) {
        for (uint e = lid; e < TM * TK; e += GROUP) {
#ifdef TRANS_A
            const uint kk = e / TM, r = e % TM; /* neighbours read neighbouring rows (contiguous) */
            const uint gr = row0 + r, gk = k0 + kk;
            As[kk * TMP + r] = (gr < M && gk < K) ? a_ld(a_off + gk * pc.lda + gr) : 0.0;
#else
            const uint r = e / TK, kk = e % TK; /* neighbours read neighbouring k (contiguous) */
            const uint gr = row0 + r, gk = k0 + kk;
            As[kk * TMP + r] = (gr < M && gk < K) ? a_ld(a_off + gr * pc.lda + gk) : 0.0;
#endif
        }
        for (uint e = lid; e < TN * TK; e += GROUP) {
#ifdef TRANS_B
            const uint j = e / TK, kk = e % TK;
            const uint gc = col0 + j, gk = k0 + kk;
            Bs[kk * TNP + j] = (gc < N && gk < K) ? b_ld(b_off + gc * pc.ldb + gk) : 0.0;
#else
            const uint kk = e / TN, j = e % TN;
            const uint gc = col0 + j, gk = k0 + kk;
            Bs[kk * TNP + j] = (gc < N && gk < K) ? b_ld(b_off + gk * pc.ldb + gc) : 0.0;
#endif
        }
        barrier();
        for (uint kk = 0; kk < TK; ++kk) {
            float av[RM], bv[RN];
            for (uint i = 0; i < RM; ++i) av[i] = As[kk * TMP + ty + i * LY];
            for (uint j = 0; j < RN; ++j) bv[j] = Bs[kk * TNP + tx + j * LX];
            for (uint i = 0; i < RM; ++i)
                for (uint j = 0; j < RN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier();
    }

    const uint y_off = pc.y_off + bz * pc.sy;
    for (uint i = 0; i < RM; ++i) {
        const uint r = row0 + ty + i * LY;
        if (r >= M) break;
        for (uint j = 0; j < RN; ++j) {
            const uint col = col0 + tx + j * LX;
            if (col < N && SPLIT > 1u) { /* a float32 partial sum; gemm_splitk adds the slices */
                y_st(pc.y_off + ((gl_WorkGroupID.z * M) + r) * N + col, acc[i][j]);
            } else if (col < N) {
                float v = ALPHA * acc[i][j];
                if (HAS_C) v += BETA * c_ld(pc.c_off + r * pc.csm + col * pc.csn);
                y_st(y_off + r * pc.ldy + col, act_(v));
            }
        }
    }
}
#elif defined(SPLITK_SUM)
/* Second pass of split-K: Y[b](i, j) = ACT(ALPHA * sum_s P[b, s](i, j) + BETA * C(i, j)) over
 * the SPLIT float32 partial products P (binding 0, (batch, SPLIT, M, N) from a_off), one
 * invocation per output, 1-D dispatch (groups split over x and y past the x limit). */
void main() {
    const uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    const uint M = pc.M, N = pc.N;
    if (i >= pc.sb) return; /* sb: batch * M * N outputs */
    const uint col = i % N, r = (i / N) % M, bz = i / (M * N);
    float acc = 0.0;
    for (uint s = 0u; s < SPLIT; ++s) acc += a_ld(pc.a_off + ((bz * SPLIT + s) * M + r) * N + col);
    float v = ALPHA * acc;
    if (HAS_C) v += BETA * c_ld(pc.c_off + r * pc.csm + col * pc.csn);
    y_st(pc.y_off + bz * pc.sy + r * pc.ldy + col, act_(v));
}
#else
/* GEMV (M <= 8, B transposed, one batch: classifier heads): one work group of LX invocations
 * per output (i, j) = (group y, group x); each invocation sums every LX-th k of
 * A(i, :) . B(:, j) (both contiguous rows), then a shared-memory tree reduction. */
shared float partial[LX];

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint col = gl_WorkGroupID.x, r = gl_WorkGroupID.y;
    const uint a_row = pc.a_off + r * pc.lda, b_row = pc.b_off + col * pc.ldb;
    float acc = 0.0;
    for (uint k = lid; k < pc.K; k += LX) acc = fma(a_ld(a_row + k), b_ld(b_row + k), acc);
    partial[lid] = acc;
    barrier();
    for (uint h = LX / 2u; h > 0u; h >>= 1u) {
        if (lid < h) partial[lid] += partial[lid + h];
        barrier();
    }
    if (lid == 0u) {
        float v = ALPHA * partial[0];
        if (HAS_C) v += BETA * c_ld(pc.c_off + r * pc.csm + col * pc.csn);
        y_st(pc.y_off + r * pc.ldy + col, act_(v));
    }
}
#endif

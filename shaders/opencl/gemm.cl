/* Tiled GEMM shared by MatMul, Gemm and the 1x1 Conv (build options pick the variant).
 *
 *   Y[b](i, j) = ACT(alpha * sum_k A[b](i, k) * B[b](k, j) + beta * C(i, j)),  i < M, j < N
 *
 * Row-major operands with leading dimensions lda, ldb, ldy (elements). -D TRANS_A: A is
 * stored (K, M), element (i, k) at A[k*lda + i]; -D TRANS_B: B is stored (N, K).
 * -D HAS_C: C(i, j) = C[c_off + i*csm + j*csn] (strides 0 where C is broadcast; Conv bias:
 * csm = 1, csn = 0). Batch b = get_global_id(2): offsets a_off + b*sa, b_off + b*sb, or with
 * -D BATCH_TABLE the pairs table[2b], table[2b+1] (MatMul's broadcast batch dims); y_off + b*sy.
 *
 * Tiling: a work group of LX x LY items computes a TM x TN = (LY*RM) x (LX*RN) tile of Y;
 * each item owns RM x RN outputs (rows ty + i*LY, columns tx + j*LX, so that the stores of
 * neighbouring items are contiguous). K advances in steps of TK through local-memory tiles of
 * A (TK x TM) and B (TK x TN) loaded cooperatively (zero-filled outside the matrices). The
 * local size must be exactly (LX, LY, 1): the host passes it and the kernel requires it.
 */
#ifndef LX
#define LX 16
#endif
#ifndef LY
#define LY 16
#endif
#ifndef RM
#define RM 4
#endif
#ifndef RN
#define RN 4
#endif
#ifndef TK
#define TK 16
#endif
#define TM (LY * RM)
#define TN (LX * RN)
#define GROUP (LX * LY)
#ifdef TRANS_A
#define IDX_A(i, k) ((k) * lda + (i))
#else
#define IDX_A(i, k) ((i) * lda + (k))
#endif
#ifdef TRANS_B
#define IDX_B(k, j) ((j) * ldb + (k))
#else
#define IDX_B(k, j) ((k) * ldb + (j))
#endif

__kernel __attribute__((reqd_work_group_size(LX, LY, 1))) void gemm(
    __global const a_t *A, int a_off, __global const b_t *B, int b_off, __global const c_t *C, int c_off,
    __global store_t *Y, int y_off, int M, int N, int K, int lda, int ldb, int ldy, int sa, int sb, int sy, int csm, int csn,
    float alpha, float beta, __global const int *table, float a0, float a1) {
#ifndef DIRECT
    __local float As[TK][TM];
    __local float Bs[TK][TN];
#endif
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * LX + tx;
    const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM;
    const int b = get_global_id(2);
#ifdef BATCH_TABLE
    a_off += table[2 * b];
    b_off += table[2 * b + 1];
#else
    a_off += b * sa;
    b_off += b * sb;
#endif
    y_off += b * sy;

    float acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

#ifdef DIRECT
    /* No local memory: operands straight from global memory (CPU devices, where caches do
     * the tiling and barriers are costly). Rows/columns outside Y are clamped, not stored. */
    int ra[RM], cb[RN];
#pragma unroll
    for (int i = 0; i < RM; ++i) ra[i] = min(row0 + ty + i * LY, M - 1);
#pragma unroll
    for (int j = 0; j < RN; ++j) cb[j] = min(col0 + tx + j * LX, N - 1);
    for (int k = 0; k < K; ++k) {
        float av[RM], bv[RN];
#pragma unroll
        for (int i = 0; i < RM; ++i) av[i] = LOAD_A(A, a_off + IDX_A(ra[i], k));
#pragma unroll
        for (int j = 0; j < RN; ++j) bv[j] = LOAD_B(B, b_off + IDX_B(k, cb[j]));
#pragma unroll
        for (int i = 0; i < RM; ++i)
#pragma unroll
            for (int j = 0; j < RN; ++j) acc[i][j] = mad(av[i], bv[j], acc[i][j]);
    }
#else
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int e = lid; e < TM * TK; e += GROUP) {
#ifdef TRANS_A
            const int kk = e / TM, r = e % TM; /* consecutive items: consecutive rows (contiguous in memory) */
            const int gr = row0 + r, gk = k0 + kk;
            As[kk][r] = (gr < M && gk < K) ? LOAD_A(A, a_off + gk * lda + gr) : 0.0f;
#else
            const int r = e / TK, kk = e % TK; /* consecutive items: consecutive k */
            const int gr = row0 + r, gk = k0 + kk;
            As[kk][r] = (gr < M && gk < K) ? LOAD_A(A, a_off + gr * lda + gk) : 0.0f;
#endif
        }
        for (int e = lid; e < TN * TK; e += GROUP) {
#ifdef TRANS_B
            const int c = e / TK, kk = e % TK;
            const int gc = col0 + c, gk = k0 + kk;
            Bs[kk][c] = (gc < N && gk < K) ? LOAD_B(B, b_off + gc * ldb + gk) : 0.0f;
#else
            const int kk = e / TN, c = e % TN;
            const int gc = col0 + c, gk = k0 + kk;
            Bs[kk][c] = (gc < N && gk < K) ? LOAD_B(B, b_off + gk * ldb + gc) : 0.0f;
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            float av[RM], bv[RN];
#pragma unroll
            for (int i = 0; i < RM; ++i) av[i] = As[kk][ty + i * LY];
#pragma unroll
            for (int j = 0; j < RN; ++j) bv[j] = Bs[kk][tx + j * LX];
#pragma unroll
            for (int i = 0; i < RM; ++i)
#pragma unroll
                for (int j = 0; j < RN; ++j) acc[i][j] = mad(av[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif

#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int r = row0 + ty + i * LY;
#pragma unroll
        for (int j = 0; j < RN; ++j) {
            const int c = col0 + tx + j * LX;
            if (r < M && c < N) {
                float v = alpha * acc[i][j];
#ifdef HAS_C
                v += beta * LOAD_C(C, c_off + r * csm + c * csn);
#endif
                STORE(ACT(v), Y, y_off + r * ldy + c);
            }
        }
    }
}

/* GEMV (few rows, -D TRANS_B, one batch: classifier heads): one work group of GV items per
 * output (i, j) = (group 1, group 0); each item sums every GV-th k of A(i, :) . B(:, j), both
 * contiguous rows, then a local-memory tree reduction. The tiled kernel would run
 * ceil(N / TN) work groups, each over all of K: a 1000-class head leaves most of a GPU idle. */
#ifndef GV
#define GV 64
#endif
__kernel __attribute__((reqd_work_group_size(GV, 1, 1))) void gemv(
    __global const a_t *A, int a_off, __global const b_t *B, int b_off, __global const c_t *C, int c_off,
    __global store_t *Y, int y_off, int M, int N, int K, int lda, int ldb, int ldy, int sa, int sb, int sy, int csm, int csn,
    float alpha, float beta, __global const int *table, float a0, float a1) {
    __local float part[GV];
    const int lid = get_local_id(0), c = get_group_id(0), r = get_group_id(1);
    float acc = 0.0f;
    for (int k = lid; k < K; k += GV) acc = mad(LOAD_A(A, a_off + r * lda + k), LOAD_B(B, b_off + c * ldb + k), acc);
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = GV / 2; h > 0; h >>= 1) {
        if (lid < h) part[lid] += part[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        float v = alpha * part[0];
#ifdef HAS_C
        v += beta * LOAD_C(C, c_off + r * csm + c * csn);
#endif
        STORE(ACT(v), Y, y_off + r * ldy + c);
    }
}

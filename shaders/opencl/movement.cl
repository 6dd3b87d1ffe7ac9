/* Data movement: strided copies (Reshape-copy, Slice, Concat, Split, Transpose) and a
 * tiled transpose. Values are copied through LOAD/STORE (exact for fp32 and fp16 storage);
 * strided also copies int32, int64 and bool data (common.h's -D SRC_<CODE>) as it is.
 *
 * strided: -D RANK=r (1..8). kernel `strided(x, x_off, y, y_off, inner, outer, dims, xstr, ystr)`,
 *   work (inner, outer). Index space: `dims` (int8, outermost first, leading dims 1; the
 *   innermost dim is dims.s7 == inner, outer == product of the other dims). Element
 *   (i_0..i_7) is read at x_off + sum i_k * xstr_k and written at y_off + sum i_k * ystr_k
 *   (strides in elements, may be negative for Slice with negative steps).
 *   With -D VEC4 (innermost strides both 1): each work item copies 4 consecutive
 *   elements (work (ceil(inner / 4), outer)), the tail element by element.
 *
 * transpose_tiled: -D TILE=t -D NB=b (batch dims, 0..6). Output axis A is the input's
 *   innermost axis (input stride 1), output axis B is the output's innermost (output
 *   stride 1). Work (nb, na, batch), local (TILE, TILE, 1): a TILE x TILE tile is read
 *   along A (coalesced in x), kept in local memory and written along B (coalesced in y).
 *   `bdims`/`bxstr`/`bystr` (int8, outermost first, leading 1/0) decompose the batch index.
 */

#if defined(SRC_TYPED) /* integer or bool data (common.h's -D SRC_<CODE>; strided only): as it is */
#define LOAD4(p, i) vload4(0, (p) + (i))
#define STORE4(v, p, i) vstore4((v), 0, (p) + (i))
#elif defined(STORAGE_HALF)
#define LOAD4(p, i) vload_half4(0, (p) + (i))
#define STORE4(v, p, i) vstore_half4((v), 0, (p) + (i))
#else
#define LOAD4(p, i) vload4(0, (p) + (i))
#define STORE4(v, p, i) vstore4((v), 0, (p) + (i))
#endif

/* Adds to *ix and *iy the offsets (strides xstr, ystr) of flat index j over the dims
 * dims[lo..hi] (outermost first; dims[hi] varies fastest). */
inline void add_offsets(int j, int8 dims, int8 xstr, int8 ystr, int lo, int hi, int *ix, int *iy) {
    int d[8], sx[8], sy[8];
    vstore8(dims, 0, d);
    vstore8(xstr, 0, sx);
    vstore8(ystr, 0, sy);
#pragma unroll
    for (int k = hi; k >= lo; --k) {
        int q = j % d[k];
        j /= d[k];
        *ix += q * sx[k];
        *iy += q * sy[k];
    }
}

#ifdef RANK
__kernel void strided(__global const src_t *x, int x_off, __global dst_t *y, int y_off, int inner, int outer, int8 dims,
                      int8 xstr, int8 ystr) {
    int i = get_global_id(0), j = get_global_id(1);
#ifdef VEC4
    i *= 4;
#endif
    if (i >= inner || j >= outer) return;
    int ix = x_off + i * xstr.s7, iy = y_off + i * ystr.s7;
    add_offsets(j, dims, xstr, ystr, 8 - RANK, 6, &ix, &iy);
#ifdef VEC4
    if (i + 4 <= inner) {
        STORE4(LOAD4(x, ix), y, iy);
    } else {
        for (int k = 0; k < inner - i; ++k) WRITE_DST(READ_SRC(x, ix + k), y, iy + k);
    }
#else
    WRITE_DST(READ_SRC(x, ix), y, iy);
#endif
}
#endif

#ifdef TILE
__kernel void transpose_tiled(__global const store_t *x, int x_off, __global store_t *y, int y_off, int na, int nb,
                              int xs_b, int ys_a, int8 bdims, int8 bxstr, int8 bystr) {
    __local float tile[TILE][TILE + 1];
    int tx = get_local_id(0), ty = get_local_id(1);
    int b0 = get_group_id(0) * TILE, a0 = get_group_id(1) * TILE;
    int z = get_global_id(2);
    int xb = x_off, yb = y_off;
#if NB > 0
    add_offsets(z, bdims, bxstr, bystr, 8 - NB, 7, &xb, &yb);
#endif
    int a = a0 + tx, b = b0 + ty; /* read: consecutive tx -> consecutive input elements */
    if (a < na && b < nb) tile[ty][tx] = LOAD(x, xb + a + b * xs_b);
    barrier(CLK_LOCAL_MEM_FENCE);
    b = b0 + tx;
    a = a0 + ty; /* write: consecutive tx -> consecutive output elements */
    if (a < na && b < nb) STORE(tile[tx][ty], y, yb + b + a * ys_a);
}
#endif

/* gather: Gather with indices known at resize. X viewed as (pre, axis_len, post), Y as
 * (pre, nidx, post): Y[p, k, i] = X[p, idx[k], i] (idx already non-negative). Work (post, nidx, pre). */
__kernel void gather(__global const store_t *x, int x_off, __global store_t *y, int y_off, int post, int nidx, int pre, int axis_len,
                     __global const int *idx) {
    int i = get_global_id(0), k = get_global_id(1), p = get_global_id(2);
    if (i >= post || k >= nidx || p >= pre) return;
    STORE(LOAD(x, x_off + (p * axis_len + idx[k]) * post + i), y, y_off + (p * nidx + k) * post + i);
}

/* Resize (ONNX operators.md #Resize) over the last two axes of X viewed as (P, IH, IW) ->
 * Y (P, OH, OW), P = product of the leading axes (N*C for NCHW). Per-axis tables are made
 * at resize on the host by the CPU backend's coordinate rules, so every
 * coordinate_transformation_mode / nearest_mode maps exactly as on the CPU:
 *
 * resize_nearest: `hidx[OH]`, `widx[OW]` (int): Y[p, h, w] = X[p, hidx[h], widx[w]]; 4 outputs of a row per work item.
 * resize_linear:  `htab[OH]`, `wtab[OW]` (int4: lo, hi, as_int(w_lo), as_int(w_hi)):
 *   Y = wh_lo * (ww_lo * X[lo, lo'] + ww_hi * X[lo, hi']) + wh_hi * (ww_lo * X[hi, lo'] + ww_hi * X[hi, hi']).
 * Weights stay fp32 in both storage modes.
 */

#ifdef STORAGE_HALF
#define STORE4(v, p, i) vstore_half4((v), 0, (p) + (i))
#else
#define STORE4(v, p, i) vstore4((v), 0, (p) + (i))
#endif

/* work (ceil(OW / 4), OH, P): 4 consecutive outputs of a row per work item */
__kernel void resize_nearest(__global const store_t *x, int x_off, __global store_t *y, int y_off, int ih, int iw, int oh, int ow,
                             int planes, __global const int *hidx, __global const int *widx) {
    int w = get_global_id(0) * 4, h = get_global_id(1), p = get_global_id(2);
    if (w >= ow || h >= oh || p >= planes) return;
    int row = x_off + (p * ih + hidx[h]) * iw;
    int yi = y_off + (p * oh + h) * ow + w;
    if (w + 4 <= ow) {
        float4 v = (float4)(LOAD(x, row + widx[w]), LOAD(x, row + widx[w + 1]), LOAD(x, row + widx[w + 2]), LOAD(x, row + widx[w + 3]));
        STORE4(v, y, yi);
    } else {
        for (int k = 0; k < ow - w; ++k) STORE(LOAD(x, row + widx[w + k]), y, yi + k);
    }
}

/* work (ceil(OW / 4), OH, P): 4 consecutive outputs of a row per work item */
__kernel void resize_linear(__global const store_t *x, int x_off, __global store_t *y, int y_off, int ih, int iw, int oh, int ow,
                            int planes, __global const int4 *htab, __global const int4 *wtab) {
    int w0 = get_global_id(0) * 4, h = get_global_id(1), p = get_global_id(2);
    if (w0 >= ow || h >= oh || p >= planes) return;
    int4 th = htab[h];
    int r0 = x_off + (p * ih + th.x) * iw, r1 = x_off + (p * ih + th.y) * iw;
    float hl = as_float(th.z), hr = as_float(th.w);
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        int4 tw = wtab[min(w0 + k, ow - 1)];
        float wl = as_float(tw.z), wr = as_float(tw.w);
        float top = wl * LOAD(x, r0 + tw.x) + wr * LOAD(x, r0 + tw.y);
        float bot = wl * LOAD(x, r1 + tw.x) + wr * LOAD(x, r1 + tw.y);
        v[k] = hl * top + hr * bot;
    }
    int yi = y_off + (p * oh + h) * ow + w0;
    if (w0 + 4 <= ow) {
        STORE4(vload4(0, v), y, yi);
    } else {
        for (int k = 0; k < ow - w0; ++k) STORE(v[k], y, yi + k);
    }
}

/* Windowed 2-D pooling, NCHW (1-D pools run as H = 1). ONNX operators.md MaxPool / AveragePool.
 *
 * -D POOL_MAX | POOL_AVG [-D COUNT_INCLUDE_PAD]
 * kernel `pool2d(x, x_off, y, y_off, nc, ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw, ph_end, pw_end)`:
 * one work item per output (ox, oy, n*C + c) = global ids (0, 1, 2). The window's taps are
 * h = oy*sh - ph + i*dh, w = ox*sw - pw + j*dw; only taps inside X are read (padding never
 * is). MaxPool: max of the taps (-inf for a window of padding only; NaN propagates as in
 * numpy). AveragePool: sum / count, count = taps inside X, or with COUNT_INCLUDE_PAD taps
 * inside the explicitly padded input [-ph, ih + ph_end) (ceil_mode overhang never counts);
 * a count of 0 divides by 1.
 */
#pragma OPENCL FP_CONTRACT OFF

/* taps [*lo, *hi) of k taps at start + t*d that fall inside [0, size) */
inline void tap_range(int start, int size, int k, int d, int *lo, int *hi) {
    int l = start >= 0 ? 0 : (-start + d - 1) / d;
    int last = size - 1 - start; /* highest offset from start still inside */
    int h = last < 0 ? 0 : min(k, last / d + 1);
    *lo = l;
    *hi = max(h, l);
}

__kernel void pool2d(__global const store_t *x, int x_off, __global store_t *y, int y_off, int nc, int ih, int iw, int oh,
                     int ow, int kh, int kw, int sh, int sw, int dh, int dw, int ph, int pw, int ph_end, int pw_end) {
    const int ox = get_global_id(0), oy = get_global_id(1), c = get_global_id(2);
    if (ox >= ow || oy >= oh || c >= nc) return;
    const int y0 = oy * sh - ph, x0 = ox * sw - pw;
    int i0, i1, j0, j1;
    tap_range(y0, ih, kh, dh, &i0, &i1);
    tap_range(x0, iw, kw, dw, &j0, &j1);
    const int base = x_off + c * ih * iw;
#ifdef POOL_MAX
    float acc = -INFINITY;
    for (int i = i0; i < i1; ++i) {
        const int row = base + (y0 + i * dh) * iw + x0;
        for (int j = j0; j < j1; ++j) {
            float v = LOAD(x, row + j * dw);
            acc = (isnan(v) || v > acc) ? v : acc;
        }
    }
#else
    float acc = 0.0f;
    for (int i = i0; i < i1; ++i) {
        const int row = base + (y0 + i * dh) * iw + x0;
        for (int j = j0; j < j1; ++j) acc += LOAD(x, row + j * dw);
    }
#ifdef COUNT_INCLUDE_PAD
    int a0, a1, b0, b1;
    tap_range(y0 + ph, ih + ph + ph_end, kh, dh, &a0, &a1);
    tap_range(x0 + pw, iw + pw + pw_end, kw, dw, &b0, &b1);
    const int count = (a1 - a0) * (b1 - b0);
#else
    const int count = (i1 - i0) * (j1 - j0);
#endif
    acc = acc / (float)max(count, 1);
#endif
    STORE(acc, y, y_off + (c * oh + oy) * ow + ox);
}

/* Prepended to every OpenCL source of mnnpy (by OpenCLRuntime.program).
 *
 * Storage type of float tensors: fp32, or fp16 with -D STORAGE_HALF (precision="low").
 * Kernels read and write float tensors only through LOAD/STORE and compute in float:
 * vload_half/vstore_half are core OpenCL (no cl_khr_fp16 needed), so fp16 storage
 * works on every device; arithmetic stays fp32 (accumulation as in MNN's fp16 mode).
 *
 *   __global store_t *p;  float v = LOAD(p, i);  STORE(v, p, i);
 */
#ifdef STORAGE_HALF
typedef half store_t;
#define LOAD(p, i) vload_half((i), (p))
#define STORE(v, p, i) vstore_half((v), (i), (p))
#define LOAD4_AT(p, i) vload_half4(0, (p) + (i))
#define STORE4_AT(v, p, i) vstore_half4((v), 0, (p) + (i))
#else
typedef float store_t;
#define LOAD(p, i) ((p)[(i)])
#define STORE(v, p, i) ((p)[(i)] = (v))
#define LOAD4_AT(p, i) vload4(0, (p) + (i))
#define STORE4_AT(v, p, i) vstore4((v), 0, (p) + (i))
#endif
/* LOAD4_AT/STORE4_AT: four consecutive elements from element index i (any alignment), as float4 */

/* Operand slots A, B, C of a kernel that may read constants kept fp32 while activations are
 * stored fp16 (OpenCLBackend.fp32_operand): -D A_F32 / B_F32 / C_F32 make that operand
 * `float *` (a_t, b_t, c_t; read with LOAD_A/LOAD_B/LOAD_C), else the storage type. */
#ifdef A_F32
typedef float a_t;
#define LOAD_A(p, i) ((p)[(i)])
#else
typedef store_t a_t;
#define LOAD_A(p, i) LOAD(p, i)
#endif
#ifdef B_F32
typedef float b_t;
#define LOAD_B(p, i) ((p)[(i)])
#else
typedef store_t b_t;
#define LOAD_B(p, i) LOAD(p, i)
#endif
#ifdef C_F32
typedef float c_t;
#define LOAD_C(p, i) ((p)[(i)])
#else
typedef store_t c_t;
#define LOAD_C(p, i) LOAD(p, i)
#endif
/* Fused activations (Conv's `activation` attribute, elementwise ops): ACT(x) with
 * scalars a0, a1 in scope. -D ACT_NONE | ACT_RELU | ACT_CLIP | ACT_LEAKYRELU |
 * ACT_SIGMOID | ACT_HARDSIGMOID | ACT_HARDSWISH | ACT_TANH | ACT_SWISH */
inline float act_clip_(float x, float lo, float hi) {
    float t = x < lo ? lo : x; /* NaN stays NaN (fmin/fmax would drop it) */
    return t > hi ? hi : t;
}
#if defined(ACT_RELU)
#define ACT(x) ((x) < 0.0f ? 0.0f : (x))
#elif defined(ACT_CLIP)
#define ACT(x) act_clip_((x), a0, a1)
#elif defined(ACT_LEAKYRELU)
#define ACT(x) ((x) < 0.0f ? (x) * a0 : (x))
#elif defined(ACT_SIGMOID)
#define ACT(x) (0.5f * (1.0f + tanh(0.5f * (x))))
#elif defined(ACT_HARDSIGMOID)
#define ACT(x) act_clip_((x) * a0 + a1, 0.0f, 1.0f)
#elif defined(ACT_HARDSWISH)
#define ACT(x) ((x) * act_clip_((x) * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f))
#elif defined(ACT_TANH)
#define ACT(x) tanh(x)
#elif defined(ACT_SWISH)
#define ACT(x) ((x) * (0.5f * (1.0f + tanh(0.5f * (x)))))
#else
#define ACT(x) (x)
#endif

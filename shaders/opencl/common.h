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
/* Helpers of the activation expressions (mnnpy/ops/activation.py, written in the common subset
 * of OpenCL C and GLSL; shaders/vulkan/common.glsl has the GLSL side). The macros act_<name>(x,
 * a0, a1) and ACT(x), chosen by -D ACT_<NAME> (ACT_NONE: x), are generated from that table and
 * appended after this file when a program's source is assembled (backends/opencl/activation.py).
 * NaN stays NaN: clip_ compares (fmin/fmax would drop it). Macros, so that a kernel's
 * FP_CONTRACT setting applies where they are used. */
inline float clip_(float x, float lo, float hi) {
    float t = x < lo ? lo : x;
    return t > hi ? hi : t;
}
#define tanh_(x) tanh(x)
/* 1 / (1 + exp(-x)) on the side where exp does not overflow: relative-accurate for large
 * negative x too (0.5 * (1 + tanh(x / 2)) bottoms out at 3e-8, which Swish multiplies by x) */
inline float sigmoid_(float x) {
    float e = exp(-fabs(x));
    float s = 1.0f / (1.0f + e);
    return isnan(x) ? x : (x >= 0.0f ? s : e * s);
}
#define exp_(x) exp(x)
#define sqrt_(x) sqrt(x)

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

/* Tensors of other dtypes (backends/gpu/dtypes.py), for the kernels that take them (elementwise.cl's
 * binary and convert, movement.cl's strided): -D SRC_I32 | SRC_I64 | SRC_BOOL make the kernel's
 * inputs src_t (int, long, uchar: bool is one byte, 0 or 1), read as they are; -D DST_<CODE> (also
 * DST_F32) its output dst_t likewise; without DST_ the output has the inputs' type, and without
 * either, tensors are float storage (store_t above). READ_SRC(p, i) gives a value (float for float
 * storage), WRITE_DST(v, p, i) stores one converted to the output's dtype (bool: v != 0).
 * Integer arithmetic wraps around: src_u is src_t's unsigned type and AS_SRC reinterprets one as
 * src_t (C leaves signed overflow undefined, unsigned wraps). */
#if defined(SRC_I32)
typedef int src_t;
typedef uint src_u;
#define AS_SRC(v) as_int(v)
#elif defined(SRC_I64)
typedef long src_t;
typedef ulong src_u;
#define AS_SRC(v) as_long(v)
#elif defined(SRC_BOOL)
typedef uchar src_t;
typedef uchar src_u;
#define AS_SRC(v) (v)
#endif
#ifdef AS_SRC
#define SRC_TYPED
#define READ_SRC(p, i) ((p)[(i)])
#else
typedef store_t src_t;
#define READ_SRC(p, i) LOAD(p, i)
#endif
#if defined(DST_I32)
typedef int dst_t;
#elif defined(DST_I64)
typedef long dst_t;
#elif defined(DST_BOOL)
typedef uchar dst_t;
#elif defined(SRC_TYPED) && !defined(DST_F32)
typedef src_t dst_t;
#define DST_AS_SRC
#else
typedef store_t dst_t;
#define DST_FLOAT
#endif
#if defined(DST_BOOL) || (defined(DST_AS_SRC) && defined(SRC_BOOL))
#define WRITE_DST(v, p, i) ((p)[(i)] = (uchar)((v) != 0))
#elif defined(DST_FLOAT)
#define WRITE_DST(v, p, i) STORE((float)(v), p, i)
#else
#define WRITE_DST(v, p, i) ((p)[(i)] = (dst_t)(v))
#endif

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

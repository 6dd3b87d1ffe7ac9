/* Float storage of mnnpy's Vulkan shaders (#include "storage.glsl" first, before any declaration).
 *
 * FLOAT_IN(B, NAME) declares the read-only float buffer at binding B and `float NAME_ld(uint i)`;
 * FLOAT_OUT(B, NAME) the write-only one and `void NAME_st(uint i, float v)`. Arithmetic is
 * float32 in every build.
 *
 * Default build: the buffer holds float32 (`float NAME[]`).
 * STORAGE_F16 build (the `<variant>_f16` twins that build.py makes of every variant; needs the
 * device feature storageBuffer16BitAccess): two aliased views of the binding, float16_t and
 * float, and a bool specialization constant NAME_F32 with id 20 + B that picks the view: false
 * (default) for fp16 activations, true where the bound tensor is float32 (weights, biases and
 * constant operands, which stay fp32, and float32 scratch). The branch on the specialization
 * constant is folded when the pipeline is created.
 *
 * Source: GL_EXT_shader_16bit_storage; Vulkan 1.3 specification, "Shader Resource Interface"
 * (several variables may share a descriptor binding) and "Specialization Constants".
 */
#ifdef STORAGE_F16
#extension GL_EXT_shader_16bit_storage : require

#define FLOAT_IN(B, NAME)                                                               \
    layout(std430, binding = B) readonly buffer NAME##_H_ { float16_t NAME##_h[]; };    \
    layout(std430, binding = B) readonly buffer NAME##_F_ { float NAME##_f[]; };        \
    layout(constant_id = 20 + B) const bool NAME##_F32 = false;                         \
    float NAME##_ld(uint i) { return NAME##_F32 ? NAME##_f[i] : float(NAME##_h[i]); }

#define FLOAT_OUT(B, NAME)                                                              \
    layout(std430, binding = B) writeonly buffer NAME##_H_ { float16_t NAME##_h[]; };   \
    layout(std430, binding = B) writeonly buffer NAME##_F_ { float NAME##_f[]; };       \
    layout(constant_id = 20 + B) const bool NAME##_F32 = false;                         \
    void NAME##_st(uint i, float v) {                                                   \
        if (NAME##_F32) NAME##_f[i] = v;                                                \
        else NAME##_h[i] = float16_t(v);                                                \
    }

#else

#define FLOAT_IN(B, NAME)                                                           \
    layout(std430, binding = B) readonly buffer NAME##_F_ { float NAME[]; };        \
    float NAME##_ld(uint i) { return NAME[i]; }

#define FLOAT_OUT(B, NAME)                                                          \
    layout(std430, binding = B) writeonly buffer NAME##_F_ { float NAME[]; };       \
    void NAME##_st(uint i, float v) { NAME[i] = v; }

#endif

/* Tensors of other dtypes (backends/gpu/dtypes.py; the same options as OpenCL's common.h): the
 * variant macro SRC_I32 | SRC_I64 | SRC_BOOL gives the shader's inputs that dtype, DST_I32 |
 * DST_I64 | DST_BOOL | DST_F32 its output (without DST_: the inputs' dtype; without either,
 * float storage as above). SRC_IN(B, NAME) / DST_OUT(B, NAME) declare binding B with NAME_ld /
 * NAME_st like FLOAT_IN / FLOAT_OUT; SRC_T / DST_T are the types computed in (float, int,
 * int64_t, bool), SRC_U the unsigned type of an integer SRC_T. Storage: int32 as int; int64 as
 * int64_t (GL_EXT_shader_explicit_arithmetic_types_int64, device feature shaderInt64); bool one
 * byte per element, 0 or 1 as numpy's bool_ (uint8_t through GL_EXT_shader_8bit_storage, device
 * feature storageBuffer8BitAccess, which needs SPIR-V 1.3's StorageBuffer class: build.py
 * compiles these variants for vulkan1.1). glslang adds a capability only where a type is used.
 */
#if defined(SRC_I32) || defined(SRC_I64) || defined(SRC_BOOL) || defined(DST_I32) || defined(DST_I64) || defined(DST_BOOL)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#endif

#define TYPED_IN_(B, NAME, S, T, LOAD)                                                  \
    layout(std430, binding = B) readonly buffer NAME##_T_ { S NAME##_v[]; };            \
    T NAME##_ld(uint i) { return LOAD(NAME##_v[i]); }
#define TYPED_OUT_(B, NAME, S, T, STORE)                                                \
    layout(std430, binding = B) writeonly buffer NAME##_T_ { S NAME##_v[]; };           \
    void NAME##_st(uint i, T v) { NAME##_v[i] = STORE(v); }
#define AS_IS_(v) (v)
#define BYTE_TO_BOOL_(v) (uint(v) != 0u)
#define BOOL_TO_BYTE_(v) uint8_t((v) ? 1u : 0u)

#if defined(SRC_I32)
#define SRC_T int
#define SRC_U uint
#define SRC_IN(B, NAME) TYPED_IN_(B, NAME, int, int, AS_IS_)
#elif defined(SRC_I64)
#define SRC_T int64_t
#define SRC_U uint64_t
#define SRC_IN(B, NAME) TYPED_IN_(B, NAME, int64_t, int64_t, AS_IS_)
#elif defined(SRC_BOOL)
#define SRC_T bool
#define SRC_IN(B, NAME) TYPED_IN_(B, NAME, uint8_t, bool, BYTE_TO_BOOL_)
#else
#define SRC_FLOAT
#define SRC_T float
#define SRC_IN(B, NAME) FLOAT_IN(B, NAME)
#endif
#if defined(SRC_I32) || defined(SRC_I64)
#define SRC_INTEGER
#endif

#if defined(DST_I32) || (defined(SRC_I32) && !defined(DST_I64) && !defined(DST_BOOL) && !defined(DST_F32))
#define DST_T int
#define DST_OUT(B, NAME) TYPED_OUT_(B, NAME, int, int, AS_IS_)
#elif defined(DST_I64) || (defined(SRC_I64) && !defined(DST_BOOL) && !defined(DST_F32))
#define DST_T int64_t
#define DST_OUT(B, NAME) TYPED_OUT_(B, NAME, int64_t, int64_t, AS_IS_)
#elif defined(DST_BOOL) || (defined(SRC_BOOL) && !defined(DST_F32))
#define DST_T bool
#define DST_OUT(B, NAME) TYPED_OUT_(B, NAME, uint8_t, bool, BOOL_TO_BYTE_)
#else
#define DST_FLOAT
#define DST_T float
#define DST_OUT(B, NAME) FLOAT_OUT(B, NAME)
#endif

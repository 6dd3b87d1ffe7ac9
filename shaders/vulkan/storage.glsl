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

#version 450
/* Data movement of mnnpy's Vulkan backend (float32, copied bit for bit; STRIDED also other
 * dtypes): Reshape-copy, Transpose, Slice, Split (strided copies), Transpose tiled through
 * shared memory, Concat of up to 4 inputs per dispatch, Gather with an index table. ONNX
 * operators.md #Transpose, #Slice, #Concat, #Split, #Gather.
 *
 * Variant macros (shaders/vulkan/manifest_movement.json): STRIDED | TRANSPOSE | CONCAT | GATHER;
 * STRIDED also copies int32, int64 and bool data as it is (SRC_I32 | SRC_I64 | SRC_BOOL,
 * storage.glsl: the variants movement_strided_<dtype>).
 * Every variant declares local sizes as specialization constants 0, 10, 11.
 *
 * STRIDED (movement_strided): an index space dims[0..RANK) (outermost first, innermost
 *   dims[RANK-1]); element (i_0..) is read at x_off + sum i_k xstr[k] and written at
 *   y_off + sum i_k ystr[k] (element strides, negative for Slice with negative steps).
 *   Specialization constants: 1 RANK (1..8), 2 VEC (innermost elements per invocation).
 *   Push constants (112 bytes): n (invocations), chunks (ceil(dims[RANK-1] / VEC)), x_off,
 *   y_off, dims[8], xstr[8], ystr[8]. Invocation j: row j / chunks (decomposed over the outer
 *   dims), elements c + e * chunks (c = j % chunks, e < VEC) of that row, so that neighbouring
 *   invocations read and write neighbouring elements. 1-D dispatch (groups split over x and y
 *   beyond the x limit).
 * TRANSPOSE (movement_transpose): output axis A is read contiguously from X (X stride 1),
 *   output axis B is written contiguously to Y (Y stride 1); Y[.., a, .., b] =
 *   X[xb + a + b * xs_b] with the remaining (batch) axes bdims[0..nbr) at strides bxstr/bystr.
 *   Local (32, 8, 1): a 32 x 32 tile is read along A (coalesced), kept in shared memory and
 *   written along B (coalesced); each invocation moves 4 rows. Groups (ceil(nb / 32),
 *   ceil(na / 32), min(batch, limit)); the z groups loop over the batch.
 *   Push constants (104 bytes): x_off, y_off, na, nb, xs_b, ys_a, batch, nbr, bdims[6],
 *   bxstr[6], bystr[6].
 * CONCAT (movement_concat): up to 4 inputs of Concat in one dispatch. Y's part written here
 *   is viewed as (pre, inner) rows at row stride y_row (elements), input k as (pre, its part
 *   of inner) at row stride x_row[k]; columns [cum[k], cum[k+1]) of a row come from input k
 *   (cum[0] = 0, unused inputs get cum = inner and are bound to input 0). Push constants
 *   (64 bytes): n (= pre * inner), inner, y_off, y_row, cum[4], x_off[4], x_row[4].
 *   Bindings 0..3 inputs, 4 y. 1-D dispatch.
 * GATHER (movement_gather): X viewed as (pre, axis_len, post), Y as (pre, nidx, post):
 *   Y[p, k, i] = X[p, idx[k], i] (idx non-negative, int32). Push constants: n, x_off,
 *   idx_off, y_off, post, nidx, axis_len. 1-D dispatch.
 */
#extension GL_GOOGLE_include_directive : require
#include "storage.glsl"

layout(local_size_x_id = 0, local_size_y_id = 10, local_size_z_id = 11) in;

#if defined(STRIDED)

layout(constant_id = 1) const int RANK = 1;
layout(constant_id = 2) const int VEC = 1;

SRC_IN(0, x)
DST_OUT(1, y)
layout(push_constant) uniform Push {
    uint n;
    uint chunks;
    int x_off;
    int y_off;
    int dims[8];
    int xstr[8];
    int ystr[8];
} pc;

void main() {
    uint j = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (j >= pc.n) return;
    uint row = j / pc.chunks;
    int i0 = int(j - row * pc.chunks);
    int inner = pc.dims[RANK - 1];
    int sx = pc.xstr[RANK - 1], sy = pc.ystr[RANK - 1];
    int ix = pc.x_off + i0 * sx;
    int iy = pc.y_off + i0 * sy;
    for (int k = RANK - 2; k >= 0; --k) {
        uint d = uint(pc.dims[k]);
        uint q = row % d;
        row /= d;
        ix += int(q) * pc.xstr[k];
        iy += int(q) * pc.ystr[k];
    }
    /* elements i0 + e * chunks of the row: neighbouring invocations touch neighbouring elements */
    int step = int(pc.chunks);
    for (int e = 0; e < VEC && i0 + e * step < inner; ++e) y_st(iy + e * step * sy, x_ld(ix + e * step * sx));
}

#elif defined(TRANSPOSE)

const int TILE = 32;
const int ROWS = 8; /* local size y: each invocation moves TILE / ROWS rows */

FLOAT_IN(0, x)
FLOAT_OUT(1, y)
layout(push_constant) uniform Push {
    int x_off;
    int y_off;
    int na;
    int nb;
    int xs_b;
    int ys_a;
    uint batch;
    int nbr;
    int bdims[6];
    int bxstr[6];
    int bystr[6];
} pc;

shared float tile[TILE][TILE + 1];

void main() {
    int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
    int b0 = int(gl_WorkGroupID.x) * TILE, a0 = int(gl_WorkGroupID.y) * TILE;
    for (uint z = gl_WorkGroupID.z; z < pc.batch; z += gl_NumWorkGroups.z) {
        int xb = pc.x_off, yb = pc.y_off;
        uint rest = z;
        for (int k = pc.nbr - 1; k >= 0; --k) {
            uint d = uint(pc.bdims[k]);
            uint q = rest % d;
            rest /= d;
            xb += int(q) * pc.bxstr[k];
            yb += int(q) * pc.bystr[k];
        }
        int a = a0 + tx; /* read: consecutive tx -> consecutive input elements */
        if (a < pc.na) {
            for (int r = ty; r < TILE; r += ROWS) {
                int b = b0 + r;
                if (b < pc.nb) tile[r][tx] = x_ld(xb + a + b * pc.xs_b);
            }
        }
        barrier();
        int b = b0 + tx; /* write: consecutive tx -> consecutive output elements */
        if (b < pc.nb) {
            for (int r = ty; r < TILE; r += ROWS) {
                int aa = a0 + r;
                if (aa < pc.na) y_st(yb + b + aa * pc.ys_a, tile[tx][r]);
            }
        }
        barrier();
    }
}

#elif defined(GATHER)

FLOAT_IN(0, x)
layout(std430, binding = 1) readonly buffer I { int idx[]; };
FLOAT_OUT(2, y)
layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint idx_off;
    uint y_off;
    uint post;
    uint nidx;
    uint axis_len;
} pc;

void main() {
    uint j = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (j >= pc.n) return;
    uint i = j % pc.post;
    uint t = j / pc.post;
    uint k = t % pc.nidx;
    uint p = t / pc.nidx;
    y_st(pc.y_off + j, x_ld(pc.x_off + (p * pc.axis_len + uint(idx[pc.idx_off + k])) * pc.post + i));
}

#elif defined(CONCAT)

FLOAT_IN(0, x0)
FLOAT_IN(1, x1)
FLOAT_IN(2, x2)
FLOAT_IN(3, x3)
FLOAT_OUT(4, y)
layout(push_constant) uniform Push {
    uint n;
    uint inner;
    uint y_off;
    uint y_row;
    uint cum[4];
    uint x_off[4];
    uint x_row[4];
} pc;

void main() {
    uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
    if (i >= pc.n) return;
    uint p = i / pc.inner;
    uint r = i - p * pc.inner;
    uint k = r < pc.cum[1] ? 0u : (r < pc.cum[2] ? 1u : (r < pc.cum[3] ? 2u : 3u));
    uint xi = pc.x_off[k] + p * pc.x_row[k] + (r - pc.cum[k]);
    float v;
    if (k == 0u) {
        v = x0_ld(xi);
    } else if (k == 1u) {
        v = x1_ld(xi);
    } else if (k == 2u) {
        v = x2_ld(xi);
    } else {
        v = x3_ld(xi);
    }
    y_st(pc.y_off + p * pc.y_row + r, v);
}

#else
#error "movement.comp: define STRIDED, TRANSPOSE, GATHER or CONCAT"
#endif

/* A decode-only step through every layer of a Llama-shaped model in one call, in float32 on
 * the AVX2 kernels: decode_step.c's twin for CPUs without AVX-512 BF16.
 *
 * The fused runner's Python loop drives a layer as about ten calls; for a decode step of 8
 * rows on a 2-vCPU EPYC their dispatch was about 15 of the step's 57 ms. This runs the same
 * kernels in the same order with the same arguments, so its results are the loop's bit for
 * bit:
 *   x = rmsnorm(h += pending) ; qkv = x W_qkv (+ b) ; rotary on the q and k heads ;
 *   store k, v at each query's position in its pool row ; a = attention ;
 *   x = rmsnorm(h += a W_o) ; pending = silu_mul(x W_gate_up) W_down
 * (pending: the layer's MLP output, added to h by the next layer's norm; the caller adds the
 * last one before the final norm). The linears run on the GEMV's bfloat16 panels
 * (gemv_avx2.c), attention on decode_attention_f32.
 *
 * The arguments are decode_step's (amx must be 0), and so is the layer loop
 * (decode_step_body.h). Returns 0, -1 for a shape a kernel refuses or a failed allocation, -2
 * for a pool row or length out of range (nothing of that layer is attended then).
 */
#include <stdint.h>

#include "kernels_avx2.h"

/* one layer's weights (GEMV panels; norm weights and the QKV bias, or NULL, in float32) and
 * its pool K/V: decode_step.c's table, pointer for pointer */
typedef struct {
    const float *norm_in;
    const bf16 *qkv;
    const float *qkv_bias;
    const bf16 *o;
    const float *norm_post;
    const bf16 *gate_up, *down;
    float *keys, *values; /* [pool_rows, hkv, capacity, D] */
} decode_layer_f32_t;

int decode_step_f32(const decode_layer_f32_t *layers, int n_layers, float *h, float *pending,
                    int n, int hidden, int inter, int hq, int hkv, int D, const float *cos,
                    const float *sin, int64_t cs_row, const int32_t *rows,
                    const int32_t *lengths, const int32_t *slots, int shared, int pool_rows,
                    int capacity, float eps, float scale, int n_threads, int amx);

/* y[r] += b for n rows of width w: as `y.add_(bias)` */
static void add_bias_f32(float *y, const float *b, int n, int w) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < w; c++) y[(int64_t)r * w + c] += b[c];
}

#define STEP_T float
#define STEP_LAYER decode_layer_f32_t
#define STEP_NORM add_rms_norm_f32
#define STEP_ROPE rope_inplace_f32
#define STEP_SILU silu_mul_f32
#define STEP_ADD_BIAS add_bias_f32
#include "decode_step_body.h"

int decode_step_f32(const decode_layer_f32_t *layers, int n_layers, float *h, float *pending,
                    int n, int hidden, int inter, int hq, int hkv, int D, const float *cos,
                    const float *sin, int64_t cs_row, const int32_t *rows,
                    const int32_t *lengths, const int32_t *slots, int shared, int pool_rows,
                    int capacity, float eps, float scale, int n_threads, int amx) {
    if (amx) return -1; /* no tiles on this path */
    return decode_layers(layers, n_layers, h, pending, n, hidden, inter, hq, hkv, D, cos, sin,
                         cs_row, rows, lengths, slots, shared, pool_rows, capacity, eps, scale,
                         n_threads, gemv_f32_bf16, decode_attention_f32);
}

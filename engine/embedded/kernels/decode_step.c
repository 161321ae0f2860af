/* A decode-only step through every layer of a Llama-shaped model, in one call.
 *
 * The fused runner (fused.py) drives a layer as about ten calls from Python: norms, the four
 * linears, rotary, the KV store, attention. For a decode step each call's work is small
 * (microseconds to a millisecond), so the calls' own cost was about a fifth of the step. This
 * runs the same kernels in the same order with the same arguments, so its results are the
 * Python loop's bit for bit:
 *   x = rmsnorm(h += pending) ; qkv = x W_qkv (+ b) ; rotary on the q and k heads ;
 *   store k, v at each query's position in its pool row ; a = attention ;
 *   x = rmsnorm(h += a W_o) ; pending = silu_mul(x W_gate_up) W_down
 * (pending: the layer's MLP output, added to h by the next layer's norm; the caller adds the
 * last one before the final norm). Linears run on the native GEMV's panels: on AVX-512
 * (gemv.c) with decode_attention, or, with `amx`, on the tiles (gemv_amx.c) with
 * decode_attention_amx, as the engine chose for every decode step (the two round apart).
 *
 * The layer loop is decode_step_body.h's, shared with the float32 step (decode_step_avx2.c).
 * Returns 0, -1 for a shape a kernel refuses or a failed allocation, -2 for a pool row or
 * length out of range (decode_attention's check; nothing of that layer is attended then).
 */
#include <stdint.h>

#include "kernels.h"

/* one layer's weights (GEMV panels, norm weights, the QKV bias or NULL) and its pool K/V */
typedef struct {
    const bf16 *norm_in, *qkv, *qkv_bias, *o, *norm_post, *gate_up, *down;
    bf16 *keys, *values; /* [pool_rows, hkv, capacity, D] */
} decode_layer_t;

static inline __m512 round_bf16_ps(__m512 v) { return _mm512_cvtpbh_ps(_mm512_cvtneps_pbh(v)); }

/* y[r] = bf16(y[r] + b) for n rows of width w (a multiple of 16): as `y.add_(bias)` */
static void add_bias(bf16 *y, const bf16 *b, int n, int w) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < w; c += 16)
            store_bf16(y + (int64_t)r * w + c,
                       round_bf16_ps(_mm512_add_ps(load_bf16(y + (int64_t)r * w + c),
                                                   load_bf16(b + c))));
}

#define STEP_T bf16
#define STEP_LAYER decode_layer_t
#define STEP_NORM add_rms_norm
#define STEP_ROPE rope_inplace
#define STEP_SILU silu_mul
#define STEP_ADD_BIAS add_bias
#include "decode_step_body.h"

int decode_step(const decode_layer_t *layers, int n_layers, bf16 *h, bf16 *pending, int n,
                int hidden, int inter, int hq, int hkv, int D, const bf16 *cos, const bf16 *sin,
                int64_t cs_row, const int32_t *rows, const int32_t *lengths,
                const int32_t *slots, int shared, int pool_rows, int capacity, float eps,
                float scale, int n_threads, int amx) {
    /* the linears and the attention on the AMX tiles (gemv_amx.c, attention_amx.c: on the
     * same panels, rounding apart from the AVX-512 kernels) or on AVX-512 */
    return decode_layers(layers, n_layers, h, pending, n, hidden, inter, hq, hkv, D, cos, sin,
                         cs_row, rows, lengths, slots, shared, pool_rows, capacity, eps, scale,
                         n_threads, amx ? gemv_amx : gemv_bf16,
                         amx ? decode_attention_amx : decode_attention);
}

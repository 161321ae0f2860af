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
 * Returns 0, -1 for a shape a kernel refuses or a failed allocation, -2 for a pool row or
 * length out of range (decode_attention's check; nothing of that layer is attended then).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

int decode_step(const decode_layer_t *layers, int n_layers, bf16 *h, bf16 *pending, int n,
                int hidden, int inter, int hq, int hkv, int D, const bf16 *cos, const bf16 *sin,
                int64_t cs_row, const int32_t *rows, const int32_t *lengths,
                const int32_t *slots, int shared, int pool_rows, int capacity, float eps,
                float scale, int n_threads, int amx) {
    /* the linears and the attention on the AMX tiles (gemv_amx.c, attention_amx.c: on the
     * same panels, rounding apart from the AVX-512 kernels) or on AVX-512 */
    int (*const linear)(const bf16 *, int64_t, int, const bf16 *, int, int, bf16 *, int64_t,
                        int) = amx ? gemv_amx : gemv_bf16;
    int (*const attention)(const bf16 *, int64_t, int64_t, const bf16 *, const bf16 *, int64_t,
                           int64_t, int, int, const int32_t *, const int32_t *, int, bf16 *,
                           int64_t, int64_t, int, int, int, int, float, int) =
        amx ? decode_attention_amx : decode_attention;
    const int width = (hq + 2 * hkv) * D; /* the QKV product's row */
    if (n <= 0 || n_layers <= 0 || hidden % 32 || inter % 16 || width % 32) return -1;
    const int64_t kv_head = (int64_t)capacity * D, kv_slot = hkv * kv_head;
    for (int r = 0; r < n; r++)
        if (rows[r] < 0 || rows[r] >= pool_rows || lengths[r] < 1 || lengths[r] > capacity)
            return -2;
    /* scratch: the normed rows, the QKV product, attention's output, the gate-up product and
     * the gated activation */
    const size_t per_row = (size_t)hidden + width + hq * D + 2 * (size_t)inter + inter;
    bf16 *scratch = malloc(per_row * n * sizeof(bf16));
    if (!scratch) return -1;
    bf16 *x = scratch, *qkv = x + (size_t)n * hidden, *attn = qkv + (size_t)n * width;
    bf16 *gate_up = attn + (size_t)n * hq * D, *act = gate_up + (size_t)n * 2 * inter;
    int rc = 0;
    for (int l = 0; l < n_layers && rc == 0; l++) {
        const decode_layer_t *L = &layers[l];
        rc |= add_rms_norm(h, hidden, l ? pending : NULL, hidden, L->norm_in, x, hidden, n,
                           hidden, eps, n_threads);
        rc |= linear(x, hidden, n, L->qkv, width, hidden, qkv, width, n_threads);
        if (L->qkv_bias) add_bias(qkv, L->qkv_bias, n, width);
        rc |= rope_inplace(qkv, width, cos, sin, cs_row, n, hq + hkv, D, n_threads);
        if (rc) break;
        for (int r = 0; r < n; r++) {
            const int64_t at = rows[r] * kv_slot + (int64_t)(lengths[r] - 1) * D;
            for (int g = 0; g < hkv; g++) {
                const bf16 *src = qkv + (int64_t)r * width + (int64_t)(hq + g) * D;
                memcpy(L->keys + at + g * kv_head, src, D * sizeof(bf16));
                memcpy(L->values + at + g * kv_head, src + (int64_t)hkv * D, D * sizeof(bf16));
            }
        }
        rc = attention(qkv, width, D, L->keys, L->values, kv_slot, kv_head, pool_rows,
                              capacity, lengths, slots, shared, attn, (int64_t)hq * D, D, n, hq,
                              hkv, D, scale, n_threads);
        if (rc) break;
        rc |= linear(attn, (int64_t)hq * D, n, L->o, hidden, hq * D, pending, hidden,
                        n_threads);
        rc |= add_rms_norm(h, hidden, pending, hidden, L->norm_post, x, hidden, n, hidden, eps,
                           n_threads);
        rc |= linear(x, hidden, n, L->gate_up, 2 * inter, hidden, gate_up, 2 * inter,
                        n_threads);
        rc |= silu_mul(gate_up, 2 * inter, act, inter, n, inter, n_threads);
        rc |= linear(act, inter, n, L->down, hidden, inter, pending, hidden, n_threads);
    }
    free(scratch);
    return rc < 0 ? rc : (rc ? -1 : 0);
}

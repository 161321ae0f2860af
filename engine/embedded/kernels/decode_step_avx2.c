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
 * The arguments are decode_step's (amx must be 0). Returns 0, -1 for a shape a kernel refuses
 * or a failed allocation, -2 for a pool row or length out of range (nothing of that layer is
 * attended then).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

int decode_step_f32(const decode_layer_f32_t *layers, int n_layers, float *h, float *pending,
                    int n, int hidden, int inter, int hq, int hkv, int D, const float *cos,
                    const float *sin, int64_t cs_row, const int32_t *rows,
                    const int32_t *lengths, const int32_t *slots, int shared, int pool_rows,
                    int capacity, float eps, float scale, int n_threads, int amx) {
    const int width = (hq + 2 * hkv) * D; /* the QKV product's row */
    if (amx || n <= 0 || n_layers <= 0 || hidden % 32 || inter % 32 || width % 32) return -1;
    const int64_t kv_head = (int64_t)capacity * D, kv_slot = hkv * kv_head;
    for (int r = 0; r < n; r++)
        if (rows[r] < 0 || rows[r] >= pool_rows || lengths[r] < 1 || lengths[r] > capacity)
            return -2;
    /* scratch: the normed rows, the QKV product, attention's output, the gate-up product and
     * the gated activation */
    const size_t per_row = (size_t)hidden + width + hq * D + 2 * (size_t)inter + inter;
    float *scratch = malloc(per_row * n * sizeof(float));
    if (!scratch) return -1;
    float *x = scratch, *qkv = x + (size_t)n * hidden, *attn = qkv + (size_t)n * width;
    float *gate_up = attn + (size_t)n * hq * D, *act = gate_up + (size_t)n * 2 * inter;
    int rc = 0;
    for (int l = 0; l < n_layers && rc == 0; l++) {
        const decode_layer_f32_t *L = &layers[l];
        rc |= add_rms_norm_f32(h, hidden, l ? pending : NULL, hidden, L->norm_in, x, hidden, n,
                               hidden, eps, n_threads);
        rc |= gemv_f32_bf16(x, hidden, n, L->qkv, width, hidden, qkv, width, n_threads);
        if (L->qkv_bias) /* as `y.add_(bias)` */
            for (int r = 0; r < n; r++)
                for (int c = 0; c < width; c++) qkv[(int64_t)r * width + c] += L->qkv_bias[c];
        rc |= rope_inplace_f32(qkv, width, cos, sin, cs_row, n, hq + hkv, D, n_threads);
        if (rc) break;
        for (int r = 0; r < n; r++) {
            const int64_t at = rows[r] * kv_slot + (int64_t)(lengths[r] - 1) * D;
            for (int g = 0; g < hkv; g++) {
                const float *src = qkv + (int64_t)r * width + (int64_t)(hq + g) * D;
                memcpy(L->keys + at + g * kv_head, src, D * sizeof(float));
                memcpy(L->values + at + g * kv_head, src + (int64_t)hkv * D, D * sizeof(float));
            }
        }
        rc = decode_attention_f32(qkv, width, D, L->keys, L->values, kv_slot, kv_head, pool_rows,
                                  capacity, lengths, slots, shared, attn, (int64_t)hq * D, D, n,
                                  hq, hkv, D, scale, n_threads);
        if (rc) break;
        rc |= gemv_f32_bf16(attn, (int64_t)hq * D, n, L->o, hidden, hq * D, pending, hidden,
                            n_threads);
        rc |= add_rms_norm_f32(h, hidden, pending, hidden, L->norm_post, x, hidden, n, hidden,
                               eps, n_threads);
        rc |= gemv_f32_bf16(x, hidden, n, L->gate_up, 2 * inter, hidden, gate_up, 2 * inter,
                            n_threads);
        rc |= silu_mul_f32(gate_up, 2 * inter, act, inter, n, inter, n_threads);
        rc |= gemv_f32_bf16(act, inter, n, L->down, hidden, inter, pending, hidden, n_threads);
    }
    free(scratch);
    return rc < 0 ? rc : (rc ? -1 : 0);
}

/* The layer loop of a decode-only step, shared by decode_step.c (bfloat16: AVX-512 or the AMX
 * tiles) and decode_step_avx2.c (float32, AVX2); see decode_step.c for what it computes.
 *
 * The including file defines, before including this once:
 *   STEP_T        the rows' element type (bf16 or float); the linears' panels are bf16
 *   STEP_LAYER    its layer table's type: norm_in, qkv, qkv_bias, o, norm_post, gate_up, down
 *                 (weights) and keys, values (the pool's [pool_rows, hkv, capacity, D])
 *   STEP_NORM, STEP_ROPE, STEP_SILU   its add_rms_norm, rope_inplace and silu_mul
 *   STEP_ADD_BIAS(y, b, n, w)         y[r] += b for n rows of width w, as `y.add_(bias)`
 * and gets decode_layers(), which takes the linear and the attention as arguments.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*step_linear_fn)(const STEP_T *, int64_t, int, const bf16 *, int, int, STEP_T *,
                              int64_t, int);
typedef int (*step_attention_fn)(const STEP_T *, int64_t, int64_t, const STEP_T *,
                                 const STEP_T *, int64_t, int64_t, int, int, const int32_t *,
                                 const int32_t *, int, STEP_T *, int64_t, int64_t, int, int, int,
                                 int, float, int);

/* Returns 0, -1 for a shape a kernel refuses or a failed allocation, -2 for a pool row or
 * length out of range (the attention's check; nothing of that layer is attended then). */
static int decode_layers(const STEP_LAYER *layers, int n_layers, STEP_T *h, STEP_T *pending,
                         int n, int hidden, int inter, int hq, int hkv, int D, const STEP_T *cos,
                         const STEP_T *sin, int64_t cs_row, const int32_t *rows,
                         const int32_t *lengths, const int32_t *slots, int shared, int pool_rows,
                         int capacity, float eps, float scale, int n_threads,
                         step_linear_fn linear, step_attention_fn attention) {
    const int width = (hq + 2 * hkv) * D; /* the QKV product's row */
    if (n <= 0 || n_layers <= 0 || hidden % 32 || inter % 16 || width % 32) return -1;
    const int64_t kv_head = (int64_t)capacity * D, kv_slot = hkv * kv_head;
    for (int r = 0; r < n; r++)
        if (rows[r] < 0 || rows[r] >= pool_rows || lengths[r] < 1 || lengths[r] > capacity)
            return -2;
    /* scratch: the normed rows, the QKV product, attention's output, the gate-up product and
     * the gated activation */
    const size_t per_row = (size_t)hidden + width + hq * D + 2 * (size_t)inter + inter;
    STEP_T *scratch = malloc(per_row * n * sizeof(STEP_T));
    if (!scratch) return -1;
    STEP_T *x = scratch, *qkv = x + (size_t)n * hidden, *attn = qkv + (size_t)n * width;
    STEP_T *gate_up = attn + (size_t)n * hq * D, *act = gate_up + (size_t)n * 2 * inter;
    int rc = 0;
    for (int l = 0; l < n_layers && rc == 0; l++) {
        const STEP_LAYER *L = &layers[l];
        rc |= STEP_NORM(h, hidden, l ? pending : NULL, hidden, L->norm_in, x, hidden, n, hidden,
                        eps, n_threads);
        rc |= linear(x, hidden, n, L->qkv, width, hidden, qkv, width, n_threads);
        if (L->qkv_bias) STEP_ADD_BIAS(qkv, L->qkv_bias, n, width);
        rc |= STEP_ROPE(qkv, width, cos, sin, cs_row, n, hq + hkv, D, n_threads);
        if (rc) break;
        for (int r = 0; r < n; r++) {
            const int64_t at = rows[r] * kv_slot + (int64_t)(lengths[r] - 1) * D;
            for (int g = 0; g < hkv; g++) {
                const STEP_T *src = qkv + (int64_t)r * width + (int64_t)(hq + g) * D;
                memcpy(L->keys + at + g * kv_head, src, D * sizeof(STEP_T));
                memcpy(L->values + at + g * kv_head, src + (int64_t)hkv * D, D * sizeof(STEP_T));
            }
        }
        rc = attention(qkv, width, D, L->keys, L->values, kv_slot, kv_head, pool_rows, capacity,
                       lengths, slots, shared, attn, (int64_t)hq * D, D, n, hq, hkv, D, scale,
                       n_threads);
        if (rc) break;
        rc |= linear(attn, (int64_t)hq * D, n, L->o, hidden, hq * D, pending, hidden, n_threads);
        rc |= STEP_NORM(h, hidden, pending, hidden, L->norm_post, x, hidden, n, hidden, eps,
                        n_threads);
        rc |= linear(x, hidden, n, L->gate_up, 2 * inter, hidden, gate_up, 2 * inter, n_threads);
        rc |= STEP_SILU(gate_up, 2 * inter, act, inter, n, inter, n_threads);
        rc |= linear(act, inter, n, L->down, hidden, inter, pending, hidden, n_threads);
    }
    free(scratch);
    return rc < 0 ? rc : (rc ? -1 : 0);
}

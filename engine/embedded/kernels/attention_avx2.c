/* Decode attention in float32 over the slot KV pool, for CPUs with AVX2 and FMA but no
 * AVX-512 BF16 (where the engine runs in float32).
 *
 * Without it a decode step attended in PyTorch: a batched matmul over every decoding row's
 * whole padded width with an additive mask, each draft run as a segment of its own, about ten
 * tensor operations a layer. This reads each query's row only up to its own position.
 *
 * decode_attention_f32: query i (of n) attends over pool row slots[i] (i when slots is NULL),
 *   keys 0 .. lengths[i] - 1, itself included; the query heads of one KV head share its keys.
 *   q[i, h, d] at q + i * q_row + h * q_head + d; the keys of row s, KV head g, position t at
 *   k + s * kv_slot + g * kv_head + t * head_dim (the same for v); out like q.
 *   Each (query, KV head) is one work item, computed alike whatever else the call holds: the
 *   scores in key order, exp of each less the row's maximum, the values summed in key order
 *   and scaled by 1 / sum at the end.
 *   Returns 0; -1 for a shape it does not take (head_dim a multiple of 8 up to DIM_MAX, hq a
 *   multiple of hkv); -2 for a row or length out of range; -3 when memory for the scores
 *   cannot be had. Nothing is written unless it returns 0.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "vec_avx2.h"

int decode_attention_f32(const float *q, int64_t q_row, int64_t q_head, const float *k,
                         const float *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, float *out,
                         int64_t o_row, int64_t o_head, int n, int hq, int hkv, int head_dim,
                         float scale, int n_threads);

#define DIM_MAX 256 /* head size: a head's value sums, DIM_MAX / 8 vectors */

/* one (query, KV head): the group's G query heads over the row's first len keys */
static void item(const float *qg, int64_t q_head, const float *kr, const float *vr, int len,
                 int G, int D, float scale, float *scores, float *og, int64_t o_head) {
    const int vecs = D / 8;
    for (int g = 0; g < G; g++) {
        const float *qh = qg + g * q_head;
        float *sc = scores + (int64_t)g * len;
        float top = -INFINITY;
        for (int t = 0; t < len; t++) {
            const float *kt = kr + (int64_t)t * D;
            __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_loadu_ps(kt));
            for (int c = 1; c < vecs; c++)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 8 * c), _mm256_loadu_ps(kt + 8 * c),
                                      acc);
            const float s = hsum(acc) * scale;
            sc[t] = s;
            top = s > top ? s : top;
        }
        /* exp(s - max) in place, summed in key order (8 lanes, then the tail) */
        const __m256 m = _mm256_set1_ps(top);
        __m256 lanes = _mm256_setzero_ps();
        int t = 0;
        for (; t + 8 <= len; t += 8) {
            const __m256 e = exp_neg_ps(_mm256_sub_ps(_mm256_loadu_ps(sc + t), m));
            _mm256_storeu_ps(sc + t, e);
            lanes = _mm256_add_ps(lanes, e);
        }
        float sum = hsum(lanes);
        for (; t < len; t++) {
            const float e = expf(sc[t] - top);
            sc[t] = e;
            sum += e;
        }
        /* the values, weighted, in key order */
        __m256 acc[DIM_MAX / 8];
        for (int c = 0; c < vecs; c++) acc[c] = _mm256_setzero_ps();
        for (t = 0; t < len; t++) {
            const __m256 p = _mm256_set1_ps(sc[t]);
            const float *vt = vr + (int64_t)t * D;
            for (int c = 0; c < vecs; c++)
                acc[c] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vt + 8 * c), acc[c]);
        }
        const __m256 inv = _mm256_set1_ps(1.0f / sum);
        float *oh = og + g * o_head;
        for (int c = 0; c < vecs; c++) _mm256_storeu_ps(oh + 8 * c, _mm256_mul_ps(acc[c], inv));
    }
}

int decode_attention_f32(const float *q, int64_t q_row, int64_t q_head, const float *k,
                         const float *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, float *out,
                         int64_t o_row, int64_t o_head, int n, int hq, int hkv, int head_dim,
                         float scale, int n_threads) {
    if (n < 0 || hkv < 1 || hq < hkv || hq % hkv || head_dim % 8 || head_dim < 8 ||
        head_dim > DIM_MAX)
        return -1;
    int longest = 0;
    for (int i = 0; i < n; i++) {
        const int row = slots ? slots[i] : i;
        if (row < 0 || row >= pool_rows || lengths[i] < 1 || lengths[i] > capacity) return -2;
        longest = lengths[i] > longest ? lengths[i] : longest;
    }
    const int G = hq / hkv, items = n * hkv;
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > items) threads = items;
    if (threads < 1) return 0;
    float *scratch = malloc(sizeof(float) * (size_t)threads * G * (size_t)longest);
    if (!scratch) return -3;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int it = 0; it < items; it++) {
        const int i = it / hkv, g = it % hkv;
        const int64_t row = slots ? slots[i] : i;
        const int64_t base = row * kv_slot + g * kv_head;
        float *scores = scratch + (size_t)omp_get_thread_num() * G * longest;
        item(q + i * q_row + (int64_t)g * G * q_head, q_head, k + base, v + base, lengths[i], G,
             head_dim, scale, scores, out + i * o_row + (int64_t)g * G * o_head, o_head);
    }
    free(scratch);
    return 0;
}

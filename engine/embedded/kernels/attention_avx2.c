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
 *   The first `shared` positions hold the same prompt tokens (so the same keys and values) in
 *   every decoding row (pool rows 0 .. ): every query reads them from row 0's copy, which the
 *   other queries then find in cache (8 rows sharing a 1,500-token prefix read 2.3 MB a layer
 *   once rather than 8 times). The values read are the same, so a query's output does not
 *   depend on `shared`.
 *   Each (query, KV head) is one work item, computed alike whatever else the call holds: the
 *   scores 8 keys at a time (each an FMA chain over d, then one reduction tree), exp of each
 *   less the row's maximum, the values summed in key order and scaled by 1 / sum at the end.
 *   An item reads each key and value once for all of the KV head's query heads. Before
 *   2026-12-07 it re-read them per head, summed each score's lanes alone and, with a variable
 *   head size, kept the value sums in memory: 30 layers of 8 x 1,600 keys took 39-56 ms a
 *   step on a 2-vCPU EPYC (Zen 3), now 15-20.
 *   Returns 0; -1 for a shape it does not take (head_dim a multiple of 8 up to DIM_MAX, hq a
 *   multiple of hkv); -2 for a row or length out of range (with more than one query, every
 *   length must pass `shared`); -3 when memory for the scores cannot be had. Nothing is
 *   written unless it returns 0.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels_avx2.h"
#include "vec_avx2.h"

#define DIM_MAX 256 /* head size: a head's value sums, DIM_MAX / 8 vectors */

/* key (or value) t of a row whose keys below `split` are read from the shared row's copy */
#define ROW_AT(shared_row, own_row, t) (((t) < split ? (shared_row) : (own_row)) + (int64_t)(t) * D)

/* lane j of the result: the sum of a[j]'s 8 lanes (adjacent pairs, then pairs of pairs, then
 * the two halves) */
static inline __m256 sum8(const __m256 *a) {
    const __m256 p01 = _mm256_hadd_ps(a[0], a[1]), p23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 p45 = _mm256_hadd_ps(a[4], a[5]), p67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 q0 = _mm256_hadd_ps(p01, p23), q1 = _mm256_hadd_ps(p45, p67);
    /* q0 = [a0 a1 a2 a3 (low halves) | a0 a1 a2 a3 (high halves)], q1 likewise for a4..a7 */
    return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20),
                         _mm256_permute2f128_ps(q0, q1, 0x31));
}

#define PV_KEYS 32 /* keys per pass of the value sums: their values stay in L1 for every head */

/* acc[0 .. 8 vecs) += sum over t0 <= t < t1 of p[t] * value t, in key order; inlined with a
 * constant vecs the sums stay in registers (with a variable one they went through memory:
 * about 3x the time) */
static inline __attribute__((always_inline)) void value_sums(const float *p, int t0, int t1,
                                                             const float *vs, const float *vr,
                                                             int split, int D, const int vecs,
                                                             float *acc) {
    __m256 a[DIM_MAX / 8];
    for (int c = 0; c < vecs; c++) a[c] = _mm256_loadu_ps(acc + 8 * c);
    for (int t = t0; t < t1; t++) {
        const __m256 pt = _mm256_set1_ps(p[t]);
        const float *vt = ROW_AT(vs, vr, t);
        for (int c = 0; c < vecs; c++)
            a[c] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vt + 8 * c), a[c]);
    }
    for (int c = 0; c < vecs; c++) _mm256_storeu_ps(acc + 8 * c, a[c]);
}

/* one (query, KV head): the group's G query heads over the row's first len keys (those below
 * split from ks/vs, the shared row's). Each key and value is read once for all G heads (a
 * row's keys and values outgrow L2 at about 1,000 positions); each head's arithmetic is its
 * own and in key order, whatever G is. `acc` holds G * D floats. */
static void item(const float *qg, int64_t q_head, const float *kr, const float *vr,
                 const float *ks, const float *vs, int split, int len, int G, int D, float scale,
                 float *scores, float *acc, float *og, int64_t o_head) {
    const int vecs = D / 8;
    float top[G], sum[G];
    for (int g = 0; g < G; g++) top[g] = -INFINITY;
    /* scores 8 keys at a time: 8 independent chains of multiply-adds over d, then one
     * reduction of the 8 into a vector, the same tree for every key (a block past the last
     * key repeats the last key, and those scores are dropped) */
    const __m256 sv = _mm256_set1_ps(scale);
    for (int t0 = 0; t0 < len; t0 += 8) {
        const float *kt[8];
        for (int j = 0; j < 8; j++) kt[j] = ROW_AT(ks, kr, t0 + j < len ? t0 + j : len - 1);
        for (int g = 0; g < G; g++) {
            const float *qh = qg + g * q_head;
            __m256 a[8];
            for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
            for (int c = 0; c < vecs; c++) {
                const __m256 qc = _mm256_loadu_ps(qh + 8 * c);
                for (int j = 0; j < 8; j++)
                    a[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(kt[j] + 8 * c), a[j]);
            }
            const __m256 s8 = _mm256_mul_ps(sum8(a), sv);
            float *dst = scores + (int64_t)g * len + t0;
            if (t0 + 8 <= len) {
                _mm256_storeu_ps(dst, s8);
            } else {
                float tmp[8];
                _mm256_storeu_ps(tmp, s8);
                for (int j = 0; t0 + j < len; j++) dst[j] = tmp[j];
            }
        }
    }
    for (int g = 0; g < G; g++) {
        const float *sc = scores + (int64_t)g * len;
        for (int t = 0; t < len; t++) top[g] = sc[t] > top[g] ? sc[t] : top[g];
    }
    /* exp(s - max) in place, summed in key order (8 lanes, then the tail) */
    for (int g = 0; g < G; g++) {
        float *sc = scores + (int64_t)g * len;
        const __m256 m = _mm256_set1_ps(top[g]);
        __m256 lanes = _mm256_setzero_ps();
        int t = 0;
        for (; t + 8 <= len; t += 8) {
            const __m256 e = exp_neg_ps(_mm256_sub_ps(_mm256_loadu_ps(sc + t), m));
            _mm256_storeu_ps(sc + t, e);
            lanes = _mm256_add_ps(lanes, e);
        }
        sum[g] = hsum(lanes);
        for (; t < len; t++) {
            const float e = expf(sc[t] - top[g]);
            sc[t] = e;
            sum[g] += e;
        }
    }
    /* the values, weighted, in key order: each head's sums carried in acc from one pass of
     * PV_KEYS keys to the next (exactly) */
    for (int i = 0; i < G * D; i += 8) _mm256_storeu_ps(acc + i, _mm256_setzero_ps());
    for (int t0 = 0; t0 < len; t0 += PV_KEYS) {
        const int t1 = t0 + PV_KEYS < len ? t0 + PV_KEYS : len;
        for (int g = 0; g < G; g++) {
            const float *p = scores + (int64_t)g * len;
            if (vecs == 8) /* head size 64: the sums stay in registers */
                value_sums(p, t0, t1, vs, vr, split, D, 8, acc + g * D);
            else
                value_sums(p, t0, t1, vs, vr, split, D, vecs, acc + g * D);
        }
    }
    for (int g = 0; g < G; g++) {
        const __m256 inv = _mm256_set1_ps(1.0f / sum[g]);
        float *oh = og + g * o_head;
        for (int c = 0; c < vecs; c++)
            _mm256_storeu_ps(oh + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(acc + g * D + 8 * c), inv));
    }
}

int decode_attention_f32(const float *q, int64_t q_row, int64_t q_head, const float *k,
                         const float *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, int shared,
                         float *out, int64_t o_row, int64_t o_head, int n, int hq, int hkv,
                         int head_dim, float scale, int n_threads) {
    if (n < 0 || hkv < 1 || hq < hkv || hq % hkv || head_dim % 8 || head_dim < 8 ||
        head_dim > DIM_MAX)
        return -1;
    if (shared < 0 || pool_rows < 1) return -2;
    if (n < 2) shared = 0; /* nothing to share */
    int longest = 0;
    for (int i = 0; i < n; i++) {
        const int row = slots ? slots[i] : i;
        if (row < 0 || row >= pool_rows || lengths[i] < 1 || lengths[i] > capacity ||
            lengths[i] <= shared)
            return -2;
        longest = lengths[i] > longest ? lengths[i] : longest;
    }
    const int G = hq / hkv, items = n * hkv;
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > items) threads = items;
    if (threads < 1) return 0;
    /* per thread: the scores of G heads, then their value sums */
    const size_t per_thread = (size_t)G * ((size_t)longest + head_dim);
    float *scratch = malloc(sizeof(float) * (size_t)threads * per_thread);
    if (!scratch) return -3;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int it = 0; it < items; it++) {
        const int i = it / hkv, g = it % hkv;
        const int64_t row = slots ? slots[i] : i;
        const int64_t base = row * kv_slot + g * kv_head;
        float *scores = scratch + (size_t)omp_get_thread_num() * per_thread;
        /* the shared prefix from pool row 0 (a decoding row: it holds the prefix too) */
        const int64_t first = g * kv_head;
        item(q + i * q_row + (int64_t)g * G * q_head, q_head, k + base, v + base, k + first,
             v + first, shared, lengths[i], G, head_dim, scale, scores,
             scores + (size_t)G * longest, out + i * o_row + (int64_t)g * G * o_head, o_head);
    }
    free(scratch);
    return 0;
}

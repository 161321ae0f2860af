/* Causal prefill attention in float32 over one slot's KV, for CPUs with AVX2 and FMA but no
 * AVX-512 BF16 (where the engine runs in float32).
 *
 * PyTorch's SDPA took 40 ms a layer for a 1,550-token prompt of 9 query heads over 3 KV heads
 * on a 2-core EPYC (28 ms with the KV heads repeated), and a prompt piece after a cached
 * prefix went through its masked path, which computes the hidden half too. This kernel runs
 * flash attention with register tiles: scores and value sums in 6 x 16 blocks of fused
 * multiply-adds, over blocks of 64 keys, skipping the blocks a tile's rows cannot see.
 *
 * prefill_attention_f32: the n queries at positions start .. start + n - 1 attend causally
 *   over the slot's keys 0 .. start + n - 1 (a query sees the keys up to itself); the query
 *   heads of one KV head share its keys.
 *   q[i, h, d] at q + i * q_pos + h * q_head + d; the key of KV head g at position t at
 *   k + g * kv_head + t * head_dim (the same for v); out[i, h, d] at out + i * o_pos +
 *   h * o_head + d.
 *   A query's result depends only on itself and the keys it sees, never on the segment it came
 *   in or the rows beside it: its scores are each one chain of multiply-adds in d order, and
 *   its softmax runs over key blocks aligned to position 0 (64 keys each, the last one cut at
 *   its own position, hidden keys weighted exactly 0). So a prompt's KV is the same however it
 *   is cut into steps, and a cached prefix's continuation computes as a cold prompt does.
 *   Returns 0; -1 for a shape it does not take (head_dim a multiple of 16 up to DIM_MAX, hq a
 *   multiple of hkv, n and start not negative); -3 when memory cannot be had. Nothing is
 *   written unless it returns 0.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_avx2.h"
#include "vec_avx2.h"

#define DIM_MAX 256
#define MR 6          /* rows of a register tile */
#define PANEL 16      /* keys of a packed panel: two vectors */
#define KB 64         /* keys of a softmax block: PANEL_BLOCK panels */
#define PANEL_BLOCK (KB / PANEL)
#define ITEM_ROWS 24  /* rows (query, head) a work item aims at: its tiles share each K/V block */

/* the keys of one KV head as panels: panel p holds keys 16p .. 16p + 15, d-major (16 floats
 * for each d), zero past the last key */
static void pack_panel(const float *kg, int keys, int p, int D, float *dst) {
    const int t0 = p * PANEL, count = keys - t0 < PANEL ? keys - t0 : PANEL;
    for (int d = 0; d < D; d++) {
        float *row = dst + (int64_t)d * PANEL;
        int j = 0;
        for (; j < count; j++) row[j] = kg[(int64_t)(t0 + j) * D + d];
        for (; j < PANEL; j++) row[j] = 0.0f;
    }
}

/* S[r][0..16) = Q[r] . keys of one panel, for the tile's MR rows (each one FMA chain in d) */
static inline void scores_panel(const float *const *qr, const float *panel, int D, float *s,
                                int s_row) {
    __m256 a[MR][2];
    for (int r = 0; r < MR; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < D; d++) {
        const __m256 k0 = _mm256_loadu_ps(panel + d * PANEL);
        const __m256 k1 = _mm256_loadu_ps(panel + d * PANEL + 8);
        for (int r = 0; r < MR; r++) {
            const __m256 x = _mm256_broadcast_ss(qr[r] + d);
            a[r][0] = _mm256_fmadd_ps(x, k0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(x, k1, a[r][1]);
        }
    }
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_ps(s + r * s_row, a[r][0]);
        _mm256_storeu_ps(s + r * s_row + 8, a[r][1]);
    }
}

/* O[r] += P[r] . V over the block's first `keys` keys, 16 dims at a time */
static inline void values_block(const float *p, int keys, const float *vb, int D, float *const *o) {
    for (int c = 0; c < D; c += 16) {
        __m256 a[MR][2];
        for (int r = 0; r < MR; r++) {
            a[r][0] = _mm256_loadu_ps(o[r] + c);
            a[r][1] = _mm256_loadu_ps(o[r] + c + 8);
        }
        for (int j = 0; j < keys; j++) {
            const __m256 v0 = _mm256_loadu_ps(vb + (int64_t)j * D + c);
            const __m256 v1 = _mm256_loadu_ps(vb + (int64_t)j * D + c + 8);
            for (int r = 0; r < MR; r++) {
                const __m256 x = _mm256_broadcast_ss(p + r * KB + j);
                a[r][0] = _mm256_fmadd_ps(x, v0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(x, v1, a[r][1]);
            }
        }
        for (int r = 0; r < MR; r++) {
            _mm256_storeu_ps(o[r] + c, a[r][0]);
            _mm256_storeu_ps(o[r] + c + 8, a[r][1]);
        }
    }
}

/* one row's online softmax over a block of scores (log2 units): hide keys from `lim` on,
 * update the running max m and sum l, rescale its O, and leave the weights in s */
static inline void softmax_row(float *s, int kb, int lim, float *m, float *l, float *o, int D) {
    const __m256 neg = _mm256_set1_ps(-INFINITY);
    if (lim < kb + KB) {
        const int from = lim > kb ? lim - kb : 0;
        for (int j = from; j < KB; j++) s[j] = -INFINITY;
    }
    __m256 top = _mm256_loadu_ps(s);
    for (int j = 8; j < KB; j += 8) top = _mm256_max_ps(top, _mm256_loadu_ps(s + j));
    __m128 t4 = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    t4 = _mm_max_ps(t4, _mm_movehl_ps(t4, t4));
    t4 = _mm_max_ss(t4, _mm_movehdup_ps(t4));
    const float block_max = _mm_cvtss_f32(t4);
    if (block_max == -INFINITY) { /* every key hidden: weights 0, the row as it was */
        memset(s, 0, sizeof(float) * KB);
        return;
    }
    const float m_new = block_max > *m ? block_max : *m;
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int j = 0; j < KB; j += 8) {
        const __m256 x = _mm256_loadu_ps(s + j);
        const __m256 e = _mm256_and_ps(exp2_neg_ps(_mm256_sub_ps(x, mv)),
                                       _mm256_cmp_ps(x, neg, _CMP_GT_OQ));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (m_new != *m) {
        const float alpha = exp2f(*m - m_new); /* 0 on the row's first block */
        const __m256 av = _mm256_set1_ps(alpha);
        for (int c = 0; c < D; c += 8)
            _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), av));
        *l *= alpha;
        *m = m_new;
    }
    *l += hsum(sum);
}

typedef struct {
    const float *q;
    int64_t q_pos, q_head;
    const float *v, *kt; /* kt: packed panels, kv_panels floats per KV head */
    int64_t kv_head, kv_panels;
    float *out;
    int64_t o_pos, o_head;
    int start, n, G, D, per_item;
    float qscale;
} job_t;

/* scratch of one thread: queries (scaled), O, and each row's limit, max and sum */
typedef struct {
    float *qs, *o, *s, *m, *l;
    int *lim;
} scratch_t;

static void run_item(const job_t *jb, int g, int b, scratch_t *sc) {
    const int D = jb->D, G = jb->G;
    const int i0 = b * jb->per_item;
    const int i1 = i0 + jb->per_item < jb->n ? i0 + jb->per_item : jb->n;
    const int rows = (i1 - i0) * G, tiles = (rows + MR - 1) / MR, padded = tiles * MR;
    for (int r = 0; r < padded; r++) {
        const int rr = r < rows ? r : rows - 1; /* padding repeats the last row */
        const int i = i0 + rr / G, h = g * G + rr % G;
        const float *src = jb->q + i * jb->q_pos + h * jb->q_head;
        float *dst = sc->qs + (int64_t)r * D;
        for (int d = 0; d < D; d++) dst[d] = src[d] * jb->qscale;
        memset(sc->o + (int64_t)r * D, 0, sizeof(float) * D);
        sc->lim[r] = jb->start + i + 1;
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0f;
    }
    const int last = jb->start + i1; /* keys the item's last row sees */
    const float *kt = jb->kt + g * jb->kv_panels;
    const float *vg = jb->v + g * jb->kv_head;
    for (int kb = 0; kb < last; kb += KB) {
        for (int t = 0; t < tiles; t++) {
            const int r0 = t * MR;
            const int tile_lim = sc->lim[r0 + MR - 1]; /* rows ascend by position */
            if (tile_lim <= kb) continue;              /* every key of the block hidden */
            const float *qr[MR];
            float *orow[MR];
            for (int r = 0; r < MR; r++) {
                qr[r] = sc->qs + (int64_t)(r0 + r) * D;
                orow[r] = sc->o + (int64_t)(r0 + r) * D;
            }
            const int seen = tile_lim - kb < KB ? tile_lim - kb : KB;
            for (int p = 0; p < PANEL_BLOCK; p++) {
                if (p * PANEL < seen)
                    scores_panel(qr, kt + (int64_t)(kb / PANEL + p) * D * PANEL, D,
                                 sc->s + p * PANEL, KB);
                else
                    for (int r = 0; r < MR; r++)
                        for (int j = 0; j < PANEL; j++) sc->s[r * KB + p * PANEL + j] = -INFINITY;
            }
            for (int r = 0; r < MR; r++)
                softmax_row(sc->s + r * KB, kb, sc->lim[r0 + r], sc->m + r0 + r, sc->l + r0 + r,
                            orow[r], D);
            values_block(sc->s, seen, vg + (int64_t)kb * D, D, orow);
        }
    }
    for (int r = 0; r < rows; r++) {
        const int i = i0 + r / G, h = g * G + r % G;
        const __m256 inv = _mm256_set1_ps(1.0f / sc->l[r]);
        const float *o = sc->o + (int64_t)r * D;
        float *dst = jb->out + i * jb->o_pos + h * jb->o_head;
        for (int c = 0; c < D; c += 8)
            _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_loadu_ps(o + c), inv));
    }
}

int prefill_attention_f32(const float *q, int64_t q_pos, int64_t q_head, const float *k,
                          const float *v, int64_t kv_head, float *out, int64_t o_pos,
                          int64_t o_head, int n, int start, int hq, int hkv, int head_dim,
                          float scale, int n_threads) {
    if (n < 0 || start < 0 || hkv < 1 || hq < hkv || hq % hkv || head_dim % 16 ||
        head_dim < 16 || head_dim > DIM_MAX)
        return -1;
    if (n == 0) return 0;
    const int G = hq / hkv, D = head_dim, keys = start + n;
    const int per_item = G >= ITEM_ROWS ? 1 : ITEM_ROWS / G;
    const int blocks = (n + per_item - 1) / per_item, items = blocks * hkv;
    const int panels = (keys + PANEL - 1) / PANEL;
    const int64_t kv_panels = (int64_t)panels * PANEL * D;
    /* blocks read whole panels up to the block's last key seen, which is < keys */
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > items) threads = items;
    const int padded = ((per_item * G + MR - 1) / MR) * MR;
    const size_t per_thread = (size_t)padded * D * 2 + MR * KB + (size_t)padded * 2;
    float *kt = malloc(sizeof(float) * (size_t)(kv_panels * hkv));
    float *work = malloc(sizeof(float) * per_thread * threads);
    int *lims = malloc(sizeof(int) * (size_t)padded * threads);
    if (!kt || !work || !lims) {
        free(kt);
        free(work);
        free(lims);
        return -3;
    }
    job_t jb = {q,     q_pos, q_head, v,     kt, kv_head, kv_panels, out, o_pos, o_head,
                start, n,     G,      D,     per_item, scale * 1.44269504f};
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
        for (int it = 0; it < hkv * panels; it++) {
            const int g = it / panels, p = it % panels;
            pack_panel(k + g * kv_head, keys, p, D, kt + g * kv_panels + (int64_t)p * PANEL * D);
        }
        float *base = work + per_thread * omp_get_thread_num();
        scratch_t sc = {base, base + (size_t)padded * D, base + (size_t)padded * D * 2,
                        base + (size_t)padded * D * 2 + MR * KB,
                        base + (size_t)padded * D * 2 + MR * KB + padded,
                        lims + (size_t)padded * omp_get_thread_num()};
        /* the latest positions first: they see the most keys */
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++)
            run_item(&jb, it % hkv, blocks - 1 - it / hkv, &sc);
    }
    free(kt);
    free(work);
    free(lims);
    return 0;
}

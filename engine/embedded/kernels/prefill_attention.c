/* Causal prefill attention over one slot's KV rows, bfloat16 in and out, for x86-64 CPUs with
 * AVX-512 BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids and later).
 *
 * Query row i (position q_start + i) of query head h attends to keys 0 .. q_start + i of KV
 * head h / (hq / hkv). Both products run on VDPBF16PS (bf16 pairs, fp32 accumulation); the
 * softmax is online (running max and sum per row) in fp32, as in flash attention, so no score
 * matrix is ever stored beyond one 4 x 64 tile.
 *
 * Layouts (element strides; the innermost dimension of q, k, v and out is contiguous):
 *   q[i, h, d]   at q + i * q_row + h * q_head
 *   k[g, j, d]   at k + g * kv_head + j * head_dim        (v likewise)
 *   out[i, h, d] at out + i * o_row + h * o_head
 * K and V are first repacked per KV head into the pair-interleaved ("VNNI") layouts the
 * instruction reads, zero-padded to a whole key block.
 *
 * Returns 0, or -1 for an unsupported head_dim or a failed allocation (nothing is written).
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 64 /* keys per block: four 16-lane vectors */
#define ROWS 6  /* query rows per tile */

typedef uint16_t bf16;

typedef struct {
    const bf16 *q;
    int64_t q_row, q_head;
    const bf16 *kp, *vp; /* packed K and V, `packed` elements per KV head */
    int64_t packed;
    bf16 *out;
    int64_t o_row, o_head;
    int n_q, q_start, hq, group, head_dim;
    float scale_log2;
    int tiles_per_head, n_items, n_threads;
} job_t;

typedef struct {
    const job_t *job;
    int first;
} worker_t;

static inline __m512 exp2_ps(__m512 x) {
    /* 2^x = 2^n * 2^f, n = round(x), |f| <= 1/2; degree-6 Taylor series of 2^f (error < 2e-7) */
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.5403530e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* K[j, d] -> kp[(block16(j) * (D/2) + d/2) * 32 + (j % 16) * 2 + d % 2] */
static void pack_k(const bf16 *k, int n_keys, int n_pad, int D, bf16 *kp) {
    int pairs = D / 2;
    memset(kp, 0, (size_t)n_pad * D * sizeof(bf16));
    for (int j = 0; j < n_keys; j++) {
        const uint32_t *src = (const uint32_t *)(k + (int64_t)j * D);
        uint32_t *dst = (uint32_t *)kp + (int64_t)(j / 16) * pairs * 16 + (j % 16);
        for (int p = 0; p < pairs; p++) dst[p * 16] = src[p];
    }
}

/* V[j, d] -> vp[((j/2) * D + d) * 2 + j % 2] */
static void pack_v(const bf16 *v, int n_keys, int n_pad, int D, bf16 *vp) {
    memset(vp, 0, (size_t)n_pad * D * sizeof(bf16));
    for (int j = 0; j < n_keys; j++) {
        const bf16 *src = v + (int64_t)j * D;
        bf16 *dst = vp + (int64_t)(j / 2) * D * 2 + (j % 2);
        for (int d = 0; d < D; d++) dst[d * 2] = src[d];
    }
}

static inline void tile(const job_t *J, int h, int r0, const int D) {
    const int pairs = D / 2, nv = D / 16;
    const int rows = J->n_q - r0 < ROWS ? J->n_q - r0 : ROWS;
    const bf16 *kp = J->kp + (int64_t)(h / J->group) * J->packed;
    const bf16 *vp = J->vp + (int64_t)(h / J->group) * J->packed;
    uint32_t qp[ROWS][64];
    float m[ROWS], l[ROWS];
    __m512 o[ROWS][8];
    for (int r = 0; r < ROWS; r++) {
        if (r < rows)
            memcpy(qp[r], J->q + (int64_t)(r0 + r) * J->q_row + (int64_t)h * J->q_head,
                   D * sizeof(bf16));
        else
            memset(qp[r], 0, D * sizeof(bf16));
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int c = 0; c < nv; c++) o[r][c] = _mm512_setzero_ps();
    }
    const int visible = J->q_start + r0 + rows; /* keys the tile's last row sees */
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int k0 = 0; k0 < visible; k0 += KEYS) {
        __m512 s[ROWS][4];
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < 4; c++) s[r][c] = _mm512_setzero_ps();
        const bf16 *kb = kp + (int64_t)(k0 / 16) * pairs * 32;
        for (int p = 0; p < pairs; p++) {
            __m512bh kv[4];
            for (int c = 0; c < 4; c++)
                kv[c] = (__m512bh)_mm512_loadu_si512(kb + ((int64_t)c * pairs + p) * 32);
            for (int r = 0; r < ROWS; r++) {
                __m512bh qb = (__m512bh)_mm512_set1_epi32((int)qp[r][p]);
                for (int c = 0; c < 4; c++) s[r][c] = _mm512_dpbf16_ps(s[r][c], qb, kv[c]);
            }
        }
        uint32_t pb[ROWS][KEYS / 2];
        for (int r = 0; r < ROWS; r++) {
            /* keys k0 + t with t < limit are visible to row r */
            const int limit = J->q_start + r0 + r + 1 - k0;
            __mmask16 mask[4];
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int c = 0; c < 4; c++) {
                __m512i idx = _mm512_add_epi32(lane, _mm512_set1_epi32(c * 16));
                mask[c] = _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(limit));
                s[r][c] = _mm512_mul_ps(s[r][c], _mm512_set1_ps(J->scale_log2));
                mx = _mm512_mask_max_ps(mx, mask[c], mx, s[r][c]);
            }
            const float m_new = m[r] > _mm512_reduce_max_ps(mx) ? m[r] : _mm512_reduce_max_ps(mx);
            if (m_new == -INFINITY) { /* nothing visible in this block (padding rows only) */
                memset(pb[r], 0, sizeof(pb[r]));
                continue;
            }
            const __m512 alpha = exp2_ps(_mm512_set1_ps(m[r] - m_new));
            const __m512 mn = _mm512_set1_ps(m_new);
            __m512 sum = _mm512_setzero_ps();
            __m512 pr[4];
            for (int c = 0; c < 4; c++) {
                pr[c] = _mm512_maskz_mov_ps(mask[c], exp2_ps(_mm512_sub_ps(s[r][c], mn)));
                sum = _mm512_add_ps(sum, pr[c]);
            }
            l[r] = l[r] * _mm512_cvtss_f32(alpha) + _mm512_reduce_add_ps(sum);
            m[r] = m_new;
            for (int c = 0; c < nv; c++) o[r][c] = _mm512_mul_ps(o[r][c], alpha);
            /* cvtne2ps puts its second operand in the low half */
            _mm512_storeu_si512(pb[r], (__m512i)_mm512_cvtne2ps_pbh(pr[1], pr[0]));
            _mm512_storeu_si512(pb[r] + 16, (__m512i)_mm512_cvtne2ps_pbh(pr[3], pr[2]));
        }
        const bf16 *vb = vp + (int64_t)(k0 / 2) * D * 2;
        for (int jp = 0; jp < KEYS / 2; jp++) {
            __m512bh vv[8];
            for (int c = 0; c < nv; c++)
                vv[c] = (__m512bh)_mm512_loadu_si512(vb + ((int64_t)jp * D + c * 16) * 2);
            for (int r = 0; r < ROWS; r++) {
                __m512bh w = (__m512bh)_mm512_set1_epi32((int)pb[r][jp]);
                for (int c = 0; c < nv; c++) o[r][c] = _mm512_dpbf16_ps(o[r][c], w, vv[c]);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        const __m512 inv = _mm512_set1_ps(1.0f / l[r]);
        bf16 *dst = J->out + (int64_t)(r0 + r) * J->o_row + (int64_t)h * J->o_head;
        for (int c = 0; c < nv; c++)
            _mm256_storeu_si256((__m256i *)(dst + c * 16),
                                (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(o[r][c], inv)));
    }
}

static void *work(void *arg) {
    const worker_t *w = (const worker_t *)arg;
    const job_t *J = w->job;
    /* items interleave across threads: later tiles see more keys, so this balances load */
    for (int item = w->first; item < J->n_items; item += J->n_threads) {
        const int h = item % J->hq, t = item / J->hq;
        if (J->head_dim == 64)
            tile(J, h, t * ROWS, 64);
        else
            tile(J, h, t * ROWS, 128);
    }
    return NULL;
}

int prefill_attention(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k, const bf16 *v,
                      int64_t kv_head, bf16 *out, int64_t o_row, int64_t o_head, int n_q,
                      int q_start, int hq, int hkv, int head_dim, float scale, int n_threads) {
    if ((head_dim != 64 && head_dim != 128) || hq % hkv || n_q <= 0) return -1;
    const int n_keys = q_start + n_q;
    const int n_pad = (n_keys + KEYS - 1) / KEYS * KEYS;
    const int64_t packed = (int64_t)n_pad * head_dim;
    bf16 *buf = aligned_alloc(64, (size_t)packed * hkv * 2 * sizeof(bf16));
    if (!buf) return -1;
    bf16 *kp = buf, *vp = buf + packed * hkv;
    for (int g = 0; g < hkv; g++) {
        pack_k(k + g * kv_head, n_keys, n_pad, head_dim, kp + g * packed);
        pack_v(v + g * kv_head, n_keys, n_pad, head_dim, vp + g * packed);
    }
    job_t job = {q, q_row, q_head, kp, vp, packed, out, o_row, o_head, n_q, q_start, hq,
                 hq / hkv, head_dim, scale * 1.4426950408889634f, 0, 0, 0};
    job.tiles_per_head = (n_q + ROWS - 1) / ROWS;
    job.n_items = job.tiles_per_head * hq;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    if (n_threads > job.n_items) n_threads = job.n_items;
    job.n_threads = n_threads;
    pthread_t threads[64];
    worker_t workers[64];
    int started[64] = {0};
    for (int t = 0; t < n_threads; t++) {
        workers[t].job = &job;
        workers[t].first = t;
    }
    for (int t = 1; t < n_threads; t++)
        started[t] = pthread_create(&threads[t], NULL, work, &workers[t]) == 0;
    work(&workers[0]);
    /* a worker that failed to start has its items run here instead */
    for (int t = 1; t < n_threads; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            work(&workers[t]);
    }
    free(buf);
    return 0;
}

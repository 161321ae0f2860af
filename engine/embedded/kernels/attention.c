/* Attention over the embedded engine's slot KV pool, bfloat16 in and out, for x86-64 CPUs with
 * AVX-512 BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids and later). Two entry points:
 *
 * prefill_attention: one prompt segment of one slot, causal. Query row i (position
 *   q_start + i) of query head h attends to keys 0 .. q_start + i of KV head h / (hq / hkv).
 * decode_attention: n single-token queries; query r reads pool row slots[r] (row r when slots
 *   is NULL) over its keys 0 .. lengths[r] - 1. Several queries may read one row: a decoding
 *   request's pending token and its speculative drafts, each seeing the keys up to itself.
 *   The first `shared` positions hold the same prompt tokens (so the same keys and values)
 *   in every row: a shared system prompt or document prefix. Every query reads them from
 *   row 0, where the first item to read them leaves them in cache for the rest, so memory is
 *   read about once for all rows. Each query still runs one pass over its keys in order,
 *   with the same arithmetic whatever `shared` is: a query's output never depends on which
 *   other requests decode beside it (the old separate pass over the shared prefix, merged by
 *   log-sum-exp, rounded differently, and greedy answers changed with the company).
 *
 * Prefill's products run on VDPBF16PS (bf16 pairs, fp32 accumulation) over tiles of ROWS
 * queries x KEYS keys; the softmax is online (running max and sum per query) in fp32, as in
 * flash attention, so no score matrix is stored beyond one tile. K and V are first repacked
 * into the pair-interleaved ("VNNI") layouts the instruction reads, zero-padded to whole key
 * blocks. Decode reads each row's keys and values in place (`own_keys`: a repack would cost as
 * much as the read for so few queries), with one row of scores per query; its weights are
 * rounded to bfloat16 as prefill's are, and its value sums run on VDPBF16PS over pairs of keys
 * interleaved in registers (fp32 multiply-adds had been most of a query's time: 30 layers of
 * 5 queries on one row of 1,500 keys, 2 vCPUs of a Zen 4 VM, 3.2-3.8 -> 2.6-3.3 ms; 8 rows of
 * 1,600 keys 5.2-6.5 -> 4.3-5.1 ms). Its queries are
 * grouped by pool row: a request's pending token and its drafts read the row's keys in one
 * pass, each only up to itself (a draft's attention had cost as much as its request's: on
 * SmolLM2-135M's heads over 1,500 keys, 2 vCPUs of a Zen 5 VM, a layer took 28 / 85 us for
 * 0 / 4 drafts, and 25 / 55 us so).
 *
 * Layouts (element strides; the innermost dimension of every tensor is contiguous):
 *   q[i, h, d]   at q + i * q_row + h * q_head
 *   k[g, j, d]   at k + g * kv_head + j * head_dim        (v likewise; plus r * kv_slot per row)
 *   out[i, h, d] at out + i * o_row + h * o_head
 * Threads come from OpenMP: loaded into a PyTorch process, this library binds to PyTorch's own
 * libgomp (same soname), so both share one thread team.
 *
 * Both return 0, or -1 for an unsupported shape or a failed allocation (nothing is written);
 * decode_attention returns -2 for a row or a length outside the pool (nothing is written).
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode_items.h"
#include "kernels.h" /* its own prototypes, checked against the definitions */
#include "kv_pack.h"
#include "vec.h"

#define KEYS 64 /* keys per block: four 16-lane vectors */
#define ROWS 6  /* query rows per tile */
#define DEC_ROWS 6 /* query rows of one decode item (a request's queries x a KV head's heads) */

#define MAX_D 128
#define PREFETCH 16 /* keys ahead: the row comes from memory (10% faster on 8 rows of 1,600 keys) */

/* The unnormalised online-softmax state of up to ROWS queries: running max m (log2 units),
 * running sum l, and the weighted sum of values o. */
typedef struct {
    float m[ROWS], l[ROWS];
    float o[ROWS][MAX_D];
} part_t;

_Static_assert(KEYS == PACK_KEYS, "a tile reads whole padded key blocks");

/* Queries qrow[r] (NULL: a padding row) over packed keys; query r sees keys t < limit[r].
 * Writes st. Every real row must see at least one key overall (limit >= 1). */
static inline void attend_tile(const bf16 *const qrow[ROWS], const int limit[ROWS],
                               const bf16 *kp, const bf16 *vp, float scale_log2, const int D,
                               part_t *st) {
    const int pairs = D / 2, nv = D / 16;
    uint32_t qp[ROWS][MAX_D / 2];
    __m512 o[ROWS][MAX_D / 16];
    int visible = 0;
    for (int r = 0; r < ROWS; r++) {
        if (qrow[r])
            memcpy(qp[r], qrow[r], D * sizeof(bf16));
        else
            memset(qp[r], 0, D * sizeof(bf16));
        if (qrow[r] && limit[r] > visible) visible = limit[r];
        st->m[r] = -INFINITY;
        st->l[r] = 0.0f;
        for (int c = 0; c < nv; c++) o[r][c] = _mm512_setzero_ps();
    }
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
            /* keys k0 + t with t < lim are visible to row r; a full block needs no masks */
            const int lim = qrow[r] ? limit[r] - k0 : 0;
            const int full = lim >= KEYS;
            __mmask16 mask[4];
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int c = 0; c < 4; c++) {
                if (full) {
                    mask[c] = 0xFFFF;
                } else {
                    __m512i idx = _mm512_add_epi32(lane, _mm512_set1_epi32(c * 16));
                    mask[c] = _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32(lim));
                }
                mx = _mm512_mask_max_ps(mx, mask[c], mx, s[r][c]);
            }
            /* the scale is positive: scaling after the max keeps the order */
            const float bmax = _mm512_reduce_max_ps(mx) * scale_log2;
            const float m_old = st->m[r];
            const float m_new = m_old > bmax ? m_old : bmax;
            if (m_new == -INFINITY) { /* nothing visible to this row in this block */
                memset(pb[r], 0, sizeof(pb[r]));
                continue;
            }
            if (m_new > m_old) { /* rescale what was summed under the old max */
                const float alpha = exp2f(m_old - m_new); /* 0 for the first block */
                st->l[r] *= alpha;
                const __m512 a = _mm512_set1_ps(alpha);
                for (int c = 0; c < nv; c++) o[r][c] = _mm512_mul_ps(o[r][c], a);
                st->m[r] = m_new;
            }
            const __m512 neg_m = _mm512_set1_ps(-m_new), sc = _mm512_set1_ps(scale_log2);
            __m512 sum = _mm512_setzero_ps();
            __m512 pr[4];
            for (int c = 0; c < 4; c++) {
                pr[c] = exp2_softmax_ps(_mm512_fmadd_ps(s[r][c], sc, neg_m));
                if (!full) pr[c] = _mm512_maskz_mov_ps(mask[c], pr[c]);
                sum = _mm512_add_ps(sum, pr[c]);
            }
            st->l[r] += _mm512_reduce_add_ps(sum);
            /* cvtne2ps puts its second operand in the low half */
            _mm512_storeu_si512(pb[r], (__m512i)_mm512_cvtne2ps_pbh(pr[1], pr[0]));
            _mm512_storeu_si512(pb[r] + 16, (__m512i)_mm512_cvtne2ps_pbh(pr[3], pr[2]));
        }
        const bf16 *vb = vp + (int64_t)(k0 / 2) * D * 2;
        for (int jp = 0; jp < KEYS / 2; jp++) {
            __m512bh vv[MAX_D / 16];
            for (int c = 0; c < nv; c++)
                vv[c] = (__m512bh)_mm512_loadu_si512(vb + ((int64_t)jp * D + c * 16) * 2);
            for (int r = 0; r < ROWS; r++) {
                __m512bh w = (__m512bh)_mm512_set1_epi32((int)pb[r][jp]);
                for (int c = 0; c < nv; c++) o[r][c] = _mm512_dpbf16_ps(o[r][c], w, vv[c]);
            }
        }
    }
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < nv; c++) _mm512_storeu_ps(st->o[r] + c * 16, o[r][c]);
}

/* the cache lines of one key's (or value's) D elements; a hint: past the row's end is harmless */
static inline void prefetch_row(const bf16 *p, int D) {
    for (int i = 0; i < D; i += 32) _mm_prefetch((const char *)(p + i), _MM_HINT_T0);
}

/* key (or value) j of a row whose keys below `split` are read from the shared row's copy */
#define KEY_AT(shared_row, own_row, j) \
    (((j) < split ? (shared_row) : (own_row)) + (int64_t)(j) * D)

/* lane t of the result: the sum of a[t]'s 16 lanes, by a transposing tree (45 operations for
 * the 16 sums, where a horizontal sum takes about 8 for each) */
static inline __m512 sum16(const __m512 a[16]) {
    __m512 b[8], c[4], d[2];
    for (int i = 0; i < 8; i++) /* per 128-bit lane: pairs of partial sums of a[2i], a[2i+1] */
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                             _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) { /* per 128-bit lane: that lane's sums of a[4i] .. a[4i+3] */
        const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
        c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    for (int i = 0; i < 2; i++) /* 128-bit lanes L0+L1 and L2+L3 of c[2i], then of c[2i+1] */
        d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88),
                         _mm512_shuffle_f32x4(d[0], d[1], 0xDD));
}

/* Query rows qrow[0 .. rows - 1] (rows <= DEC_ROWS) of one pool row, row r over its keys
 * 0 .. lim[r] - 1 (own: the largest lim), read in place (row-major [own, D]: no repacking,
 * which would cost as much as the read for so few queries); keys below `split` from k0/v0,
 * the same positions of the row that holds the shared prefix. Row r's output, normalised, goes
 * to orow[r]. The rows are a request's pending token and its drafts, each for the query heads
 * of one KV head: one read of the keys and values serves them all.
 *
 * Invariant: a row's arithmetic is the same whatever other rows share the call (its scores
 * in blocks of 16 keys from key 0, its softmax, and its value sums over pairs of keys from
 * key 0 in order, a key past its own limit weighted exactly 0): a query's output never
 * depends on the company. */
static inline __attribute__((always_inline)) void own_keys(
    const bf16 *const qrow[DEC_ROWS], bf16 *const orow[DEC_ROWS], const int lim[DEC_ROWS],
    const int rows, const bf16 *k0, const bf16 *v0, int split, const bf16 *k, const bf16 *v,
    int own, float scale_log2, const int D, float *sbuf) {
    const int halves = D / 32, nv = D / 16;
    __m512bh qv[DEC_ROWS][MAX_D / 32];
    __m512 vmax[DEC_ROWS];
    for (int r = 0; r < rows; r++) {
        for (int h = 0; h < halves; h++)
            qv[r][h] = (__m512bh)_mm512_loadu_si512(qrow[r] + h * 32);
        vmax[r] = _mm512_set1_ps(-INFINITY);
    }
    /* scores, 16 keys at a time: per row, 16 dot products' partial vectors summed into one
     * vector of 16 scores (sum16); the keys come from memory once, the other rows find them
     * in cache */
    for (int j0 = 0; j0 < own; j0 += 16) {
        for (int t = 0; t < 16; t++) prefetch_row(KEY_AT(k0, k, j0 + PREFETCH + t), D);
        /* a whole block on one side of `split` reads its keys from one base */
        const bf16 *base = j0 + 16 <= split ? k0 : (j0 >= split ? k : NULL);
        for (int r = 0; r < rows; r++) {
            const int cnt = lim[r] - j0 < 16 ? lim[r] - j0 : 16;
            if (cnt <= 0) continue;
            __m512 acc[16];
            if (cnt == 16 && base) {
                const bf16 *kb = base + (int64_t)j0 * D;
#pragma GCC unroll 16
                for (int t = 0; t < 16; t++) {
                    acc[t] = _mm512_dpbf16_ps(_mm512_setzero_ps(), qv[r][0],
                                              (__m512bh)_mm512_loadu_si512(kb + t * D));
                    for (int h = 1; h < halves; h++)
                        acc[t] = _mm512_dpbf16_ps(
                            acc[t], qv[r][h], (__m512bh)_mm512_loadu_si512(kb + t * D + h * 32));
                }
            } else {
                for (int t = 0; t < 16; t++) {
                    acc[t] = _mm512_setzero_ps();
                    if (t < cnt) {
                        const bf16 *kj = KEY_AT(k0, k, j0 + t);
                        for (int h = 0; h < halves; h++)
                            acc[t] = _mm512_dpbf16_ps(
                                acc[t], qv[r][h], (__m512bh)_mm512_loadu_si512(kj + h * 32));
                    }
                }
            }
            const __mmask16 live = cnt == 16 ? 0xFFFF : (__mmask16)((1u << cnt) - 1);
            const __m512 sc = _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale_log2));
            _mm512_mask_storeu_ps(sbuf + r * own + j0, live, sc);
            vmax[r] = _mm512_mask_max_ps(vmax[r], live, vmax[r], sc);
        }
    }
    /* softmax: each row's weights exp2(score - max) over its keys, summed in fp32 for the
     * normaliser, then rounded to bfloat16 in place (row r's weight j at ((bf16 *)(sbuf +
     * r * own))[j]: written behind what is still to be read) up to an even count, zero past
     * the row's own keys, so the value sums take whole pairs of keys */
    const int own2 = (own + 1) & ~1;
    float l[DEC_ROWS];
    for (int r = 0; r < rows; r++) {
        const __m512 mn = _mm512_set1_ps(_mm512_reduce_max_ps(vmax[r]));
        __m512 sum = _mm512_setzero_ps();
        float *row = sbuf + r * own;
        for (int j = 0; j < own2; j += 16) {
            const int left = lim[r] - j;
            const __mmask16 live =
                left >= 16 ? 0xFFFF : (left <= 0 ? 0 : (__mmask16)((1u << left) - 1));
            __m512 e = exp2_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, row + j), mn));
            e = _mm512_maskz_mov_ps(live, e);
            sum = _mm512_add_ps(sum, e);
            const int width = own2 - j < 16 ? own2 - j : 16; /* even */
            _mm256_mask_storeu_epi16((bf16 *)row + j, (__mmask16)((1u << width) - 1),
                                     (__m256i)_mm512_cvtneps_pbh(e));
        }
        l[r] = _mm512_reduce_add_ps(sum);
    }
    /* value sums on VDPBF16PS, two keys a product: keys j and j + 1 interleaved by 16-bit
     * unpacks, so accumulator 2c holds dims c * 32 + {0-3, 8-11, 16-19, 24-27} and 2c + 1 the
     * other 16 of those 32 (put back in order at the end); every row runs every pair in key
     * order, a weight of 0 past its keys */
    __m512 o[DEC_ROWS][MAX_D / 16];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < nv; c++) o[r][c] = _mm512_setzero_ps();
    for (int j = 0; j < own2; j += 2) {
        prefetch_row(KEY_AT(v0, v, j + PREFETCH), D);
        prefetch_row(KEY_AT(v0, v, j + PREFETCH + 1), D);
        const bf16 *va = KEY_AT(v0, v, j);
        const bf16 *vb = j + 1 < own ? KEY_AT(v0, v, j + 1) : NULL; /* an odd count's last */
        __m512bh lo[MAX_D / 32], hi[MAX_D / 32];
        for (int c = 0; c < halves; c++) {
            const __m512i a = _mm512_loadu_si512(va + c * 32);
            const __m512i b = vb ? _mm512_loadu_si512(vb + c * 32) : _mm512_setzero_si512();
            lo[c] = (__m512bh)_mm512_unpacklo_epi16(a, b);
            hi[c] = (__m512bh)_mm512_unpackhi_epi16(a, b);
        }
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            __builtin_memcpy(&pair, (const bf16 *)(sbuf + r * own) + j, sizeof(pair));
            const __m512bh w = (__m512bh)_mm512_set1_epi32(pair);
            for (int c = 0; c < halves; c++) {
                o[r][2 * c] = _mm512_dpbf16_ps(o[r][2 * c], w, lo[c]);
                o[r][2 * c + 1] = _mm512_dpbf16_ps(o[r][2 * c + 1], w, hi[c]);
            }
        }
    }
    const __m512i first = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    const __m512i second =
        _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
    for (int r = 0; r < rows; r++) {
        const __m512 inv = _mm512_set1_ps(1.0f / l[r]);
        for (int c = 0; c < halves; c++) {
            const __m512 a = o[r][2 * c], b = o[r][2 * c + 1];
            store_bf16(orow[r] + c * 32, _mm512_mul_ps(_mm512_permutex2var_ps(a, first, b), inv));
            store_bf16(orow[r] + c * 32 + 16,
                       _mm512_mul_ps(_mm512_permutex2var_ps(a, second, b), inv));
        }
    }
}

/* own_keys with head_dim, and a few row counts, as compile-time constants */
static void own_keys_any(const bf16 *const qrow[DEC_ROWS], bf16 *const orow[DEC_ROWS],
                         const int lim[DEC_ROWS], int rows, const bf16 *k0, const bf16 *v0,
                         int split, const bf16 *k, const bf16 *v, int own, float scale_log2,
                         int D, float *sbuf) {
#define OWN_CASE(R)                                                                        \
    case R:                                                                                \
        if (D == 64)                                                                       \
            own_keys(qrow, orow, lim, R, k0, v0, split, k, v, own, scale_log2, 64, sbuf);  \
        else                                                                               \
            own_keys(qrow, orow, lim, R, k0, v0, split, k, v, own, scale_log2, 128, sbuf); \
        break;
    switch (rows) {
        OWN_CASE(1)
        OWN_CASE(2)
        OWN_CASE(3)
        OWN_CASE(4)
        OWN_CASE(5)
        default:
            if (D == 64)
                own_keys(qrow, orow, lim, DEC_ROWS, k0, v0, split, k, v, own, scale_log2, 64,
                         sbuf);
            else
                own_keys(qrow, orow, lim, DEC_ROWS, k0, v0, split, k, v, own, scale_log2, 128,
                         sbuf);
    }
#undef OWN_CASE
}

static inline void store_row(const part_t *st, int r, bf16 *dst, int D) {
    const __m512 inv = _mm512_set1_ps(1.0f / st->l[r]);
    for (int c = 0; c < D / 16; c++)
        _mm256_storeu_si256(
            (__m256i *)(dst + c * 16),
            (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(st->o[r] + c * 16), inv)));
}

/* head_dim as a compile-time constant, so the tile loops unroll */
static inline void attend_tile_d(const bf16 *const qrow[ROWS], const int limit[ROWS],
                                 const bf16 *kp, const bf16 *vp, float scale_log2, int D,
                                 part_t *st) {
    if (D == 64)
        attend_tile(qrow, limit, kp, vp, scale_log2, 64, st);
    else
        attend_tile(qrow, limit, kp, vp, scale_log2, 128, st);
}

int prefill_attention(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k, const bf16 *v,
                      int64_t kv_head, bf16 *out, int64_t o_row, int64_t o_head, int n_q,
                      int q_start, int hq, int hkv, int head_dim, float scale, int n_threads) {
    if ((head_dim != 64 && head_dim != 128) || hkv < 1 || hq % hkv || n_q <= 0 || q_start < 0)
        return -1;
    const int D = head_dim, group = hq / hkv, n_keys = q_start + n_q;
    int64_t packed;
    bf16 *buf = alloc_packed(n_keys, D, hkv, &packed);
    if (!buf) return -1;
    bf16 *kp = buf, *vp = buf + packed * hkv;
    const float scale_log2 = scale * 1.4426950408889634f;
    const int tiles = (n_q + ROWS - 1) / ROWS, items = tiles * hq;
#pragma omp parallel num_threads(clamp_threads(n_threads, items))
    {
        pack_heads(k, v, kv_head, hkv, n_keys, D, kp, vp, packed);
        /* round-robin items: later tiles see more keys, so this balances the threads */
#pragma omp for schedule(static, 1)
        for (int item = 0; item < items; item++) {
            const int h = item % hq, r0 = item / hq * ROWS;
            const bf16 *qrow[ROWS];
            int limit[ROWS];
            for (int r = 0; r < ROWS; r++) {
                const int row = r0 + r;
                qrow[r] = row < n_q ? q + (int64_t)row * q_row + (int64_t)h * q_head : NULL;
                limit[r] = q_start + row + 1;
            }
            part_t st;
            attend_tile_d(qrow, limit, kp + (h / group) * packed, vp + (h / group) * packed,
                          scale_log2, D, &st);
            for (int r = 0; r < ROWS && r0 + r < n_q; r++)
                store_row(&st, r, out + (int64_t)(r0 + r) * o_row + (int64_t)h * o_head, D);
        }
    }
    free(buf);
    return 0;
}

int decode_attention(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k, const bf16 *v,
                     int64_t kv_slot, int64_t kv_head, int pool_rows, int capacity,
                     const int32_t *lengths, const int32_t *slots, int shared, bf16 *out,
                     int64_t o_row, int64_t o_head, int n, int hq, int hkv, int head_dim,
                     float scale, int n_threads) {
    if ((head_dim != 64 && head_dim != 128) || hkv < 1 || hq % hkv || n <= 0) return -1;
    if (shared < 0) return -2;
    decode_items it;
    int longest;
    const int rc = decode_items_build(&it, n, lengths, slots, pool_rows, capacity, shared, hq,
                                      hkv, DEC_ROWS, n_threads, &longest);
    const int threads = clamp_threads(n_threads, it.items);
    /* allocated up front: a parallel region cannot fail half-way */
    float *scores = rc ? NULL : malloc(sizeof(float) * DEC_ROWS * (size_t)longest * threads);
    if (rc || !scores) {
        decode_items_free(&it);
        return rc ? rc : -1;
    }
    if (n == 1) shared = 0; /* nothing to share */
    const int D = head_dim;
    const float scale_log2 = scale * 1.4426950408889634f;
#pragma omp parallel num_threads(threads)
    {
        float *sbuf = scores + (int64_t)omp_get_thread_num() * DEC_ROWS * longest;
        /* the shared prefix is read from pool row 0, where it stays in cache for the other
         * rows' items */
#pragma omp for schedule(static, 1)
        for (int item = 0; item < it.items; item++) {
            const bf16 *qrow[DEC_ROWS];
            bf16 *orow[DEC_ROWS];
            int lim[DEC_ROWS], own, g;
            int64_t slot;
            const int rows = decode_item_rows(&it, item, q, q_row, q_head, out, o_row, o_head,
                                              lengths, slots, qrow, orow, lim, NULL, &slot, &g,
                                              &own);
            const int64_t head = (int64_t)g * kv_head;
            own_keys_any(qrow, orow, lim, rows, k + head, v + head, shared,
                         k + slot * kv_slot + head, v + slot * kv_slot + head, own, scale_log2,
                         D, sbuf);
        }
    }
    decode_items_free(&it);
    free(scores);
    return 0;
}

/* Causal prefill attention on AMX tiles (Sapphire Rapids and later Xeons), bfloat16 in and out,
 * head_dim 64. Same contract and layouts as prefill_attention in attention.c; it exists because
 * on a CPU with AMX that kernel's VDPBF16PS loops lose to PyTorch's SDPA 2-3x.
 *
 * Per item (one query head h, a block of 16 query rows), over the packed keys in blocks of 64:
 *   S[16 x 64]  = Q[16 x 64] K^T        8 TDPBF16PS into tiles 0-3 (16 keys each), fp32
 *   online softmax of S, row by row     AVX-512 in fp32: running max m (log2 units), sum l;
 *                                       O is rescaled when m grows; P rounded to bfloat16
 *   O[16 x 64] += P[16 x 64] V          8 TDPBF16PS into tiles 0-3 (16 dims each), loaded
 *                                       with O and stored back
 * K is packed so that a 16-key block over 32 dims is one B tile (pack_k's layout), V so that
 * 32 keys over 16 dims is one (pack_v's, rows of key pairs). Tile registers: 0-3 accumulators,
 * 4-5 A operands (Q halves, then P halves), 6-7 B operands; all 16 rows of 64 bytes.
 *
 * Returns 0; -1 for an unsupported shape or a failed allocation; -3 when the kernel may not
 * use AMX here (no permission from Linux for the tile data); -4 when it was built by a compiler
 * without AMX support (amx_built() says 0 then). Nothing is written unless 0.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amx_tiles.h" /* (empty without AMX) */
#include "decode_items.h"
#include "kernels.h"
#include "kv_pack.h"
#include "vec.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)

#define D 64    /* head_dim: the only one this kernel takes */
#define QB 16   /* query rows per item: one tile's rows */
#define KB 64   /* keys per block: four 16-key tiles */
_Static_assert(KB == D, "the accumulator tiles hold S and O alike");
_Static_assert(KB == PACK_KEYS, "a block reads whole padded key blocks");

/* tiles 0-3 hold 16 rows x 64 fp32 columns between them: S (16 queries x 64 keys) or O's
 * update (16 queries x 64 dims); KB == D, so one layout serves both */
static inline void zero_accumulators(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

/* tiles 0-3 += P V: A tiles 4 and 5 hold 16 rows x 32 keys of P each (keys 0-31, 32-63);
 * vp holds the block's 64 keys of V in pairs (pack_v's layout), 16 dims a B tile */
static inline void pv_products(const bf16 *vp) {
#define PV(T)                                                                   \
    _tile_loadd(6, vp + (T) * 16 * 2, D * 2 * sizeof(bf16));                    \
    _tile_dpbf16ps(T, 4, 6);                                                    \
    _tile_loadd(7, vp + (int64_t)16 * D * 2 + (T) * 16 * 2, D * 2 * sizeof(bf16)); \
    _tile_dpbf16ps(T, 5, 7);
    PV(0)
    PV(1)
    PV(2)
    PV(3)
#undef PV
}

static inline void load_accumulators(const float *src) {
    _tile_loadd(0, src + 0, KB * sizeof(float));
    _tile_loadd(1, src + 16, KB * sizeof(float));
    _tile_loadd(2, src + 32, KB * sizeof(float));
    _tile_loadd(3, src + 48, KB * sizeof(float));
}

static inline void store_accumulators(float *dst) {
    _tile_stored(0, dst + 0, KB * sizeof(float));
    _tile_stored(1, dst + 16, KB * sizeof(float));
    _tile_stored(2, dst + 32, KB * sizeof(float));
    _tile_stored(3, dst + 48, KB * sizeof(float));
}

/* One item: query rows q0 .. q0 + rows - 1 of head h (rows <= QB) over packed kp/vp. */
static void attend_block(const bf16 *q, int64_t q_row, int rows, int first_pos, const bf16 *kp,
                         const bf16 *vp, float scale_log2, bf16 *out, int64_t o_row) {
    bf16 qbuf[QB * D] __attribute__((aligned(64)));
    bf16 pbuf[QB * KB] __attribute__((aligned(64)));
    float sbuf[QB * KB] __attribute__((aligned(64)));
    float obuf[QB * D] __attribute__((aligned(64)));
    float m[QB];
    __m512 l[QB]; /* each row's running sum, 16 partial sums (added up once, at the end) */
    for (int i = 0; i < QB; i++) {
        if (i < rows)
            memcpy(qbuf + i * D, q + (int64_t)i * q_row, D * sizeof(bf16));
        else
            memset(qbuf + i * D, 0, D * sizeof(bf16));
        m[i] = -INFINITY;
        l[i] = _mm512_setzero_ps();
    }
    memset(obuf, 0, sizeof(obuf));
    const int visible = first_pos + rows; /* keys the last real row sees */
    const int pairs = D / 2;
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int k0 = 0; k0 < visible; k0 += KB) {
        /* S = Q K^T: B tile = 16 keys x 32 dims (16 rows of dim pairs) */
        const bf16 *kb = kp + (int64_t)(k0 / 16) * pairs * 32;
        _tile_loadd(4, qbuf, D * sizeof(bf16));
        _tile_loadd(5, qbuf + 32, D * sizeof(bf16));
        zero_accumulators();
#define QK(T)                                                   \
    _tile_loadd(6, kb + ((T) * pairs + 0) * 32, 64);            \
    _tile_dpbf16ps(T, 4, 6);                                    \
    _tile_loadd(7, kb + ((T) * pairs + 16) * 32, 64);           \
    _tile_dpbf16ps(T, 5, 7);
        QK(0)
        QK(1)
        QK(2)
        QK(3)
#undef QK
        store_accumulators(sbuf);
        /* online softmax, row by row; P (bf16) into pbuf */
        for (int i = 0; i < QB; i++) {
            const int lim = i < rows ? first_pos + i + 1 - k0 : 0; /* visible keys in block */
            uint32_t *prow = (uint32_t *)(pbuf + i * KB);
            if (lim <= 0) {
                memset(prow, 0, KB * sizeof(bf16));
                continue;
            }
            const int full = lim >= KB;
            __mmask16 mask[4];
            __m512 s[4];
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int c = 0; c < 4; c++) {
                s[c] = _mm512_load_ps(sbuf + i * KB + c * 16);
                mask[c] = full ? 0xFFFF
                               : _mm512_cmplt_epi32_mask(
                                     _mm512_add_epi32(lane, _mm512_set1_epi32(c * 16)),
                                     _mm512_set1_epi32(lim));
                mx = _mm512_mask_max_ps(mx, mask[c], mx, s[c]);
            }
            const float bmax = _mm512_reduce_max_ps(mx) * scale_log2;
            const float m_new = m[i] > bmax ? m[i] : bmax;
            if (m_new > m[i]) {
                const float alpha = exp2f(m[i] - m_new); /* 0 for the first block */
                l[i] = _mm512_mul_ps(l[i], _mm512_set1_ps(alpha));
                const __m512 a = _mm512_set1_ps(alpha);
                for (int c = 0; c < D / 16; c++)
                    _mm512_store_ps(obuf + i * D + c * 16,
                                    _mm512_mul_ps(_mm512_load_ps(obuf + i * D + c * 16), a));
                m[i] = m_new;
            }
            const __m512 neg_m = _mm512_set1_ps(-m_new), sc = _mm512_set1_ps(scale_log2);
            __m512 sum = _mm512_setzero_ps(), p[4];
            for (int c = 0; c < 4; c++) {
                p[c] = exp2_softmax_ps(_mm512_fmadd_ps(s[c], sc, neg_m));
                if (!full) p[c] = _mm512_maskz_mov_ps(mask[c], p[c]);
                sum = _mm512_add_ps(sum, p[c]);
            }
            l[i] = _mm512_add_ps(l[i], sum);
            _mm512_store_si512(prow, (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0]));
            _mm512_store_si512(prow + 16, (__m512i)_mm512_cvtne2ps_pbh(p[3], p[2]));
        }
        /* O += P V: A = 16 rows x 32 keys of P; B = 32 keys (16 pair rows) x 16 dims of V */
        const bf16 *vb = vp + (int64_t)(k0 / 2) * D * 2;
        _tile_loadd(4, pbuf, KB * sizeof(bf16));
        _tile_loadd(5, pbuf + 32, KB * sizeof(bf16));
        /* the tiles accumulate onto O itself (rescaled above where the max grew) */
        load_accumulators(obuf);
        pv_products(vb);
        store_accumulators(obuf);
    }
    for (int i = 0; i < rows; i++) {
        const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(l[i]));
        for (int c = 0; c < D / 16; c++)
            _mm256_storeu_si256((__m256i *)(out + (int64_t)i * o_row + c * 16),
                                (__m256i)_mm512_cvtneps_pbh(
                                    _mm512_mul_ps(_mm512_load_ps(obuf + i * D + c * 16), inv)));
    }
}

/* ---- decode: a request's queries over its pool row ------------------------------------ */

#define DQ 16 /* query rows of a decode item: one tile's columns */

/* 16 x 16 dwords at src (rows `stride` bytes apart) transposed into dst (rows of 64 bytes) */
static inline void transpose_block(const void *src, int stride, void *dst) {
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512((const char *)src + stride * i);
    transpose16(r);
    for (int i = 0; i < 16; i++) _mm512_storeu_si512((char *)dst + 64 * i, r[i]);
}

/* One query row's online-softmax state between passes over its keys: running max m (log2
 * units), running sum l, and the unnormalised weighted sum of values o. */
typedef struct {
    float m, l;
    float o[D];
} dec_state;

static inline void dec_state_init(dec_state *st) {
    st->m = -INFINITY;
    st->l = 0.0f;
    memset(st->o, 0, sizeof(st->o));
}

/* st's output, normalised, as bfloat16 at dst */
static inline void dec_state_store(const dec_state *st, bf16 *dst) {
    const __m512 inv = _mm512_set1_ps(1.0f / st->l);
    for (int c = 0; c < D / 16; c++)
        _mm256_storeu_si256(
            (__m256i *)(dst + c * 16),
            (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(st->o + c * 16), inv)));
}

/* key (or value) j of a row whose keys below `split` come from the shared row's copy */
#define ROW_AT(shared_row, own_row, j) \
    (((j) < split ? (shared_row) : (own_row)) + (int64_t)(j) * D)

/* Query rows qrow[0 .. rows - 1] (rows <= DQ) of one KV head over keys `from` .. `to` - 1
 * (from a multiple of KB), row i seeing keys below lim[i] only; keys below `split` from k0/v0,
 * the rest from k/v. Row i's softmax state st[i] is carried on (dec_state_init before its
 * first pass). Per block of KB keys:
 *   S^T[KB x 16] = K Q^T    8 TDPBF16PS: A = 16 keys x 32 dims read in place, B = Q^T pairs
 *   softmax, query by query in the lanes of each key's scores (online: running max and sum)
 *   O[16 x D] += P V        8 TDPBF16PS: A = P (a transpose of P^T's key pairs), B = V pairs
 * With scores as keys x queries the softmax runs one vector op per key for all 16 queries,
 * and K is read where it lies; P is transposed instead (two 16 x 16 transposes a block), and
 * V paired as pack_v does.
 *
 * Invariant: a row's arithmetic is the same whatever other rows share the pass and however
 * its keys are split between passes at block boundaries: each of its scores, its softmax lane
 * and its output row depend on its own query, keys, limit and state only, so a query's output
 * never depends on the company. */
static void attend_decode_rows(const bf16 *const *qrow, const int *lim, int rows,
                               const bf16 *k0, const bf16 *v0, int split, const bf16 *k,
                               const bf16 *v, int from, int to, float scale_log2,
                               dec_state *const *st) {
    uint32_t qpairs[DQ * D / 2] __attribute__((aligned(64))); /* [query][dim pair] */
    uint32_t qt[D / 2 * DQ] __attribute__((aligned(64)));     /* [dim pair][query]: B tiles */
    bf16 kbuf[16 * D] __attribute__((aligned(64)));           /* a 16-key group gathered */
    bf16 vp[KB * D] __attribute__((aligned(64)));             /* V's key pairs (pack_v) */
    uint32_t wp[KB / 2 * DQ] __attribute__((aligned(64)));    /* P^T's key pairs [pair][q] */
    uint32_t pa[DQ * KB / 2] __attribute__((aligned(64)));    /* P: two A tiles [q][pair] */
    float sbuf[KB * DQ] __attribute__((aligned(64)));         /* S^T, then O's update */
    float obuf[DQ * D] __attribute__((aligned(64)));
    float ms[DQ] __attribute__((aligned(64))), ls[DQ] __attribute__((aligned(64)));
    int lims[DQ];
    for (int i = 0; i < DQ; i++) {
        if (i < rows) {
            memcpy(qpairs + i * D / 2, qrow[i], D * sizeof(bf16));
            memcpy(obuf + i * D, st[i]->o, D * sizeof(float));
            ms[i] = st[i]->m;
            ls[i] = st[i]->l;
        } else { /* padding lanes: zero queries over every key */
            memset(qpairs + i * D / 2, 0, D * sizeof(bf16));
            memset(obuf + i * D, 0, D * sizeof(float));
            ms[i] = -INFINITY;
            ls[i] = 0.0f;
        }
        lims[i] = i < rows ? lim[i] : to;
    }
    transpose_block(qpairs, D * 2, qt);                /* dims 0-31 */
    transpose_block(qpairs + 16, D * 2, qt + 16 * DQ); /* dims 32-63 */
    const __m512i limv = _mm512_loadu_si512(lims);
    int least = to;
    for (int i = 0; i < DQ; i++) least = lims[i] < least ? lims[i] : least;
    __m512 m = _mm512_load_ps(ms), l = _mm512_load_ps(ls);
    const __m512 sc = _mm512_set1_ps(scale_log2);
    const __m512i pair_words = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                                25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19,
                                                3, 18, 2, 17, 1, 16, 0);
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int k0b = from; k0b < to; k0b += KB) {
        const int nk = to - k0b < KB ? to - k0b : KB; /* keys of this block */
        /* S^T = K Q^T, 16 keys per accumulator tile */
        _tile_loadd(6, qt, DQ * 4);
        _tile_loadd(7, qt + 16 * DQ, DQ * 4);
        zero_accumulators();
        for (int t = 0; t < 4 && 16 * t < nk; t++) {
            const int j0 = k0b + 16 * t, cnt = nk - 16 * t < 16 ? nk - 16 * t : 16;
            const bf16 *src;
            if (cnt == 16 && (j0 + 16 <= split || j0 >= split)) {
                src = ROW_AT(k0, k, j0); /* in place: one side of split, all in the row */
            } else {
                for (int u = 0; u < 16; u++) {
                    if (u < cnt)
                        memcpy(kbuf + u * D, ROW_AT(k0, k, j0 + u), D * sizeof(bf16));
                    else
                        memset(kbuf + u * D, 0, D * sizeof(bf16));
                }
                src = kbuf;
            }
            _tile_loadd(4, src, D * sizeof(bf16));
            _tile_loadd(5, src + 32, D * sizeof(bf16));
            switch (t) { /* tile numbers are immediates */
                case 0: _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(0, 5, 7); break;
                case 1: _tile_dpbf16ps(1, 4, 6); _tile_dpbf16ps(1, 5, 7); break;
                case 2: _tile_dpbf16ps(2, 4, 6); _tile_dpbf16ps(2, 5, 7); break;
                default: _tile_dpbf16ps(3, 4, 6); _tile_dpbf16ps(3, 5, 7);
            }
        }
        _tile_stored(0, sbuf, DQ * 4);
        _tile_stored(1, sbuf + 16 * DQ, DQ * 4);
        _tile_stored(2, sbuf + 32 * DQ, DQ * 4);
        _tile_stored(3, sbuf + 48 * DQ, DQ * 4);
        /* the next block's keys and values on their way from memory while this one computes
         * (a hint: past the row's end is harmless) */
        for (int j = k0b + KB; j < k0b + 2 * KB; j++) {
            const bf16 *kj = ROW_AT(k0, k, j), *vj = ROW_AT(v0, v, j);
            _mm_prefetch((const char *)kj, _MM_HINT_T0);
            _mm_prefetch((const char *)(kj + 32), _MM_HINT_T0);
            _mm_prefetch((const char *)vj, _MM_HINT_T0);
            _mm_prefetch((const char *)(vj + 32), _MM_HINT_T0);
        }
        /* the block's max per query, over the keys it sees */
        __m512 bmax = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < nk; j++) {
            const __mmask16 live = k0b + j < least
                                       ? 0xFFFF
                                       : _mm512_cmpgt_epi32_mask(limv,
                                                                 _mm512_set1_epi32(k0b + j));
            bmax = _mm512_mask_max_ps(bmax, live, bmax, _mm512_load_ps(sbuf + j * DQ));
        }
        /* the scale is positive: scaling after the max keeps the order */
        const __m512 m_new = _mm512_max_ps(m, _mm512_mul_ps(bmax, sc));
        /* 0 (2^-126 times nothing summed yet) for the first block, 1 where the max held */
        const __m512 alpha = exp2_ps(_mm512_sub_ps(m, m_new));
        m = m_new;
        const __m512 neg_m = _mm512_sub_ps(_mm512_setzero_ps(), m_new);
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < KB; j += 2) {
            __m512 p[2];
            for (int u = 0; u < 2; u++) {
                const int key = k0b + j + u;
                if (j + u >= nk) {
                    p[u] = _mm512_setzero_ps();
                    continue;
                }
                const __mmask16 live =
                    key < least ? 0xFFFF : _mm512_cmpgt_epi32_mask(limv, _mm512_set1_epi32(key));
                p[u] = _mm512_maskz_mov_ps(
                    live, exp2_softmax_ps(
                              _mm512_fmadd_ps(_mm512_load_ps(sbuf + (j + u) * DQ), sc, neg_m)));
                sum = _mm512_add_ps(sum, p[u]);
            }
            /* lane q: (p[j][q], p[j + 1][q]) as a bfloat16 pair */
            _mm512_store_si512(wp + j / 2 * DQ,
                               _mm512_permutexvar_epi16(
                                   pair_words, (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0])));
        }
        l = _mm512_add_ps(_mm512_mul_ps(l, alpha), sum);
        transpose_block(wp, 64, pa);                     /* keys 0-31: A tile, [q][pair] */
        transpose_block(wp + 16 * DQ, 64, pa + DQ * 16); /* keys 32-63 */
        /* V's key pairs, zero past the block's keys (pack_v's layout) */
        for (int i = 0; i < KB / 2; i++) {
            const int j = k0b + 2 * i;
            bf16 *dst = vp + (int64_t)i * D * 2;
            for (int d = 0; d < D; d += 32) {
                const __m512i x = 2 * i < nk ? _mm512_loadu_si512(ROW_AT(v0, v, j) + d)
                                             : _mm512_setzero_si512();
                const __m512i y = 2 * i + 1 < nk ? _mm512_loadu_si512(ROW_AT(v0, v, j + 1) + d)
                                                 : _mm512_setzero_si512();
                _mm512_store_si512(dst + 2 * d, _mm512_permutex2var_epi16(x, lo, y));
                _mm512_store_si512(dst + 2 * d + 32, _mm512_permutex2var_epi16(x, hi, y));
            }
        }
        /* O's update = P V: A = 16 queries x 32 keys of P; B = 32 keys x 16 dims of V */
        _tile_loadd(4, pa, 64);
        _tile_loadd(5, pa + DQ * 16, 64);
        zero_accumulators();
        pv_products(vp);
        store_accumulators(sbuf); /* [16 queries][D] */
        float a[DQ] __attribute__((aligned(64)));
        _mm512_store_ps(a, alpha);
        for (int i = 0; i < rows; i++) {
            const __m512 ai = _mm512_set1_ps(a[i]);
            for (int c = 0; c < D / 16; c++)
                _mm512_store_ps(obuf + i * D + c * 16,
                                _mm512_add_ps(_mm512_mul_ps(_mm512_load_ps(obuf + i * D + c * 16), ai),
                                              _mm512_load_ps(sbuf + i * D + c * 16)));
        }
    }
    _mm512_store_ps(ms, m);
    _mm512_store_ps(ls, l);
    for (int i = 0; i < rows; i++) {
        st[i]->m = ms[i];
        st[i]->l = ls[i];
        memcpy(st[i]->o, obuf + i * D, D * sizeof(float));
    }
}
#undef ROW_AT

/* Decode attention on the tiles; the same contract as decode_attention (attention.c). Work
 * items are a request's queries over its pool row (decode_items.h), up to 16 (query, head)
 * rows each. Where several rows share a prompt prefix of at least KB keys, a first pass runs
 * its whole blocks for the queries of all rows together, 16 at a time (the prefix is read
 * from row 0, and its scores computed for 16 queries per tile op), and each row's item then
 * carries on from there over its own keys. */
int decode_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                         const bf16 *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, int shared,
                         bf16 *out, int64_t o_row, int64_t o_head, int n, int hq, int hkv,
                         int head_dim, float scale, int n_threads) {
    if (head_dim != D || hkv < 1 || hq % hkv || n <= 0) return -1;
    if (shared < 0) return -2;
    if (!amx_permitted()) return -3;
    decode_items it;
    int longest;
    const int rc = decode_items_build(&it, n, lengths, slots, pool_rows, capacity, shared, hq,
                                      hkv, DQ, n_threads, &longest);
    /* the softmax state of every (query, head) row: [n][hq] */
    dec_state *state = rc ? NULL : malloc(sizeof(dec_state) * (size_t)n * hq);
    if (rc || !state) {
        decode_items_free(&it);
        return rc ? rc : -1;
    }
    if (n == 1) shared = 0; /* nothing to share */
    /* the common prefix's whole blocks, for every query at once (one request: none) */
    const int common = it.groups > 1 ? shared / KB * KB : 0;
    const int group = hq / hkv, per_head = (n * group + DQ - 1) / DQ;
    const int first_items = common ? hkv * per_head : 0;
    const float scale_log2 = scale * 1.4426950408889634f;
    for (int i = 0; i < n * hq; i++) dec_state_init(state + i);
    const int threads = clamp_threads(n_threads, it.items > first_items ? it.items : first_items);
#pragma omp parallel num_threads(threads)
    {
        configure_tiles(); /* tile state is per thread */
        const bf16 *qrow[DQ];
        bf16 *orow[DQ];
        dec_state *st[DQ];
        int lim[DQ];
#pragma omp for schedule(static, 1)
        for (int item = 0; item < first_items; item++) {
            const int g = item / per_head, t0 = item % per_head * DQ;
            const int rows = n * group - t0 < DQ ? n * group - t0 : DQ;
            for (int i = 0; i < rows; i++) {
                const int r = (t0 + i) / group, h = g * group + (t0 + i) % group;
                qrow[i] = q + (int64_t)r * q_row + (int64_t)h * q_head;
                st[i] = state + (int64_t)r * hq + h;
                lim[i] = lengths[r];
            }
            const int64_t head = (int64_t)g * kv_head;
            attend_decode_rows(qrow, lim, rows, k + head, v + head, common, k + head, v + head,
                               0, common, scale_log2, st);
        }
        /* (the loop's barrier: every prefix pass is done before the rows carry on) */
#pragma omp for schedule(static, 1)
        for (int item = 0; item < it.items; item++) {
            int own, g, index[DQ];
            int64_t slot;
            const int rows =
                decode_item_rows(&it, item, q, q_row, q_head, out, o_row, o_head, lengths,
                                 slots, qrow, orow, lim, index, &slot, &g, &own);
            for (int i = 0; i < rows; i++) st[i] = state + index[i];
            const int64_t head = (int64_t)g * kv_head;
            attend_decode_rows(qrow, lim, rows, k + head, v + head, shared,
                               k + slot * kv_slot + head, v + slot * kv_slot + head, common,
                               own, scale_log2, st);
            for (int i = 0; i < rows; i++) dec_state_store(st[i], orow[i]);
        }
        _tile_release();
    }
    decode_items_free(&it);
    free(state);
    return 0;
}

int amx_built(void) { return 1; }

int prefill_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                          const bf16 *v, int64_t kv_head, bf16 *out, int64_t o_row,
                          int64_t o_head, int n_q, int q_start, int hq, int hkv, int head_dim,
                          float scale, int n_threads) {
    if (head_dim != D || hkv < 1 || hq % hkv || n_q <= 0 || q_start < 0) return -1;
    if (!amx_permitted()) return -3;
    const int group = hq / hkv, n_keys = q_start + n_q;
    int64_t packed;
    bf16 *buf = alloc_packed(n_keys, D, hkv, &packed);
    if (!buf) return -1;
    bf16 *kp = buf, *vp = buf + packed * hkv;
    const float scale_log2 = scale * 1.4426950408889634f;
    const int blocks = (n_q + QB - 1) / QB, items = blocks * hq;
#pragma omp parallel num_threads(clamp_threads(n_threads, items))
    {
        pack_heads(k, v, kv_head, hkv, n_keys, D, kp, vp, packed);
        configure_tiles(); /* tile state is per thread */
        /* round-robin items: later blocks see more keys, so this balances the threads */
#pragma omp for schedule(static, 1)
        for (int item = 0; item < items; item++) {
            const int h = item % hq, r0 = item / hq * QB;
            const int rows = n_q - r0 < QB ? n_q - r0 : QB;
            attend_block(q + (int64_t)r0 * q_row + (int64_t)h * q_head, q_row, rows,
                         q_start + r0, kp + (h / group) * packed, vp + (h / group) * packed,
                         scale_log2, out + (int64_t)r0 * o_row + (int64_t)h * o_head, o_row);
        }
        _tile_release();
    }
    free(buf);
    return 0;
}

#else /* a compiler without AMX: the entry points exist, and refuse */

int decode_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                         const bf16 *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, int shared,
                         bf16 *out, int64_t o_row, int64_t o_head, int n, int hq, int hkv,
                         int head_dim, float scale, int n_threads) {
    return -4;
}

int amx_built(void) { return 0; }

int prefill_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                          const bf16 *v, int64_t kv_head, bf16 *out, int64_t o_row,
                          int64_t o_head, int n_q, int q_start, int hq, int hkv, int head_dim,
                          float scale, int n_threads) {
    return -4;
}

#endif

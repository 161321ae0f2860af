/* Causal prefill attention on AMX tiles (Sapphire Rapids and later Xeons), bfloat16 in and out,
 * head_dim 64. Same contract and layouts as prefill_attention in attention.c; it exists because
 * on a CPU with AMX that kernel's VDPBF16PS loops lose to PyTorch's SDPA 2-3x.
 *
 * Per item (one query head h, a block of 16 query rows), over the packed keys in blocks of 64:
 *   S[16 x 64]  = Q[16 x 64] K^T        8 TDPBF16PS into tiles 0-3 (16 keys each), fp32
 *   online softmax of S, row by row     AVX-512 in fp32: running max m (log2 units), sum l;
 *                                       O is rescaled when m grows; P rounded to bfloat16
 *   O[16 x 64] += P[16 x 64] V          8 TDPBF16PS into tiles 0-3 (16 dims each), added to O
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
#include <sys/syscall.h>
#include <unistd.h>

#include "kv_pack.h"
#include "vec.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define D 64    /* head_dim: the only one this kernel takes */
#define QB 16   /* query rows per item: one tile's rows */
#define KB 64   /* keys per block: four 16-key tiles */
_Static_assert(KB == D, "the accumulator tiles hold S and O alike");
_Static_assert(KB == PACK_KEYS, "a block reads whole padded key blocks");

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) tile_config;

/* Linux hands out the AMX tile state per process on request (once; racing callers agree) */
static int amx_permitted(void) {
    static volatile int state = 0; /* 0 unknown, 1 yes, -1 no */
    if (state == 0)
        state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
    return state == 1;
}

static void configure_tiles(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}

/* tiles 0-3 hold 16 rows x 64 fp32 columns between them: S (16 queries x 64 keys) or O's
 * update (16 queries x 64 dims); KB == D, so one layout serves both */
static inline void zero_accumulators(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
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
    float m[QB], l[QB];
    for (int i = 0; i < QB; i++) {
        if (i < rows)
            memcpy(qbuf + i * D, q + (int64_t)i * q_row, D * sizeof(bf16));
        else
            memset(qbuf + i * D, 0, D * sizeof(bf16));
        m[i] = -INFINITY;
        l[i] = 0.0f;
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
                l[i] *= alpha;
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
            l[i] += _mm512_reduce_add_ps(sum);
            _mm512_store_si512(prow, (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0]));
            _mm512_store_si512(prow + 16, (__m512i)_mm512_cvtne2ps_pbh(p[3], p[2]));
        }
        /* O += P V: A = 16 rows x 32 keys of P; B = 32 keys (16 pair rows) x 16 dims of V */
        const bf16 *vb = vp + (int64_t)(k0 / 2) * D * 2;
        _tile_loadd(4, pbuf, KB * sizeof(bf16));
        _tile_loadd(5, pbuf + 32, KB * sizeof(bf16));
        zero_accumulators();
#define PV(T)                                                                   \
    _tile_loadd(6, vb + (T) * 16 * 2, D * 2 * sizeof(bf16));                    \
    _tile_dpbf16ps(T, 4, 6);                                                    \
    _tile_loadd(7, vb + (int64_t)16 * D * 2 + (T) * 16 * 2, D * 2 * sizeof(bf16)); \
    _tile_dpbf16ps(T, 5, 7);
        PV(0)
        PV(1)
        PV(2)
        PV(3)
#undef PV
        store_accumulators(sbuf);
        for (int i = 0; i < rows; i++)
            for (int c = 0; c < D / 16; c++)
                _mm512_store_ps(obuf + i * D + c * 16,
                                _mm512_add_ps(_mm512_load_ps(obuf + i * D + c * 16),
                                              _mm512_load_ps(sbuf + i * D + c * 16)));
    }
    for (int i = 0; i < rows; i++) {
        const __m512 inv = _mm512_set1_ps(1.0f / l[i]);
        for (int c = 0; c < D / 16; c++)
            _mm256_storeu_si256((__m256i *)(out + (int64_t)i * o_row + c * 16),
                                (__m256i)_mm512_cvtneps_pbh(
                                    _mm512_mul_ps(_mm512_load_ps(obuf + i * D + c * 16), inv)));
    }
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

int amx_built(void) { return 0; }

int prefill_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                          const bf16 *v, int64_t kv_head, bf16 *out, int64_t o_row,
                          int64_t o_head, int n_q, int q_start, int hq, int hkv, int head_dim,
                          float scale, int n_threads) {
    return -4;
}

#endif

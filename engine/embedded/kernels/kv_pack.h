/* K and V repacked into the pair-interleaved ("VNNI") layouts that VDPBF16PS and AMX's
 * TDPBF16PS read, zero-padded to whole key blocks, and the work split; shared by the attention
 * kernels. */
#ifndef APPLIANCE_KERNELS_KV_PACK_H
#define APPLIANCE_KERNELS_KV_PACK_H

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

#define PACK_KEYS 64 /* packed K/V are zero-padded to whole blocks of this many keys */

static inline int64_t padded_keys(int n_keys) {
    return (n_keys + PACK_KEYS - 1) / PACK_KEYS * PACK_KEYS;
}

/* One buffer for every KV head's packed K, then every head's packed V: *packed elements per
 * head (n_keys padded, times D). NULL when out of memory; the caller frees it. */
static inline bf16 *alloc_packed(int n_keys, int D, int hkv, int64_t *packed) {
    *packed = padded_keys(n_keys) * D;
    return aligned_alloc(64, (size_t)*packed * hkv * 2 * sizeof(bf16));
}

/* threads for `items` independent work items: at least 1, at most one per item */
static inline int clamp_threads(int n_threads, int items) {
    if (n_threads > items) n_threads = items;
    return n_threads < 1 ? 1 : n_threads;
}

/* K[j, d] -> kp[(block16(j) * (D/2) + d/2) * 32 + (j % 16) * 2 + d % 2]: per 16 keys and 16
 * dim pairs, a 16 x 16 transpose of 32-bit pairs (D a multiple of 32); keys past n_keys 0 */
static inline void pack_k(const bf16 *k, int n_keys, int n_pad, int D, bf16 *kp) {
    const int pairs = D / 2;
    for (int j0 = 0; j0 < n_pad; j0 += 16) {
        uint32_t *dst = (uint32_t *)kp + (int64_t)(j0 / 16) * pairs * 16;
        for (int p0 = 0; p0 < pairs; p0 += 16) {
            __m512i r[16];
            for (int t = 0; t < 16; t++)
                r[t] = j0 + t < n_keys ? _mm512_loadu_si512(k + (int64_t)(j0 + t) * D + 2 * p0)
                                       : _mm512_setzero_si512();
            transpose16(r);
            for (int t = 0; t < 16; t++) _mm512_storeu_si512(dst + (p0 + t) * 16, r[t]);
        }
    }
}

/* V[j, d] -> vp[((j/2) * D + d) * 2 + j % 2]: rows 2i and 2i + 1 interleaved element by
 * element, 32 columns of both rows at a time (two word permutes); the pad rows are zero */
static inline void pack_v(const bf16 *v, int n_keys, int n_pad, int D, bf16 *vp) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const int pairs = (n_keys + 1) / 2;
    for (int i = 0; i < pairs; i++) {
        const bf16 *a = v + (int64_t)(2 * i) * D;
        const int has_b = 2 * i + 1 < n_keys;
        bf16 *dst = vp + (int64_t)i * D * 2;
        for (int d = 0; d < D; d += 32) {
            const __m512i x = _mm512_loadu_si512(a + d);
            const __m512i y = has_b ? _mm512_loadu_si512(a + D + d) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + 2 * d, _mm512_permutex2var_epi16(x, lo, y));
            _mm512_storeu_si512(dst + 2 * d + 32, _mm512_permutex2var_epi16(x, hi, y));
        }
    }
    memset(vp + (int64_t)pairs * D * 2, 0, (size_t)(n_pad / 2 - pairs) * D * 2 * sizeof(bf16));
}

/* K and V of every KV head (head g at k/v + g * kv_head) packed into kp/vp (head g at
 * + g * packed, n_keys padded each), the heads shared among the threads of the calling
 * parallel region: an orphaned worksharing loop, called from inside `omp parallel` */
static inline void pack_heads(const bf16 *k, const bf16 *v, int64_t kv_head, int hkv,
                              int n_keys, int D, bf16 *kp, bf16 *vp, int64_t packed) {
    const int n_pad = (int)padded_keys(n_keys);
#pragma omp for schedule(static, 1)
    for (int g = 0; g < 2 * hkv; g++) {
        if (g < hkv)
            pack_k(k + g * kv_head, n_keys, n_pad, D, kp + g * packed);
        else
            pack_v(v + (g - hkv) * kv_head, n_keys, n_pad, D, vp + (g - hkv) * packed);
    }
}

#endif

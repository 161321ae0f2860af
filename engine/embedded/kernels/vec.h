/* Vector helpers shared by the kernels (AVX-512 with BF16). */
#ifndef APPLIANCE_KERNELS_VEC_H
#define APPLIANCE_KERNELS_VEC_H

#include <immintrin.h>
#include <stdint.h>

typedef uint16_t bf16;

/* 2^x = 2^n * 2^f, n = round(x), |f| <= 1/2; degree-6 Taylor series of 2^f (error < 2e-7).
 * x is clamped to [-126, 126]: callers mask what must be exactly 0. */
static inline __m512 exp2_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(126.0f));
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

/* 2^x for the softmax of attention, where x = score - running max is finite: no clamping
 * (scalef gives 0 far below and inf far above, and lanes past a row's keys are masked to 0
 * after), and a degree-4 fit of 2^f on [-1/2, 1/2] (relative error < 3e-6, far below the
 * bfloat16 rounding the probabilities then get: 2^-9). Five fewer operations than exp2_ps. */
static inline __m512 exp2_softmax_ps(__m512 x) {
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(9.56051984e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.59171229e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.40249817e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.93121958e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.99999190e-1f));
    return _mm512_scalef_ps(p, n);
}

/* 16 bfloat16 values to fp32, and back with round-to-nearest-even */
static inline __m512 load_bf16(const bf16 *p) {
    return _mm512_cvtpbh_ps((__m256bh)_mm256_loadu_si256((const __m256i *)p));
}

static inline void store_bf16(bf16 *p, __m512 v) {
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(v));
}

/* a 16 x 16 matrix of 32-bit elements, transposed in registers (row i becomes column i) */
static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xDD);
    }
}

#endif

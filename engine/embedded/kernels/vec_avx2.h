/* Vector helpers shared by the float32 kernels (AVX2 and FMA). */
#ifndef APPLIANCE_KERNELS_VEC_AVX2_H
#define APPLIANCE_KERNELS_VEC_AVX2_H

#include <immintrin.h>

/* 2^t for t <= 0 as 2^n 2^f, n = round(t), |f| <= 1/2, with a degree-6 series for 2^f
 * (relative error < 2e-7); t is clamped at -126 (callers mask what must be exactly 0) */
static inline __m256 exp2_neg_ps(__m256 t) {
    t = _mm256_max_ps(t, _mm256_set1_ps(-126.0f));
    const __m256 nf = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(t, nf);
    __m256 p = _mm256_set1_ps(1.5403530e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504109e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022651e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf),
                                                            _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
}

/* e^x for x <= 0 (scores less their maximum): 2^(x log2 e) as 2^n 2^f, |f| <= 1/2, with a
 * degree-6 series for 2^f (relative error < 2e-7); below -87 it is 0 */
/* 2^t for any t: clamped to [-126, 126] first (callers mask what must be exactly 0) */
static inline __m256 exp2_ps(__m256 t) {
    return exp2_neg_ps(_mm256_min_ps(t, _mm256_set1_ps(126.0f)));
}

static inline __m256 exp_neg_ps(__m256 x) {
    const __m256 t = _mm256_mul_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)),
                                   _mm256_set1_ps(1.44269504f));
    /* t >= -125.6: exp2_neg_ps's clamp leaves it as it is */
    return _mm256_and_ps(exp2_neg_ps(t), _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GT_OQ));
}

static inline float hsum(__m256 x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif

/* The float32 engine's pointwise work, AVX2 (where the AVX-512 kernels do not load): residual
 * add + RMSNorm, SiLU-gate and rotary embedding. PyTorch's rms_norm ran as several ops, about
 * 34 microseconds a call for a single decode row on a 2-vCPU AMD EPYC without AVX-512: 61
 * calls, 2.1 of a decode step's 20 ms. For a 1,550-token prompt there, SiLU-gate and rotary
 * in PyTorch took about 105 and 55 ms of the step (silu, mul; cat, neg, addcmul).
 *
 * add_rms_norm_f32: h += delta (when delta is not NULL), then
 *   x = h * (1 / sqrt(mean(h^2) + eps)) * w    (LlamaRMSNorm in float32)
 * h, delta, x: [n, dim] with row strides h_row, d_row, x_row; w: [dim]; dim a multiple of 8.
 * A row's sum of squares runs in 8 lanes in column order, then the lanes in a fixed order, so
 * a row's result does not depend on the rows beside it. Rows are split across OpenMP threads
 * when there are enough of them. Returns 0, or -1 for a bad shape (nothing written then).
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "kernels_avx2.h"
#include "vec_avx2.h"

#define PARALLEL_ROWS 64 /* fewer rows than this run on the calling thread */

int add_rms_norm_f32(float *h, int64_t h_row, const float *delta, int64_t d_row, const float *w,
                     float *x, int64_t x_row, int n, int dim, float eps, int n_threads) {
    if (dim % 8 || dim <= 0 || n <= 0) return -1;
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        float *hr = h + (int64_t)r * h_row;
        __m256 ss = _mm256_setzero_ps();
        for (int c = 0; c < dim; c += 8) {
            __m256 v = _mm256_loadu_ps(hr + c);
            if (delta) {
                v = _mm256_add_ps(v, _mm256_loadu_ps(delta + (int64_t)r * d_row + c));
                _mm256_storeu_ps(hr + c, v);
            }
            ss = _mm256_fmadd_ps(v, v, ss);
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, ss);
        const float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                          ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        const __m256 inv = _mm256_set1_ps(1.0f / sqrtf(sum / (float)dim + eps));
        float *xr = x + (int64_t)r * x_row;
        for (int c = 0; c < dim; c += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(hr + c), inv);
            _mm256_storeu_ps(xr + c, _mm256_mul_ps(v, _mm256_loadu_ps(w + c)));
        }
    }
    return 0;
}

/* silu_mul_f32: y = silu(gate) * up, gate_up: [n, 2 * half] (row stride g_row; gate then up),
 * y: [n, half] (row stride y_row); half a multiple of 8. silu(g) = g / (1 + e^-g). Returns 0,
 * or -1 for a bad shape. */
int silu_mul_f32(const float *gate_up, int64_t g_row, float *y, int64_t y_row, int n, int half,
                 int n_threads) {
    if (half % 8 || half <= 0 || n <= 0) return -1;
    const __m256 minus_log2e = _mm256_set1_ps(-1.4426950408889634f), one = _mm256_set1_ps(1.0f);
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        const float *g = gate_up + (int64_t)r * g_row, *u = g + half;
        float *yr = y + (int64_t)r * y_row;
        for (int c = 0; c < half; c += 8) {
            const __m256 gv = _mm256_loadu_ps(g + c);
            const __m256 e = exp2_ps(_mm256_mul_ps(gv, minus_log2e));
            const __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, e));
            _mm256_storeu_ps(yr + c, _mm256_mul_ps(s, _mm256_loadu_ps(u + c)));
        }
    }
    return 0;
}

/* rope_inplace_f32: rotary embedding in place over the q and k heads of each row (rotate-half
 * form, as Llama):
 *   x[d]        <- x[d] * cos[d]        - x[d + half] * sin[d]
 *   x[d + half] <- x[d + half] * cos[d + half] + x[d] * sin[d + half]
 * x: [n, heads, dim] (row stride x_row, heads contiguous at dim apart); cos/sin: [n, dim] (row
 * stride cs_row); dim a multiple of 16. Returns 0, or -1 for a bad shape. */
int rope_inplace_f32(float *x, int64_t x_row, const float *cos, const float *sin, int64_t cs_row,
                     int n, int heads, int dim, int n_threads) {
    const int half = dim / 2;
    if (dim % 16 || dim <= 0 || n <= 0 || heads <= 0) return -1;
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        const float *c = cos + (int64_t)r * cs_row, *s = sin + (int64_t)r * cs_row;
        for (int h = 0; h < heads; h++) {
            float *v = x + (int64_t)r * x_row + (int64_t)h * dim;
            for (int d = 0; d < half; d += 8) {
                const __m256 x1 = _mm256_loadu_ps(v + d), x2 = _mm256_loadu_ps(v + d + half);
                const __m256 lo = _mm256_fnmadd_ps(x2, _mm256_loadu_ps(s + d),
                                                   _mm256_mul_ps(x1, _mm256_loadu_ps(c + d)));
                const __m256 hi = _mm256_fmadd_ps(x1, _mm256_loadu_ps(s + d + half),
                                                  _mm256_mul_ps(x2, _mm256_loadu_ps(c + d + half)));
                _mm256_storeu_ps(v + d, lo);
                _mm256_storeu_ps(v + d + half, hi);
            }
        }
    }
    return 0;
}

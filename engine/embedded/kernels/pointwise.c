/* Row-wise pointwise ops of the fused Llama runner, bfloat16 in and out, AVX-512 (BF16).
 *
 * PyTorch runs each of these as several ops (RMSNorm: a float32 copy, pow, mean, rsqrt, two
 * multiplies; SiLU-gate: silu, then a multiply), each a pass over memory plus dispatch: about
 * 50 microseconds a call for a single decode row, and 4-6% of a long prefill. Here each is one
 * pass, with the same roundings as transformers' modules:
 *   add_rms_norm: h += delta (rounded to bf16, as `h = h + delta`), then
 *                 x = bf16(bf16(h * rsqrt(mean(h^2) + eps)) * w)   (LlamaRMSNorm)
 *   silu_mul:     y = bf16(bf16(silu(gate)) * up), gate and up the halves of each row
 *   rope_inplace: rotary embedding of q and k heads, in place
 * Rows are split across OpenMP threads (PyTorch's own team) when there are enough of them.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "kernels.h" /* its own prototypes, checked against the definitions */
#include "vec.h"

#define PARALLEL_ROWS 64 /* fewer rows than this run on the calling thread */

/* round to bf16 and back: the value a bf16 tensor would hold */
static inline __m512 round_bf16(__m512 v) { return _mm512_cvtpbh_ps(_mm512_cvtneps_pbh(v)); }

/* h: [n, dim] (row stride h_row), delta: [n, dim] (row stride d_row) or NULL, w: [dim],
 * x: [n, dim] (row stride x_row). dim a multiple of 16. Returns 0, or -1 for a bad shape. */
int add_rms_norm(bf16 *h, int64_t h_row, const bf16 *delta, int64_t d_row, const bf16 *w,
                 bf16 *x, int64_t x_row, int n, int dim, float eps, int n_threads) {
    if (dim % 16 || dim <= 0 || n <= 0) return -1;
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        bf16 *hr = h + (int64_t)r * h_row;
        __m512 ss = _mm512_setzero_ps();
        for (int c = 0; c < dim; c += 16) {
            __m512 v = load_bf16(hr + c);
            if (delta) {
                v = round_bf16(_mm512_add_ps(v, load_bf16(delta + (int64_t)r * d_row + c)));
                store_bf16(hr + c, v);
            }
            ss = _mm512_fmadd_ps(v, v, ss);
        }
        const __m512 scale = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(ss) / dim + eps));
        bf16 *xr = x + (int64_t)r * x_row;
        for (int c = 0; c < dim; c += 16) {
            __m512 v = round_bf16(_mm512_mul_ps(load_bf16(hr + c), scale));
            store_bf16(xr + c, _mm512_mul_ps(v, load_bf16(w + c)));
        }
    }
    return 0;
}

/* gate_up: [n, 2 * half] (row stride g_row; gate then up), y: [n, half] (row stride y_row).
 * half a multiple of 16. Returns 0, or -1 for a bad shape. */
int silu_mul(const bf16 *gate_up, int64_t g_row, bf16 *y, int64_t y_row, int n, int half,
             int n_threads) {
    if (half % 16 || half <= 0 || n <= 0) return -1;
    const __m512 minus_log2e = _mm512_set1_ps(-1.4426950408889634f);
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        const bf16 *g = gate_up + (int64_t)r * g_row, *u = g + half;
        bf16 *yr = y + (int64_t)r * y_row;
        for (int c = 0; c < half; c += 16) {
            const __m512 gv = load_bf16(g + c);
            /* silu(g) = g / (1 + e^-g), computed in fp32 and rounded as F.silu's output is */
            const __m512 e = exp2_ps(_mm512_mul_ps(gv, minus_log2e));
            const __m512 s = round_bf16(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
            store_bf16(yr + c, _mm512_mul_ps(s, load_bf16(u + c)));
        }
    }
    return 0;
}

/* Rotary embedding in place over the q and k heads of each row (rotate-half form, as Llama):
 *   x[d]        <- x[d] * cos[d]        - x[d + half] * sin[d]
 *   x[d + half] <- x[d + half] * cos[d + half] + x[d] * sin[d + half]
 * computed in fp32 with one rounding to bf16. x: [n, heads, dim] (row stride x_row, heads
 * contiguous at dim apart); cos/sin: [n, dim] (row stride cs_row). dim/2 a multiple of 16. */
int rope_inplace(bf16 *x, int64_t x_row, const bf16 *cos, const bf16 *sin, int64_t cs_row,
                 int n, int heads, int dim, int n_threads) {
    const int half = dim / 2;
    if (dim % 32 || n <= 0 || heads <= 0) return -1;
#pragma omp parallel for num_threads(n_threads) if (n >= PARALLEL_ROWS) schedule(static)
    for (int r = 0; r < n; r++) {
        const bf16 *c = cos + (int64_t)r * cs_row, *s = sin + (int64_t)r * cs_row;
        for (int h = 0; h < heads; h++) {
            bf16 *v = x + (int64_t)r * x_row + (int64_t)h * dim;
            for (int d = 0; d < half; d += 16) {
                const __m512 x1 = load_bf16(v + d), x2 = load_bf16(v + d + half);
                const __m512 lo = _mm512_fnmadd_ps(x2, load_bf16(s + d),
                                                   _mm512_mul_ps(x1, load_bf16(c + d)));
                const __m512 hi = _mm512_fmadd_ps(x1, load_bf16(s + d + half),
                                                  _mm512_mul_ps(x2, load_bf16(c + d + half)));
                store_bf16(v + d, lo);
                store_bf16(v + d + half, hi);
            }
        }
    }
    return 0;
}

/* Products of float32 rows with a bfloat16 weight matrix: the engine's linears on CPUs with
 * AVX2 and FMA but no AVX-512 BF16, where the engine runs in float32.
 *
 * The weights stay in gemv_pack's panels (gemv_pack.h), so a decode step reads half the bytes
 * a float32 weight takes. A bfloat16 is the top half of a float32, and each 32-bit lane of a
 * panel line holds one output's k pair (even k low, odd k high): a shift left by 16 gives the
 * even weight as a float32 and a mask of the low half the odd one, both exactly. Only weights
 * that bfloat16 holds exactly are packed (gemv_f32.py checks), so every product is the
 * float32 model's own.
 *
 * gemv_f32_bf16: y[m, i] = sum_j x[m, j] W[i, j] in float32 for m < rows. Every output is one
 * chain of fused multiply-adds over j = 0, 1, 2, ... on every path, so a row's result does not
 * depend on how many rows share the call. Each thread takes blocks of 32 outputs:
 * - up to NARROW_MAX rows (decode steps): passes of up to ROWS rows over the block, the first
 *   streaming it from memory, the others reading it from cache;
 * - more rows (prompts): per KC k, each half of the block widened once into float32, then
 *   WIDE_ROWS rows at a time against it (2 loads and WIDE_ROWS broadcasts for 2 x WIDE_ROWS
 *   multiply-adds, the register tile of a float32 GEMM); y carries each chain from one KC
 *   chunk to the next, exactly. The rows go in passes of X_BYTES of x, each pass over all of a
 *   thread's blocks, so x is read from L2 rather than L3 (a 1,550-row prompt's x is 3.5 MB at
 *   k = 576; per pass, the blocks' weights are widened again, a few % of the multiplies). On
 *   a 2-vCPU EPYC (Zen 3), SmolLM2's four layer shapes at 512 and 1,550 rows: 105.9 -> 96.7 ms
 *   in all (F.linear: 91.7).
 *   SmolLM2-135M's 30 layers' linears plus its head, 2 threads of a 2-vCPU AMD EPYC without
 *   AVX-512 (no CPU was idle for this, so ratios only), against oneDNN's prepacked float32
 *   GEMM: 0.43x its time for 1 row, 0.45x for 3, 0.56x for 8, 0.79x for 16, 0.92x for 128,
 *   1.00x for 512 rows (and against F.linear: 0.29x for 1 row, 0.97x for 512).
 *
 * Layouts: x[m, j] at x + m * x_row + j; y[m, i] at y + m * y_row + i (both contiguous in
 * their last dimension). Returns 0, or -1 for a shape it does not take (n a multiple of 32,
 * k even and positive, rows >= 1); nothing is written then.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

#include "gemv_pack.h"
#include "kernels_avx2.h"

#define BLOCK GEMV_BLOCK
#define ROWS 3        /* rows per narrow pass: 12 accumulators of 8 outputs */
#define NARROW_MAX 8  /* more rows than this take the prompt path */
#define WIDE_ROWS 6   /* rows per prompt pass over half a block: 12 accumulators */
#define KC 256        /* k per widened chunk of a half block: 16 KB of float32 */
#define X_BYTES (192 * 1024) /* prompt rows per pass: this much of x, kept in L2 for every block */

/* rows R (a compile-time constant, up to ROWS) of x against the block at a: pair p's line of
 * 32 outputs at a + 64p, as four vectors of 8 outputs' pairs */
static inline __attribute__((always_inline)) void block_rows(const float *x, int64_t x_row,
                                                             const int R, const bf16 *a,
                                                             int pairs, float *y,
                                                             int64_t y_row) {
    __m256 acc[ROWS][4];
    const __m256i high = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int m = 0; m < R; m++)
        for (int j = 0; j < 4; j++) acc[m][j] = _mm256_setzero_ps();
    for (int p = 0; p < pairs; p++) {
        const bf16 *line = a + (int64_t)p * 2 * BLOCK;
        __m256 x0[ROWS], x1[ROWS];
        for (int m = 0; m < R; m++) {
            x0[m] = _mm256_broadcast_ss(x + m * x_row + 2 * p);
            x1[m] = _mm256_broadcast_ss(x + m * x_row + 2 * p + 1);
        }
        for (int j = 0; j < 4; j++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(line + 16 * j));
            const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(w, high));
            for (int m = 0; m < R; m++) {
                acc[m][j] = _mm256_fmadd_ps(x0[m], even, acc[m][j]);
                acc[m][j] = _mm256_fmadd_ps(x1[m], odd, acc[m][j]);
            }
        }
    }
    for (int m = 0; m < R; m++)
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(y + m * y_row + 8 * j, acc[m][j]);
}

/* The prompt path: one half of a block (16 outputs) over KC k at a time, converted once into
 * float32 at s[kk * 16 + i], then R rows (up to WIDE_ROWS) against it: 2 loads and R
 * broadcasts per k for 2R fused multiply-adds. Each output's chain is the one block_rows
 * computes (k ascending; y carries it from one chunk to the next, exactly), so a row's result
 * does not depend on which path its step took. */
static inline __attribute__((always_inline)) void wide_rows(const float *x, int64_t x_row,
                                                            const int R, const float *s,
                                                            int kc, int first, float *y,
                                                            int64_t y_row) {
    __m256 acc[WIDE_ROWS][2];
    _Pragma("GCC unroll 8") for (int m = 0; m < R; m++) {
        acc[m][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + m * y_row);
        acc[m][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + m * y_row + 8);
    }
    for (int kk = 0; kk < kc; kk++) {
        const __m256 w0 = _mm256_loadu_ps(s + kk * 16), w1 = _mm256_loadu_ps(s + kk * 16 + 8);
        _Pragma("GCC unroll 8") for (int m = 0; m < R; m++) {
            const __m256 b = _mm256_broadcast_ss(x + m * x_row + kk);
            acc[m][0] = _mm256_fmadd_ps(b, w0, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(b, w1, acc[m][1]);
        }
    }
    _Pragma("GCC unroll 8") for (int m = 0; m < R; m++) {
        _mm256_storeu_ps(y + m * y_row, acc[m][0]);
        _mm256_storeu_ps(y + m * y_row + 8, acc[m][1]);
    }
}

/* half h of the block's pairs p0 .. p0 + kc / 2 - 1 as float32 rows of 16 outputs */
static void widen(const bf16 *a, int h, int p0, int kc, float *s) {
    const __m256i high = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int q = 0; q < kc / 2; q++) {
        const bf16 *line = a + (int64_t)(p0 + q) * 2 * BLOCK + 2 * 16 * h;
        for (int j = 0; j < 2; j++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(line + 16 * j));
            _mm256_storeu_ps(s + 2 * q * 16 + 8 * j,
                             _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
            _mm256_storeu_ps(s + (2 * q + 1) * 16 + 8 * j,
                             _mm256_castsi256_ps(_mm256_and_si256(w, high)));
        }
    }
}

static void wide_any(const float *x, int64_t x_row, int rows, const bf16 *a, int pairs,
                     float *y, int64_t y_row) {
    float s[KC * 16] __attribute__((aligned(32)));
    for (int p0 = 0; p0 < pairs; p0 += KC / 2) {
        const int kc = 2 * (pairs - p0 < KC / 2 ? pairs - p0 : KC / 2);
        for (int h = 0; h < 2; h++) {
            widen(a, h, p0, kc, s);
            for (int m0 = 0; m0 < rows; m0 += WIDE_ROWS) {
                const float *xm = x + m0 * x_row + 2 * p0;
                float *ym = y + m0 * y_row + 16 * h;
                switch (rows - m0 < WIDE_ROWS ? rows - m0 : WIDE_ROWS) {
#define WIDE_CASE(R)                                           \
    case R:                                                    \
        wide_rows(xm, x_row, R, s, kc, p0 == 0, ym, y_row);    \
        break;
                    WIDE_CASE(1)
                    WIDE_CASE(2)
                    WIDE_CASE(3)
                    WIDE_CASE(4)
                    WIDE_CASE(5)
                    default:
                        wide_rows(xm, x_row, WIDE_ROWS, s, kc, p0 == 0, ym, y_row);
#undef WIDE_CASE
                }
            }
        }
    }
}

static void block_any(const float *x, int64_t x_row, int rows, const bf16 *a, int pairs,
                      float *y, int64_t y_row) {
    if (rows > NARROW_MAX) {
        wide_any(x, x_row, rows, a, pairs, y, y_row);
        return;
    }
    /* passes of up to ROWS rows over the block (the first one reads it from memory) */
    for (int m0 = 0; m0 < rows; m0 += ROWS) {
        const float *xm = x + m0 * x_row;
        float *ym = y + m0 * y_row;
        const int r = rows - m0 < ROWS ? rows - m0 : ROWS;
        if (r == 1)
            block_rows(xm, x_row, 1, a, pairs, ym, y_row);
        else if (r == 2)
            block_rows(xm, x_row, 2, a, pairs, ym, y_row);
        else
            block_rows(xm, x_row, ROWS, a, pairs, ym, y_row);
    }
}

int gemv_f32_bf16(const float *x, int64_t x_row, int rows, const bf16 *wp, int n, int k,
                  float *y, int64_t y_row, int n_threads) {
    if (n <= 0 || n % BLOCK || k <= 0 || k % 2 || rows < 1) return -1;
    const int pairs = k / 2, blocks = n / BLOCK;
    const int64_t block = (int64_t)pairs * 2 * BLOCK; /* elements of one block */
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > blocks) threads = blocks;
    if (rows <= NARROW_MAX) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int blk = 0; blk < blocks; blk++)
            block_any(x, x_row, rows, wp + blk * block, pairs, y + blk * BLOCK, y_row);
        return 0;
    }
    /* prompts: a pass of `chunk` rows runs every block of the thread while its rows of x stay
     * in cache (each block then widened once per pass) */
    int chunk = (int)(X_BYTES / ((int64_t)k * sizeof(float))) / WIDE_ROWS * WIDE_ROWS;
    if (chunk < 4 * WIDE_ROWS) chunk = 4 * WIDE_ROWS;
#pragma omp parallel num_threads(threads)
    for (int m0 = 0; m0 < rows; m0 += chunk) {
        const int r = rows - m0 < chunk ? rows - m0 : chunk;
#pragma omp for schedule(static) nowait
        for (int blk = 0; blk < blocks; blk++)
            wide_any(x + m0 * x_row, x_row, r, wp + blk * block, pairs,
                     y + m0 * y_row + blk * BLOCK, y_row);
    }
    return 0;
}

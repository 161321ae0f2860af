/* Products of a few bfloat16 rows with a weight matrix: the linears of a decode step.
 *
 * A decode step multiplies a handful of token rows (the decoding requests, their drafts) by
 * every weight matrix once, so it is bound by reading the weights from memory. oneDNN's
 * blocked GEMM reaches 16-22 GB/s on such shapes on this project's 2-core Zen 4 VM; this
 * kernel streams the weights in the order it reads them and reaches 25-37 GB/s there (a
 * streaming sum of 1 GiB: 33-35 GB/s).
 *
 * The weights are in gemv_pack's panels (gemv_pack.h): blocks of 32 outputs, each k pair's
 *   two 16-output lines side by side. So one 64-byte load holds one k pair of 16 outputs:
 *   the operand VDPBF16PS takes with a broadcast pair of x; and a block is one sequential
 *   stream (a panel after the other made
 *   two streams 18 KB apart per thread, and the prefetchers kept up worse: SmolLM2-135M's 30
 *   layers' linears plus its head, 1 row, 2 vCPUs of a Zen 5 VM: 5.3 -> 3.5 ms, 50 -> 76 GB/s;
 *   8 rows 47 -> 68 GB/s).
 * gemv_bf16: y[m, i] = sum_j x[m, j] W[i, j] for m < rows, fp32 accumulation, bfloat16 out.
 *   Each thread takes blocks of 32 outputs and streams them once, for up to ROWS rows at a
 *   time (2 x ROWS accumulators); more rows go over the same block again while it is still
 *   in cache. A step of at most WIDE_UP_TO rows (decode rows and their drafts) takes passes
 *   of up to WIDE_ROWS rows instead, so a block read from memory feeds twice the products.
 *   32 accumulators and the weights do not fit the 32 vector registers, and the compiler
 *   keeps some on the stack (L1); that costs little beside a second pass that would wait on
 *   memory, but does cost once the block is in cache anyway: SmolLM2-135M's 30 layers' linears
 *   plus its head, 2 vCPUs of a Zen 4 VM (weights from memory at ~34 GB/s), passes of 8 -> 16:
 *   16 rows 14.9 -> 12.6 ms, 24 rows 19.6 -> 17.1, 32 rows 25.3 -> 22.8, and 512 rows 339 ->
 *   362 (a prompt chunk, compute-bound: it keeps passes of 8). A row's products and their
 *   order are the same in every pass, so results do not depend on the pass sizes.
 *
 * Layouts: x[m, j] at x + m * x_row + j; y[m, i] at y + m * y_row + i (both contiguous in
 * their last dimension). It returns 0, or -1 for a shape it does not take (n a multiple of
 * 32, k even and positive, rows >= 1); nothing is written then.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

#include "gemv_pack.h"
#include "kernels.h" /* its own prototypes, checked against the definitions */
#include "vec.h"

#define PANEL 16 /* outputs per panel: one fp32 vector */
#define ROWS 8   /* rows per pass over a block */
#define WIDE_ROWS 16  /* rows per pass in a step of at most WIDE_UP_TO rows */
#define WIDE_UP_TO 32
/* From PREFETCH_ROWS rows on, each pass asks for its block's lines AHEAD k pairs (two cache
 * lines each) ahead. The hardware prefetcher keeps one row's pass at the memory's rate, but
 * with more products per line it falls behind: on a 2-vCPU Zen 5 VM, with the earlier
 * two-stream layout, the 30 layers' linears of SmolLM2-135M plus its head took 6.4 / 6.9 /
 * 7.7 / 9.2 ms for 1 / 2 / 3 / 8 rows without, and 6.6 / 6.8 / 6.8 / 7.5 ms with (at 1 row
 * the prefetches only cost issue slots; at 2 rows the head alone, 57 MB: 940 -> 880 us) */
#define AHEAD 32
#define PREFETCH_ROWS 2

/* rows R (a compile-time constant) of x against the block at a: pair p's 16 outputs of the
 * first panel at a + 64p, of the second at a + 64p + 32 */
static inline __attribute__((always_inline)) void block_rows(const bf16 *x, int64_t x_row,
                                                             const int R, const bf16 *a,
                                                             int pairs, bf16 *y, int64_t y_row) {
    __m512 acc[WIDE_ROWS][2];
    for (int m = 0; m < R; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    for (int p = 0; p < pairs; p++) {
        const bf16 *line = a + (int64_t)p * 4 * PANEL;
        if (R >= PREFETCH_ROWS) {
            _mm_prefetch((const char *)(line + AHEAD * 4 * PANEL), _MM_HINT_T0);
            _mm_prefetch((const char *)(line + AHEAD * 4 * PANEL + 2 * PANEL), _MM_HINT_T0);
        }
        const __m512bh wa = (__m512bh)_mm512_loadu_si512(line);
        const __m512bh wb = (__m512bh)_mm512_loadu_si512(line + 2 * PANEL);
        for (int m = 0; m < R; m++) {
            int32_t pair;
            __builtin_memcpy(&pair, x + m * x_row + 2 * p, sizeof(pair));
            const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair);
            acc[m][0] = _mm512_dpbf16_ps(acc[m][0], xb, wa);
            acc[m][1] = _mm512_dpbf16_ps(acc[m][1], xb, wb);
        }
    }
    for (int m = 0; m < R; m++) {
        store_bf16(y + m * y_row, acc[m][0]);
        store_bf16(y + m * y_row + PANEL, acc[m][1]);
    }
}

/* rows <= WIDE_ROWS: each count its own unrolled pass */
static void block_any(const bf16 *x, int64_t x_row, int rows, const bf16 *a, int pairs,
                      bf16 *y, int64_t y_row) {
    switch (rows) {
#define ROWS_CASE(R)                                    \
    case R:                                             \
        block_rows(x, x_row, R, a, pairs, y, y_row);    \
        break;
        ROWS_CASE(1)
        ROWS_CASE(2)
        ROWS_CASE(3)
        ROWS_CASE(4)
        ROWS_CASE(5)
        ROWS_CASE(6)
        ROWS_CASE(7)
        ROWS_CASE(8)
        ROWS_CASE(9)
        ROWS_CASE(10)
        ROWS_CASE(11)
        ROWS_CASE(12)
        ROWS_CASE(13)
        ROWS_CASE(14)
        ROWS_CASE(15)
        default:
            block_rows(x, x_row, WIDE_ROWS, a, pairs, y, y_row);
#undef ROWS_CASE
    }
}

int gemv_bf16(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
              int64_t y_row, int n_threads) {
    if (n <= 0 || n % (2 * PANEL) || k <= 0 || k % 2 || rows < 1) return -1;
    const int pairs = k / 2, blocks = n / (2 * PANEL);
    const int64_t block = (int64_t)pairs * 4 * PANEL; /* elements of one block */
    const int pass = rows <= WIDE_UP_TO ? WIDE_ROWS : ROWS;
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > blocks) threads = blocks;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        const bf16 *a = wp + blk * block;
        for (int m0 = 0; m0 < rows; m0 += pass) {
            const int r = rows - m0 < pass ? rows - m0 : pass;
            block_any(x + m0 * x_row, x_row, r, a, pairs, y + m0 * y_row + blk * 2 * PANEL, y_row);
        }
    }
    return 0;
}

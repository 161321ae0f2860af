/* The native linear's product on AMX tiles (Sapphire Rapids and later Xeons), over the GEMV's
 * own weight panels (gemv_pack.h): a few bfloat16 rows times a weight, for decode steps on a CPU
 * where the AVX-512 GEMV computes too slowly (its VDPBF16PS loops ran 16 rows in 2.4x the time
 * of 1 row on a 2-vCPU AMX Xeon, where oneDNN's GEMM on the tiles runs them in 1.2x).
 *
 * The panels already hold AMX's B operand: a block's pair p keeps its first panel's 16
 * outputs as 64 bytes at a + 64p and its second's at a + 64p + 32, so 16 consecutive pairs of
 * one panel, 128 bytes apart, are one B tile (16 k-pairs x 16 outputs). Per block (32
 * outputs) and 32 rows of x:
 *   C[32 x 32] = x[32 x k] W^T    k/32 steps of: 2 A tiles (16 rows x 32 of k of x, read in
 *                                 place; the last partial tile from a zero-padded copy),
 *                                 2 B tiles, 4 TDPBF16PS
 * A thread takes about A_BYTES of rows through all its blocks before the next rows, a group
 * of blocks (about B_BYTES) at a time, so both stay in its cache while they meet.
 * Each output's sum runs over k in the same order whatever the rows: a row's result does not
 * depend on how many rows share its step.
 *
 * gemv_amx: y[m, i] = sum_j x[m, j] W[i, j] for m < rows (layouts as gemv_bf16's); returns 0,
 * -1 for a shape it does not take (n a multiple of 32, k of 32, rows >= 1) or a failed
 * allocation, -3 where Linux refuses the tile state, -4 where built without AMX. Nothing is
 * written unless 0.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amx_tiles.h"
#include "gemv_pack.h"
#include "kernels.h" /* its own prototypes, checked against the definitions */
#include "vec.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)

#define M_TILE 16    /* rows of x per tile */
/* rows of x a thread takes through every block it owns while they stay in its cache: about
 * A_BYTES of them (the weights stream by once per such block of rows) */
#define A_BYTES (1 << 20)
/* blocks a thread takes through those rows together: about B_BYTES of weights, in cache while
 * the rows' tiles pass over them */
#define B_BYTES (512 << 10)

/* Rows of x for tiles at rows m0 ..: in place where 16 rows are there, else the zero-padded
 * copy of the last partial tile (tail) */
static inline const bf16 *rows_at(const bf16 *x, int64_t x_row, int rows, int m0,
                                  const bf16 *tail, int64_t *stride) {
    if (m0 + M_TILE <= rows) {
        *stride = x_row * (int64_t)sizeof(bf16);
        return x + m0 * x_row;
    }
    *stride = 0; /* set below: the tail's rows are k apart */
    return tail;
}

/* C tiles to bfloat16 rows m0 .. of y (`valid` of them), outputs o0 .. o0 + 31 */
static inline void store_rows(const float *c, bf16 *y, int64_t y_row, int m0, int valid,
                              int o0) {
    for (int m = 0; m < valid; m++) {
        store_bf16(y + (m0 + m) * y_row + o0, _mm512_load_ps(c + m * 32));
        store_bf16(y + (m0 + m) * y_row + o0 + 16, _mm512_load_ps(c + m * 32 + 16));
    }
}

int gemv_amx(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
             int64_t y_row, int n_threads) {
    if (n <= 0 || n % (2 * GEMV_PANEL) || k <= 0 || k % 32 || rows < 1) return -1;
    if (!amx_permitted()) return -3;
    const int blocks = n / GEMV_BLOCK, steps = k / 32;
    const int64_t block = (int64_t)k / 2 * 64; /* elements of one block's panels */
    /* the last partial tile's rows, zero-padded (a tile reads 16 rows) */
    const int full = rows / M_TILE * M_TILE;
    bf16 *tail = NULL;
    if (full < rows) {
        tail = aligned_alloc(64, (size_t)M_TILE * k * sizeof(bf16));
        if (!tail) return -1;
        memset(tail, 0, (size_t)M_TILE * k * sizeof(bf16));
        for (int m = full; m < rows; m++)
            memcpy(tail + (int64_t)(m - full) * k, x + m * x_row, (size_t)k * sizeof(bf16));
    }
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > blocks) threads = blocks;
    int m_block = A_BYTES / (k * (int)sizeof(bf16)) / (2 * M_TILE) * (2 * M_TILE);
    if (m_block < 2 * M_TILE) m_block = 2 * M_TILE;
    /* blocks a thread takes together: about B_BYTES of weights, and at least 4 groups a
     * thread (the work splits by group) */
    int group = B_BYTES / (int)(block * sizeof(bf16));
    const int spread = (blocks + 4 * threads - 1) / (4 * threads);
    if (group > spread) group = spread;
    if (group < 1) group = 1;
    const int groups = (blocks + group - 1) / group;
#pragma omp parallel num_threads(threads)
    {
        configure_tiles(); /* tile state is per thread */
        float c[2][M_TILE * 32] __attribute__((aligned(64)));
        for (int mb = 0; mb < rows; mb += m_block) {
            const int me = rows - mb < m_block ? rows : mb + m_block;
#pragma omp for schedule(static) nowait
            for (int grp = 0; grp < groups; grp++) {
                const int b0 = grp * group, b1 = b0 + group < blocks ? b0 + group : blocks;
                /* two tiles of rows at a time (2 x 2 accumulators), then a last single one,
                 * through each block of the group (its weights stay in cache meanwhile) */
                for (int m0 = mb; m0 < me; m0 += 2 * M_TILE) {
                    const int two = m0 + M_TILE < me;
                    int64_t s0, s1 = 0;
                    const bf16 *x0 = rows_at(x, x_row, rows, m0, tail, &s0), *x1 = NULL;
                    if (!s0) s0 = (int64_t)k * sizeof(bf16);
                    if (two) {
                        x1 = rows_at(x, x_row, rows, m0 + M_TILE, tail, &s1);
                        if (!s1) s1 = (int64_t)k * sizeof(bf16);
                    }
                    for (int blk = b0; blk < b1; blk++) {
                        const bf16 *a = wp + blk * block;
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                        for (int t = 0; t < steps; t++) {
                            const bf16 *b = a + (int64_t)t * 16 * 64; /* pairs 16t .. 16t + 15 */
                            _tile_loadd(4, x0 + t * 32, s0);
                            _tile_loadd(6, b, 128);
                            _tile_loadd(7, b + 32, 128);
                            _tile_dpbf16ps(0, 4, 6);
                            _tile_dpbf16ps(1, 4, 7);
                            if (two) {
                                _tile_loadd(5, x1 + t * 32, s1);
                                _tile_dpbf16ps(2, 5, 6);
                                _tile_dpbf16ps(3, 5, 7);
                            }
                        }
                        _tile_stored(0, c[0], 32 * sizeof(float));
                        _tile_stored(1, c[0] + 16, 32 * sizeof(float));
                        store_rows(c[0], y, y_row, m0, rows - m0 < M_TILE ? rows - m0 : M_TILE,
                                   blk * 32);
                        if (two) {
                            const int m1 = m0 + M_TILE;
                            _tile_stored(2, c[1], 32 * sizeof(float));
                            _tile_stored(3, c[1] + 16, 32 * sizeof(float));
                            store_rows(c[1], y, y_row, m1,
                                       rows - m1 < M_TILE ? rows - m1 : M_TILE, blk * 32);
                        }
                    }
                }
            }
        }
        _tile_release();
    }
    free(tail);
    return 0;
}

#else /* a compiler without AMX: the entry point exists, and refuses */

int gemv_amx(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
             int64_t y_row, int n_threads) {
    return -4;
}

#endif

/* The native linear's product on AMX tiles (Sapphire Rapids and later Xeons), over the GEMV's
 * own weight panels (gemv_pack.h): a few bfloat16 rows times a weight, for decode steps on a CPU
 * where the AVX-512 GEMV computes too slowly (its VDPBF16PS loops ran 16 rows in 2.4x the time
 * of 1 row on a 2-vCPU AMX Xeon, where oneDNN's GEMM on the tiles runs them in 1.2x).
 *
 * The panels already hold AMX's B operand: a block's pair p keeps its first panel's 16
 * outputs as 64 bytes at a + 64p and its second's at a + 64p + 32, so 16 consecutive pairs of
 * one panel, 128 bytes apart, are one B tile (16 k-pairs x 16 outputs). Per 64 outputs (two
 * blocks) and 16 rows of x:
 *   C[16 x 64] = x[16 x k] W^T    k/32 steps of: A = 16 rows x 32 of k (x, read in place
 *                                 from a zero-padded copy), 4 B tiles, 4 TDPBF16PS
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

#define M_TILE 16 /* rows of x per tile */

/* one or two blocks (32 outputs each) at a against rows m0 .. m0 + 15 of the padded x */
static inline void blocks_tile(const bf16 *xp, int k, const bf16 *a, int64_t block, int two,
                               float *c) {
    const int steps = k / 32;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int t = 0; t < steps; t++) {
        const bf16 *b = a + (int64_t)t * 16 * 64; /* pairs 16t .. 16t + 15 */
        _tile_loadd(4, xp + t * 32, k * sizeof(bf16));
        _tile_loadd(5, b, 128);
        _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(6, b + 32, 128);
        _tile_dpbf16ps(1, 4, 6);
        if (two) {
            _tile_loadd(7, b + block, 128);
            _tile_dpbf16ps(2, 4, 7);
            _tile_loadd(5, b + block + 32, 128);
            _tile_dpbf16ps(3, 4, 5);
        }
    }
    /* c: 16 rows of 64 outputs */
    _tile_stored(0, c, 64 * sizeof(float));
    _tile_stored(1, c + 16, 64 * sizeof(float));
    if (two) {
        _tile_stored(2, c + 32, 64 * sizeof(float));
        _tile_stored(3, c + 48, 64 * sizeof(float));
    }
}

int gemv_amx(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
             int64_t y_row, int n_threads) {
    if (n <= 0 || n % (2 * GEMV_PANEL) || k <= 0 || k % 32 || rows < 1) return -1;
    if (!amx_permitted()) return -3;
    const int blocks = n / GEMV_BLOCK, units = (blocks + 1) / 2;
    const int padded = (rows + M_TILE - 1) / M_TILE * M_TILE;
    const int64_t block = (int64_t)k / 2 * 64; /* elements of one block's panels */
    /* x's rows, contiguous and zero-padded to whole tiles (a tile reads 16 rows) */
    bf16 *xp = aligned_alloc(64, (size_t)padded * k * sizeof(bf16));
    if (!xp) return -1;
    for (int m = 0; m < padded; m++) {
        if (m < rows)
            memcpy(xp + (int64_t)m * k, x + m * x_row, (size_t)k * sizeof(bf16));
        else
            memset(xp + (int64_t)m * k, 0, (size_t)k * sizeof(bf16));
    }
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > units) threads = units;
#pragma omp parallel num_threads(threads)
    {
        configure_tiles(); /* tile state is per thread */
        float c[M_TILE * 64] __attribute__((aligned(64)));
#pragma omp for schedule(static)
        for (int u = 0; u < units; u++) {
            const int two = 2 * u + 1 < blocks, width = two ? 64 : 32;
            const bf16 *a = wp + 2 * (int64_t)u * block;
            for (int m0 = 0; m0 < rows; m0 += M_TILE) {
                blocks_tile(xp + (int64_t)m0 * k, k, a, block, two, c);
                for (int m = m0; m < rows && m < m0 + M_TILE; m++)
                    for (int o = 0; o < width; o += 16)
                        store_bf16(y + m * y_row + u * 64 + o,
                                   _mm512_load_ps(c + (m - m0) * 64 + o));
            }
        }
        _tile_release();
    }
    free(xp);
    return 0;
}

#else /* a compiler without AMX: the entry point exists, and refuses */

int gemv_amx(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
             int64_t y_row, int n_threads) {
    return -4;
}

#endif

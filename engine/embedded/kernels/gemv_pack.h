/* The GEMV's weight panels, shared by the AVX-512 BF16 product (gemv.c) and the AVX2 one
 * (gemv_avx2.c); plain C, so both libraries build it.
 *
 * gemv_pack: W [n, k] bfloat16 (row-major) -> blocks of 32 output rows (two panels of 16),
 *   each block's k in pairs, the two panels' lines of one pair side by side:
 *   wp[((i / 32) * (k / 2) + p) * 64 + (i % 32 / 16) * 32 + (i % 16) * 2 + e] = W[i, 2p + e]
 *   Returns 0, or -1 for a shape it does not take (n a multiple of 32, k even and positive).
 */
#ifndef APPLIANCE_KERNELS_GEMV_PACK_H
#define APPLIANCE_KERNELS_GEMV_PACK_H

#include <stdint.h>

typedef uint16_t bf16;

#define GEMV_PANEL 16 /* outputs per panel */
#define GEMV_BLOCK 32 /* outputs per block: two panels */

int gemv_pack(const bf16 *w, int n, int k, bf16 *wp);

#endif

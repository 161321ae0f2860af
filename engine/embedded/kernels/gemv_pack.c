/* gemv_pack (gemv_pack.h): the weight panels both GEMV kernels read. */
#include "gemv_pack.h"

int gemv_pack(const bf16 *w, int n, int k, bf16 *wp) {
    if (n <= 0 || n % GEMV_BLOCK || k <= 0 || k % 2) return -1;
    const int pairs = k / 2;
    for (int i = 0; i < n; i++) {
        const uint32_t *src = (const uint32_t *)(w + (int64_t)i * k);
        uint32_t *dst = (uint32_t *)wp + (int64_t)(i / GEMV_BLOCK) * pairs * GEMV_BLOCK +
                        (i % GEMV_BLOCK / GEMV_PANEL) * GEMV_PANEL + (i % GEMV_PANEL);
        for (int p = 0; p < pairs; p++) dst[(int64_t)p * GEMV_BLOCK] = src[p];
    }
    return 0;
}

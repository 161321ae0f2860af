/* The kernels' entry points, for the ones that call others (decode_step.c); each file that
 * defines one includes this too, so the compiler checks the two agree. Each is defined
 * and documented in its own file: attention.c, pointwise.c, gemv.c. */
#ifndef APPLIANCE_KERNELS_KERNELS_H
#define APPLIANCE_KERNELS_KERNELS_H

#include <stdint.h>

#include "vec.h"

int decode_attention(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k, const bf16 *v,
                     int64_t kv_slot, int64_t kv_head, int pool_rows, int capacity,
                     const int32_t *lengths, const int32_t *slots, int shared, bf16 *out,
                     int64_t o_row, int64_t o_head, int n, int hq, int hkv, int head_dim,
                     float scale, int n_threads);
int decode_attention_amx(const bf16 *q, int64_t q_row, int64_t q_head, const bf16 *k,
                         const bf16 *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, int shared,
                         bf16 *out, int64_t o_row, int64_t o_head, int n, int hq, int hkv,
                         int head_dim, float scale, int n_threads);
int add_rms_norm(bf16 *h, int64_t h_row, const bf16 *delta, int64_t d_row, const bf16 *w,
                 bf16 *x, int64_t x_row, int n, int dim, float eps, int n_threads);
int silu_mul(const bf16 *gate_up, int64_t g_row, bf16 *y, int64_t y_row, int n, int half,
             int n_threads);
int rope_inplace(bf16 *x, int64_t x_row, const bf16 *cos, const bf16 *sin, int64_t cs_row,
                 int n, int heads, int dim, int n_threads);
int gemv_bf16(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
              int64_t y_row, int n_threads);
int gemv_amx(const bf16 *x, int64_t x_row, int rows, const bf16 *wp, int n, int k, bf16 *y,
             int64_t y_row, int n_threads);

#endif

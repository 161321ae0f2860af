/* The entry points of the float32 AVX2 library (gemv_f32.py builds it), for the ones that call
 * others (decode_step_avx2.c); each file that defines one includes this too, so the compiler
 * checks the two agree. Each is documented in its own file. */
#ifndef APPLIANCE_KERNELS_AVX2_H
#define APPLIANCE_KERNELS_AVX2_H

#include <stdint.h>

#include "gemv_pack.h"

int gemv_f32_bf16(const float *x, int64_t x_row, int rows, const bf16 *wp, int n, int k,
                  float *y, int64_t y_row, int n_threads);
int decode_attention_f32(const float *q, int64_t q_row, int64_t q_head, const float *k,
                         const float *v, int64_t kv_slot, int64_t kv_head, int pool_rows,
                         int capacity, const int32_t *lengths, const int32_t *slots, int shared,
                         float *out, int64_t o_row, int64_t o_head, int n, int hq, int hkv,
                         int head_dim, float scale, int n_threads);
int prefill_attention_f32(const float *q, int64_t q_pos, int64_t q_head, const float *k,
                          const float *v, int64_t kv_head, float *out, int64_t o_pos,
                          int64_t o_head, int n, int start, int hq, int hkv, int head_dim,
                          float scale, int n_threads);
int add_rms_norm_f32(float *h, int64_t h_row, const float *delta, int64_t d_row, const float *w,
                     float *x, int64_t x_row, int n, int dim, float eps, int n_threads);
int silu_mul_f32(const float *gate_up, int64_t g_row, float *y, int64_t y_row, int n, int half,
                 int n_threads);
int rope_inplace_f32(float *x, int64_t x_row, const float *cos, const float *sin, int64_t cs_row,
                     int n, int heads, int dim, int n_threads);

#endif

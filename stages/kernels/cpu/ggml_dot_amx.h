/* What the `ggml` precision's AMX tiles share (ggml_dot_amx.c, ggml_dot_amx_kquants.c): their
 * target, the tile configuration ldtilecfg reads, and the K-quant tiles the amx row takes. */
#ifndef EVALMESH_KERNELS_GGML_DOT_AMX_H
#define EVALMESH_KERNELS_GGML_DOT_AMX_H

#if defined(__x86_64__)
#include <stdint.h>

#include "stages/kernels/cpu/ggml_dot.h"
#include "stages/kernels/cpu/ggml_dot_lanes.h"

#define EM_AMX_TARGET "amx-tile,amx-int8," EM_GGML_LANES_TARGET

/* ldtilecfg's 64 bytes, palette 1: tile t has rows[t] rows of colsb[t] bytes. */
typedef struct __attribute__((aligned(64))) em_amx_tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} em_amx_tile_config;

/* The tiles of Q6_K, Q3_K, Q4_K and Q5_K rows (ggml_dot_amx_kquants.c). */
em_ggml_tile_fn em_ggml_amx_q6_k, em_ggml_amx_q3_k, em_ggml_amx_q4_k, em_ggml_amx_q5_k;
#endif

#endif

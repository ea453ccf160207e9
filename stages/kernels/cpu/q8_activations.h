/* The activations of a linear layer in the forward's `ggml` precision: each token's row cut into
 * blocks of 32 values and rounded to 8 bits as ggml's reference quantizer does it
 * (quantize_row_q8_1_ref in ggml-quants.c, whose d and qs are those of quantize_row_q8_0_ref):
 *     amax = max |x_j|,  d = amax / 127,  id = d ? 1 / d : 0,  qs_j = roundf(x_j * id),
 *     the block's scale is fp16(d) and its Q8_1 sum s = fp16(float(sum of qs) * d),
 * with fp16() rounding to nearest even. One quantization serves every weight type: the Q8_0 dot
 * products (Q4_0, Q5_0, Q8_0, IQ4_NL weights) read d and qs, the Q8_1 ones (Q4_1, Q5_1) s as
 * well.
 * The K-quants' dot products (Q2_K to Q6_K) and the IQ types' but IQ4_NL's read the Q8_K form
 * instead, blocks of 256 values rounded as quantize_row_q8_K_ref does it: max = the x_j of largest
 * |x_j| (the first of equals), iscale = -127 / max, kqs_j = min(127, nearest_int(iscale * x_j))
 * (halves to even), kd = 1 / iscale as a float, and the sum of each 16 quants (all zero when max is
 * 0). The dot products of F16 weights read the F16 form instead (em_f16_round, f16_activations.c):
 * each value rounded to fp16 to nearest even, as ggml's GGML_FP32_TO_FP16 does for F16's
 * vec_dot_type.
 *
 * On a CPU with AVX-512 (F and BW) the rounding runs 16 tokens at once, or a few tokens (a
 * narrow panel, gemm.h) a block of each at once (q8_activations_avx512.c), the same bits as the C
 * one.
 *
 * Layout, block-major so that the dot-product kernels (ggml_dot.h) read consecutive tokens of one
 * block together: block b of token t is at index b * tokens + t, where tokens is T rounded up to
 * EM_Q8_TOKEN_STEP; the padding tokens are zeros (d = 0), so their products are 0. */
#ifndef EVALMESH_KERNELS_Q8_ACTIVATIONS_H
#define EVALMESH_KERNELS_Q8_ACTIVATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/cpu/gemm.h"

#define EM_Q8_BLOCK 32       /* values per block */
#define EM_Q8_TOKEN_STEP 4   /* tokens rounded up to this: the kernels' token step */
#define EM_Q8K_BLOCK 256     /* values per block of the Q8_K form */
#define EM_Q8_LANE_BYTES 512 /* a block of 16 tokens as token lanes */

typedef struct em_q8_activations {
    int T, tokens, blocks; /* tokens: T rounded up to EM_Q8_TOKEN_STEP; blocks: K / 32 */
    int8_t *qs;            /* (blocks, tokens, 32) */
    float *d;              /* (blocks, tokens) fp16(d) as a float */
    float *s;              /* (blocks, tokens) fp16(sum of qs * d) as a float */
    int32_t *sum;          /* (blocks, tokens) the sum of the block's qs, exact */
    size_t capacity;       /* blocks * tokens the arrays hold */
    int8_t *lanes;         /* (tokens / 16 rounded up, blocks, 8, 16, 4) qs as token lanes, 64-byte
                              aligned, where the dot-product kernel asks (ggml_dot_lanes.h) */
    size_t lanes_capacity; /* bytes lanes holds */
    int kblocks;           /* the Q8_K form (em_q8k_quantize): K / 256 blocks */
    int8_t *kqs;           /* (kblocks, tokens, 256) */
    float *kd;             /* (kblocks, tokens) */
    int16_t *kbsums;       /* (kblocks, tokens, 16) the sums of each 16 kqs, exact */
    size_t kcapacity;      /* kblocks * tokens the arrays hold */
    /* the Q8_K form as token lanes for Q4_K's and Q6_K's dot products, 64-byte vectors: (groups of
     * 16 tokens, kblocks, 64), its 16-value sums (groups, kblocks, 8) and (groups, kblocks, 128),
     * where the kernel asks (ggml_dot_lanes.h); reserved by em_q8_reserve_k_lanes */
    void *k4lanes, *k4bsums, *k6lanes;
    size_t k4capacity, k6capacity; /* (group, block) pairs they hold */
    /* the F16 form (em_f16_round): (tokens, hstride) x rounded to fp16 as floats, token-major,
     * hstride = K rounded up to 16, zeros past K and for the padding tokens */
    int hstride;
    float *h;
    size_t hcapacity; /* floats h holds */
} em_q8_activations;

/* T rounded up to EM_Q8_TOKEN_STEP: the tokens of every form. */
static inline int em_q8_padded_tokens(int T) {
    return (T + EM_Q8_TOKEN_STEP - 1) / EM_Q8_TOKEN_STEP * EM_Q8_TOKEN_STEP;
}

/* Makes q hold T tokens of K values in the 32-value and Q8_K forms (an error, exit status 4, when
 * memory runs out). */
em_status em_q8_reserve(em_q8_activations *q, int T, int K);

/* Makes q's K-quant lanes hold T tokens of K values in Q4_K's form (q4k) and Q6_K's (q6k), for a
 * kernel with prepare_k (ggml_dot.h) and weights of those types: an error, exit status 4, when
 * memory runs out. */
em_status em_q8_reserve_k_lanes(em_q8_activations *q, int T, int K, bool q4k, bool q6k);

/* Quantizes x (T, K), K a multiple of 32, given as GEMM panels (gemm.h), into q (reserved for at
 * least T tokens of K values). threads: OpenMP threads for large products; the result does not
 * depend on them. */
void em_q8_quantize(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q);
/* The same into the Q8_K form, K a multiple of 256. */
void em_q8k_quantize(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q);

/* Makes q's F16 form hold T tokens of K values, for a model with F16 weights (its T x K floats
 * are 4 times the 8-bit forms: only when needed); an error, exit status 4, when memory runs
 * out. */
em_status em_q8_reserve_f16(em_q8_activations *q, int T, int K);

/* Rounds x (T, K), any K, given as GEMM panels, to fp16 into q's F16 form (reserved for at least
 * T tokens of K values): with F16C where the CPU has it, else in C, the same bits. */
void em_f16_round(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q);
/* The same with the C rounding (vector false) or F16C's (vector true, only where
 * em_f16c_runs_here), which the tests compare. */
void em_f16_round_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                     em_q8_activations *q);
bool em_f16c_runs_here(void);

void em_q8_activations_free(em_q8_activations *q);

/* em_q8_quantize and em_q8k_quantize with the C rounding (vector false) or the AVX-512 one (vector
 * true, only where em_q8_avx512_runs_here): the same bits, which the tests compare. */
void em_q8_quantize_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                       em_q8_activations *q);
void em_q8k_quantize_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                        em_q8_activations *q);

/* Whether this CPU has the AVX-512 rounding's instructions (false off x86-64). */
bool em_q8_avx512_runs_here(void);
/* Block b of the n (<= 16) real tokens of panel `panel`, in each form, on AVX-512 (only those
 * tokens of x are read, so x may be a narrow panel). */
void em_q8_block_panel_avx512(em_gemm_panels x, int panel, int n, int b, em_q8_activations *q);
void em_q8k_block_panel_avx512(em_gemm_panels x, int panel, int n, int b, em_q8_activations *q);
/* Block b of token t alone, in the 32-value form, on AVX-512: for a narrow panel (gemm.h), whose
 * token's 32 values are two vectors where a panel's lanes would hold one token each. */
void em_q8_block_token_avx512(em_gemm_panels x, int t, int b, em_q8_activations *q);

#endif

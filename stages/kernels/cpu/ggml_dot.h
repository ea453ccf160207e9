/* The dot products of the forward's `ggml` precision: a tile of quantized weight rows times
 * activations rounded to 8 bits (q8_activations.h), with integer products inside each 32-value
 * block and the block scales applied as ggml's reference dot products do it
 * (ggml_vec_dot_<type>_q8_<0|1>_generic in ggml-cpu/quants.c), per block b in order:
 *     Q8_0  sumf += (float)sumi * (dw * dx)
 *     Q4_0  sumf += (float)sumi * dw * dx
 *     Q5_0  sumf += (dw * dx) * (float)sumi
 *     Q4_1, Q5_1  sumf += (dw * dx) * (float)sumi + mw * sx
 * from sumf = 0, where sumi is the block's exact integer dot product of the weight's quants (Q4_0
 * nibble - 8, Q5_0 5-bit value - 16, Q4_1 and Q5_1 unsigned) and the activation's, dw and mw the
 * weight block's fp16 scale and minimum, dx and sx the activation block's (q8_activations.h).
 * Q6_K (ggml_vec_dot_q6_K_q8_K_generic) with the Q8_K form of the activations: per 256-value
 * block, 8 exact integer lanes, lane l = the sum over the 16 sub-blocks j of scale_j times the
 * products of the sub-block's values l and l + 8 (6-bit quant - 32 times the activation's), then
 * sums[l] += (dw * dx) * (float)lane_l for l = 0..7, and at the end sumf = 0 + sums[0] + ... +
 * sums[7] in that order. Q4_K (ggml_vec_dot_q4_K_q8_K_generic) the same with 8 sub-blocks of 32
 * (lane l: values l, l + 8, l + 16, l + 24 of each, 4-bit quants times 6-bit scales), and before
 * the lanes, per block, sumf -= (dmin * dx) * (float)(sum over j of bsums_j * min_(j/2)), the
 * activation's 16-value sums times the weight's 6-bit minima. Q5_K
 * (ggml_vec_dot_q5_K_q8_K_generic) is Q4_K with 5-bit quants: the nibble plus 16 where the
 * value's bit of qh is set. Q3_K (ggml_vec_dot_q3_K_q8_K_generic) is Q6_K's form with 3-bit
 * quants (2 bits, less 4 where the value's hmask bit is clear) and 6-bit scales less 32. Q2_K
 * (ggml_vec_dot_q2_K_q8_K_generic) has no lanes: per block the exact sums isum (4-bit scale times
 * 2-bit quant times activation) and summs (the activation's 16-value sums times the 4-bit
 * minima), then sumf += dall * (float)isum - dmin * (float)summs, dall and dmin the weight's
 * fp16 scales times dx.
 * IQ4_NL (ggml_vec_dot_iq4_nl_q8_0_generic) is Q5_0's step on Q8_0 activations with quants that
 * are the non-linear values em_iq4nl_values of the nibbles (laid out as Q4_0's); MXFP4
 * (ggml_vec_dot_mxfp4_q8_0_generic) the same with the values em_mxfp4_values and a scale dw that
 * is the block's E8M0 exponent halved, 2^(e - 128) (sumf += (dx * dw) * sumi: the same product).
 * IQ4_XS (ggml_vec_dot_iq4_xs_q8_K_generic) reads the Q8_K form: per 256-value block, per 32-value
 * sub-block j in order, sumf += (d4d8 * (float)(ls_j - 32)) * (float)sumi_j, d4d8 = dw * dx, ls_j
 * the sub-block's 6-bit scale and sumi_j its exact sum of IQ4_NL values times activations. The
 * lattice IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and the ternary TQ1_0
 * and TQ2_0 read the Q8_K form: per block an exact integer sum, sumf += (d * dx) * sum (IQ1:
 * * (sum + 0.125 * delta_sum); TQ: ggml's sum * (d * dx), the same product), and at the end
 * ggml's factor times sumf (ggml_dot_iq.h).
 * F16 (ggml's F16 weights read fp16 activations, the F16 form of q8_activations.h): the row and
 * the activations padded with zeros to a multiple of 16 values, 16 lanes, lane l the sum of the
 * products of values l, l + 16, l + 32, ... in order (each product of two fp16 values is exact in
 * float), then the lanes added as a tree: lane l += lane l + 8 (l < 8), then l + 4 (l < 4), l + 2,
 * l + 1, and lane 0 is the result (ggml's own order depends on the instruction set; this one
 * is fixed).
 * Each step is one IEEE single rounding (the build never fuses them), so every kernel gives the
 * same bits as its plain C version.
 *
 * Kernels are rows of a table, tried in order by cpuid: `amx` (AMX-INT8 with avx512vnni's
 * features: a 16 x 16 tile of (row, token) block sums per tdpbssd, their float steps on a row's 16
 * tokens at once; the 32-value block types, and Q6_K, Q3_K, Q4_K and Q5_K over 16 tokens, their
 * lanes from the weights folded with their scales and cut into two bytes,
 * ggml_dot_amx_kquants.c), `avx512vnni` (AVX-512 F, BW, VL and VNNI
 * with F16C: integer products by vpdpbusd and vpdpwssd, the float steps on 16 (row, token) pairs
 * at once, the 16 tokens of a row; 4 tokens or fewer take avx2's tiles; F16 by FMAs on 16
 * (row, token) pairs' lanes, ggml_dot_f16_avx512.c), `avxvnni` (the 256-bit
 * VEX AVX-VNNI of CPUs without AVX-512, with AVX2 and F16C: the same design on 8 tokens of a row
 * per vector, K-quants included; 4 tokens or fewer take avx2's tiles), `avx2` (AVX2
 * with F16C: integer products by maddubs, the float steps on 8 (row, token) pairs at once; the
 * K-quants on their 8 lanes per pair; F16 by FMAs on 4 pairs' two 8-lane halves,
 * ggml_dot_f16_avx2.c, which avxvnni takes too), then `c`. Every kernel has the 32-value types
 * (IQ4_NL and MXFP4 included); Q2_K, the other IQ types and TQ1_0 and TQ2_0 have tiles in
 * avx512vnni, avx2 and c, amx taking avx512vnni's and avxvnni avx2's. A row's empty (NULL) column
 * is the next row's that runs here (the selection fills it in). The environment variable
 * EVALMESH_CPU_KERNEL (amx, avx512vnni, avxvnni, avx2 or c; the GEMM's avx512 and the bf16
 * precision's avx512bf16, which have no row here, take this table's best) forces one.
 */
#ifndef EVALMESH_KERNELS_GGML_DOT_H
#define EVALMESH_KERNELS_GGML_DOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/formats/dequantize_rows.h"
#include "stages/formats/ggml_types.h"
#include "stages/kernels/cpu/q8_activations.h"

/* ct[j * ldc + t] = the dot product of weight row j (at w + j * row_bytes, x->blocks blocks of the
 * row's type) and token t of x, for j < rows and t < x->tokens (the padding tokens give 0). */
typedef void em_ggml_tile_fn(const uint8_t *w, size_t row_bytes, int rows,
                             const em_q8_activations *x, float *ct, size_t ldc);

/* The weight types of the mode: one column of each kernel's row. */
typedef enum em_ggml_dot_type {
    EM_GGML_DOT_Q8_0,
    EM_GGML_DOT_Q4_0,
    EM_GGML_DOT_Q4_1,
    EM_GGML_DOT_Q5_0,
    EM_GGML_DOT_Q5_1,
    EM_GGML_DOT_Q6_K, /* these read the activations' Q8_K form */
    EM_GGML_DOT_Q4_K,
    EM_GGML_DOT_Q5_K,
    EM_GGML_DOT_Q3_K,
    EM_GGML_DOT_Q2_K,
    EM_GGML_DOT_F16, /* this one reads the F16 form */
    EM_GGML_DOT_IQ4_NL,
    EM_GGML_DOT_IQ4_XS,  /* the Q8_K form */
    EM_GGML_DOT_IQ2_XXS, /* the types decoded to integers (ggml_dot_iq.h): the Q8_K form */
    EM_GGML_DOT_IQ2_XS,
    EM_GGML_DOT_IQ2_S,
    EM_GGML_DOT_IQ3_XXS,
    EM_GGML_DOT_IQ3_S,
    EM_GGML_DOT_IQ1_S,
    EM_GGML_DOT_IQ1_M,
    EM_GGML_DOT_TQ1_0,
    EM_GGML_DOT_TQ2_0,
    EM_GGML_DOT_MXFP4, /* the 32-value form */
    EM_GGML_DOT_TYPES,
} em_ggml_dot_type;

/* Where a 32-value weight type's block keeps its parts (bytes from the block's start; 0: absent):
 * scale d at 0 (fp16, or MXFP4's E8M0 exponent byte where e8m0), fp16 minimum m at 2 (Q4_1,
 * Q5_1), the 32 fifth bits qh (Q5_0, Q5_1), the quants qs (bytes for Q8_0; nibbles for the others:
 * value j in the low nibble of byte j for j < 16, in the high nibble of byte j - 16 otherwise),
 * the offset subtracted from the quants, and the signed values the nibbles stand for (IQ4_NL's
 * em_iq4nl_values, MXFP4's em_mxfp4_values; NULL: the nibbles themselves). */
typedef struct em_ggml_block_layout {
    int bytes, m, qh, qs, offset;
    bool e8m0;
    const int8_t *values;
} em_ggml_block_layout;
static inline em_ggml_block_layout em_ggml_block_layout_of(em_ggml_dot_type type) {
    em_ggml_block_layout L = {0, 0, 0, 0, 0, false, NULL}; /* inline: a kernel's code folds it */
    switch (type) {
    case EM_GGML_DOT_Q8_0:
        L.bytes = 34, L.qs = 2;
        break;
    case EM_GGML_DOT_Q4_0:
        L.bytes = 18, L.qs = 2, L.offset = 8;
        break;
    case EM_GGML_DOT_IQ4_NL:
        L.bytes = 18, L.qs = 2, L.values = em_iq4nl_values;
        break;
    case EM_GGML_DOT_MXFP4:
        L.bytes = 17, L.qs = 1, L.e8m0 = true, L.values = em_mxfp4_values;
        break;
    case EM_GGML_DOT_Q4_1:
        L.bytes = 20, L.m = 2, L.qs = 4;
        break;
    case EM_GGML_DOT_Q5_0:
        L.bytes = 22, L.qh = 2, L.qs = 6, L.offset = 16;
        break;
    default:
        L.bytes = 24, L.m = 2, L.qh = 4, L.qs = 8; /* Q5_1 */
    }
    return L;
}

/* Where a K-quant with 8 lanes (Q6_K, Q3_K, Q4_K, Q5_K) keeps its parts: block bytes, fp16 d, and
 * fp16 dmin (Q4_K, Q5_K; 0: none). */
typedef struct em_ggml_k_layout {
    int bytes, d, dmin;
} em_ggml_k_layout;
static inline em_ggml_k_layout em_ggml_k_layout_of(em_ggml_dot_type type) {
    em_ggml_k_layout L = {144, 0, 2}; /* Q4_K */
    if (type == EM_GGML_DOT_Q6_K) L = (em_ggml_k_layout){210, 208, 0};
    if (type == EM_GGML_DOT_Q3_K) L = (em_ggml_k_layout){110, 108, 0};
    if (type == EM_GGML_DOT_Q5_K) L.bytes = 176;
    return L;
}

/* The 256 values of a Q6_K, Q3_K, Q4_K or Q5_K block (at blk), each quant times its sub-block's
 * scale, as the integer lanes of ggml_dot.h add them: lane l of the block's exact sum is the sum
 * of folded[i] * y[i] over i = l, l + 8, ..., l + 248. |folded[i]| <= 4096 (Q6_K's 32 x 128). */
void em_ggml_k_folded(em_ggml_dot_type type, const uint8_t *blk, int16_t folded[256]);

typedef struct em_ggml_kernel {
    const char *name;        /* what EVALMESH_CPU_KERNEL names and the forward's log line says */
    bool (*runs_here)(void); /* cpuid: whether this CPU has the instructions */
    em_ggml_tile_fn *tile[EM_GGML_DOT_TYPES]; /* NULL: the next row's that runs here */
    /* the forms of the activations (EM_GGML_READS_*) a column's tile reads where they are not
     * em_ggml_dot_reads's (0); filled in with the tile (em_ggml_kernel_reads) */
    unsigned reads[EM_GGML_DOT_TYPES];
    /* NULL, or what its tiles need done to x after each em_q8_quantize (the 32-value form):
     * amx and avx512vnni transpose its tokens into lanes once (ggml_dot_lanes.h) */
    void (*prepare)(em_q8_activations *x, int threads);
    /* the same after each em_q8k_quantize, for the products of Q4_K, Q5_K or IQ4_XS weights (q4k)
     * or Q6_K, Q3_K or the decoded types (q6k), or Q2_K (both: em_ggml_dot_reads) to come:
     * avx512vnni's 256-value tiles (amx's too) rearrange its tokens into lanes once */
    void (*prepare_k)(em_q8_activations *x, bool q4k, bool q6k, int threads);
} em_ggml_kernel;

/* The K-quant columns, for kernels that define one tile function per K-quant: X(name, column). */
#define EM_GGML_KQUANTS(X)                                                                         \
    X(q6_k, EM_GGML_DOT_Q6_K)                                                                      \
    X(q4_k, EM_GGML_DOT_Q4_K)                                                                      \
    X(q5_k, EM_GGML_DOT_Q5_K) X(q3_k, EM_GGML_DOT_Q3_K) X(q2_k, EM_GGML_DOT_Q2_K)

/* The columns of the types decoded to integers (ggml_dot_iq.h: the lattice IQ types, TQ1_0 and
 * TQ2_0), likewise. */
#define EM_GGML_DECODED_TYPES(X)                                                                   \
    X(iq2_xxs, EM_GGML_DOT_IQ2_XXS)                                                                \
    X(iq2_xs, EM_GGML_DOT_IQ2_XS)                                                                  \
    X(iq2_s, EM_GGML_DOT_IQ2_S)                                                                    \
    X(iq3_xxs, EM_GGML_DOT_IQ3_XXS)                                                                \
    X(iq3_s, EM_GGML_DOT_IQ3_S)                                                                    \
    X(iq1_s, EM_GGML_DOT_IQ1_S)                                                                    \
    X(iq1_m, EM_GGML_DOT_IQ1_M) X(tq1_0, EM_GGML_DOT_TQ1_0) X(tq2_0, EM_GGML_DOT_TQ2_0)
/* A kernel row's entry for tile_<name> in its column, for .tile = {...,
 * EM_GGML_DECODED_TYPES(...)}. */
#define EM_GGML_TILE_ENTRY(name, column) [column] = tile_##name,

/* Whether the 32-value type's quants are signed bytes (Q8_0's, IQ4_NL's and MXFP4's values), else
 * unsigned. */
static inline bool em_ggml_signed_quants(em_ggml_dot_type type) {
    return type == EM_GGML_DOT_Q8_0 || em_ggml_block_layout_of(type).values;
}

/* The forms of the activations (q8_activations.h) a column's dot products read: the 32-value
 * form, the Q8_K form with the lanes (prepare_k) of Q4_K or of Q6_K, the F16 form. */
enum {
    EM_GGML_READS_Q8 = 1,
    EM_GGML_READS_Q4K_LANES = 2, /* and the Q8_K form */
    EM_GGML_READS_Q6K_LANES = 4, /* and the Q8_K form */
    EM_GGML_READS_F16 = 8,
    /* Q6_K's lanes in products of at most EM_GGML_FEW_TOKENS tokens only (amx's Q6_K and Q3_K
     * tiles hand those to avx512vnni's) */
    EM_GGML_READS_Q6K_LANES_FEW = 16,
};
#define EM_GGML_FEW_TOKENS 16
static inline unsigned em_ggml_dot_reads(int column) {
    switch (column) {
    case EM_GGML_DOT_Q4_K:
    case EM_GGML_DOT_Q5_K:   /* Q4_K's lanes */
    case EM_GGML_DOT_IQ4_XS: /* Q4_K's lanes and 16-value sums */
        return EM_GGML_READS_Q4K_LANES;
    case EM_GGML_DOT_Q6_K:
    case EM_GGML_DOT_Q3_K: /* Q6_K's lanes */
    case EM_GGML_DOT_IQ2_XXS:
    case EM_GGML_DOT_IQ2_XS:
    case EM_GGML_DOT_IQ2_S:
    case EM_GGML_DOT_IQ3_XXS:
    case EM_GGML_DOT_IQ3_S:
    case EM_GGML_DOT_IQ1_S:
    case EM_GGML_DOT_IQ1_M:
    case EM_GGML_DOT_TQ1_0:
    case EM_GGML_DOT_TQ2_0: /* the decoded types' words read Q6_K's lanes */
        return EM_GGML_READS_Q6K_LANES;
    case EM_GGML_DOT_Q2_K: /* Q6_K's lanes and Q4_K's 16-value sums */
        return EM_GGML_READS_Q4K_LANES | EM_GGML_READS_Q6K_LANES;
    case EM_GGML_DOT_F16:
        return EM_GGML_READS_F16;
    default:
        return EM_GGML_READS_Q8;
    }
}

/* The forms a kernel's column reads: its own (amx's Q6_K and Q3_K tiles read Q4_K's lanes) or the
 * column's. */
static inline unsigned em_ggml_kernel_reads(const em_ggml_kernel *k, int column) {
    return k->reads[column] ? k->reads[column] : em_ggml_dot_reads(column);
}

/* Whether a product of T tokens with weights whose dot products read the forms `reads` reads
 * Q6_K's lanes. */
static inline bool em_ggml_reads_q6k_lanes(unsigned reads, int T) {
    return (reads & EM_GGML_READS_Q6K_LANES) ||
           ((reads & EM_GGML_READS_Q6K_LANES_FEW) && T <= EM_GGML_FEW_TOKENS);
}

/* Whether the column's dot products read the activations' Q8_K form (else the 32-value or F16). */
static inline bool em_ggml_dot_reads_q8k(int column) {
    return (em_ggml_dot_reads(column) & (EM_GGML_READS_Q4K_LANES | EM_GGML_READS_Q6K_LANES)) != 0;
}

/* The plain C kernel: the definition the others match. */
extern const em_ggml_kernel em_ggml_kernel_c;
#if defined(__x86_64__)
extern const em_ggml_kernel em_ggml_kernel_amx;
extern const em_ggml_kernel em_ggml_kernel_avx512vnni;
extern const em_ggml_kernel em_ggml_kernel_avxvnni;
extern const em_ggml_kernel em_ggml_kernel_avx2;
/* The F16 columns of avx512vnni and avx2 (ggml_dot_f16_avx512.c, ggml_dot_f16_avx2.c). */
em_ggml_tile_fn em_ggml_f16_tile_avx512, em_ggml_f16_tile_avx2;
#endif

/* The column of a tensor type, or -1 when the mode has no dot product for it (such weights run
 * exact: F32, BF16, NVFP4, torchao's). */
int em_ggml_dot_type_of(em_tensor_type type);
/* The names of the types the mode covers, for messages ("Q8_0 ... Q5_K F16"). */
const char *em_ggml_dot_type_names(void);

/* The first kernel of the table this CPU runs, or the one EVALMESH_CPU_KERNEL names, its empty
 * columns filled in: an error (exit status 2) when it names an unknown kernel or one this CPU
 * cannot run. */
em_status em_ggml_kernel_select(const em_ggml_kernel **kernel);

#endif

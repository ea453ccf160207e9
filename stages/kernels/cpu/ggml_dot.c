/* The `ggml` precision's plain C dot products, the kernel table and the choice between its rows
 * (see ggml_dot.h). */
#include "stages/kernels/cpu/ggml_dot.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "stages/formats/half.h"
#include "stages/kernels/cpu/gemm_microkernel.h"
#include "stages/kernels/cpu/ggml_dot_iq.h"

static uint32_t u32_at(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* The exact integer dot product of a weight block's 32 quants with the activations y. */
static int block_sumi(em_ggml_dot_type type, const uint8_t *w, const int8_t *y) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    int sumi = 0;
    if (type == EM_GGML_DOT_Q8_0) {
        for (int j = 0; j < 32; j++) sumi += (int8_t)w[L.qs + j] * y[j];
        return sumi;
    }
    if (L.values) {
        for (int j = 0; j < 16; j++)
            sumi += L.values[w[L.qs + j] & 15] * y[j] + L.values[w[L.qs + j] >> 4] * y[j + 16];
        return sumi;
    }
    uint32_t qh = L.qh ? u32_at(w + L.qh) : 0;
    for (int j = 0; j < 16; j++) {
        int lo = (w[L.qs + j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (w[L.qs + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        sumi += (lo - L.offset) * y[j] + (hi - L.offset) * y[j + 16];
    }
    return sumi;
}

/* One weight row (blocks of the type) times token t of x, in ggml_dot.h's order per type. */
static float dot(em_ggml_dot_type type, const uint8_t *w, const em_q8_activations *x, int t) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    float sumf = 0.0f;
    for (int b = 0; b < x->blocks; b++, w += L.bytes) {
        size_t at = (size_t)b * x->tokens + t;
        float sumi = (float)block_sumi(type, w, x->qs + at * EM_Q8_BLOCK);
        float dw = L.e8m0 ? em_e8m0_half(w[0]) : em_half_at(w), dx = x->d[at];
        switch (type) {
        case EM_GGML_DOT_Q8_0:
            sumf += sumi * (dw * dx);
            break;
        case EM_GGML_DOT_Q4_0:
            sumf += sumi * dw * dx;
            break;
        case EM_GGML_DOT_Q5_0:
        case EM_GGML_DOT_IQ4_NL:
        case EM_GGML_DOT_MXFP4:
            sumf += (dw * dx) * sumi;
            break;
        default:
            sumf += (dw * dx) * sumi + em_half_at(w + L.m) * x->s[at]; /* Q4_1, Q5_1 */
        }
    }
    return sumf;
}

/* Q6_K block {ql[128], qh[64], int8 scales[16], f16 d}: value 128 h + 32 k + l (h < 2, k < 4,
 * l < 32) is nibble (k & 1 ? ql[64 h + l + 32] : ql[64 h + l]) >> (k < 2 ? 0 : 4), with bits
 * 2 k, 2 k + 1 of qh[32 h + l] above it, less 32. */
static void unpack_q6_k(const uint8_t *w, int8_t a[256]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w + 64 * h, *qh = w + 128 + 32 * h;
        for (int l = 0; l < 32; l++) {
            a[128 * h + l] = (int8_t)(((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32);
            a[128 * h + l + 32] = (int8_t)(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
            a[128 * h + l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            a[128 * h + l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
        }
    }
}

/* Q3_K block {hmask[32], qs[64], scales[12], f16 d}: value 128 h + 32 k + l (h < 2, k < 4,
 * l < 32) is bits 2 k, 2 k + 1 of qs[32 h + l], less 4 where bit 4 h + k of hmask[l] is clear. */
static void unpack_q3_k(const uint8_t *w, int8_t a[256]) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                a[128 * h + 32 * k + l] = (int8_t)(((w[32 + 32 * h + l] >> (2 * k)) & 3) -
                                                   ((w[l] >> (4 * h + k)) & 1 ? 0 : 4));
}

/* Q2_K block {scales[16], qs[64], f16 d, f16 dmin}: value 128 h + 32 k + l (h < 2, k < 4, l < 32)
 * is bits 2 k, 2 k + 1 of qs[32 h + l]; sub-block j (16 values) has scale scales[j] & 15 and
 * minimum scales[j] >> 4. ggml_vec_dot_q2_K_q8_K_generic: per block, the exact sums isum (of
 * scale times quant times activation) and summs (of the activation's 16-value sums times the
 * minima), then sumf += dall * isum - dmin * summs. */
static float dot_q2_k(const uint8_t *w, const em_q8_activations *x, int t) {
    float sumf = 0.0f;
    for (int b = 0; b < x->kblocks; b++, w += 84) {
        size_t at = (size_t)b * x->tokens + t;
        const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
        const int16_t *bsums = x->kbsums + at * 16;
        int summs = 0, isum = 0;
        for (int j = 0; j < 16; j++) summs += bsums[j] * (w[j] >> 4);
        for (int v = 0; v < 256; v++) {
            int q = (w[16 + 32 * (v / 128) + v % 32] >> (2 * (v / 32 % 4))) & 3;
            isum += (w[v / 16] & 15) * (y[v] * q);
        }
        float dall = x->kd[at] * em_half_at(w + 80), dmin = x->kd[at] * em_half_at(w + 82);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    return sumf;
}

/* Q4_K block {f16 d, f16 dmin, scales[12], qs[128]}: value 64 i + l (l < 32) is the low nibble of
 * qs[32 i + l], value 64 i + 32 + l its high nibble; sub-block j's scale and min from
 * em_k4_scale_min. Q5_K {f16 d, f16 dmin, scales[12], qh[32], qs[128]}: the same nibbles plus 16
 * where bit j of qh[l] is set, for value 32 j + l. Q6_K's 16 sub-blocks of 16 take the signed
 * scales[16] at 192, Q3_K's em_k3_scales's. */
void em_ggml_k_folded(em_ggml_dot_type type, const uint8_t *w, int16_t folded[256]) {
    if (type == EM_GGML_DOT_Q6_K || type == EM_GGML_DOT_Q3_K) {
        int8_t a[256], scale[16];
        if (type == EM_GGML_DOT_Q3_K) {
            unpack_q3_k(w, a);
            em_k3_scales(w + 96, scale);
        } else {
            unpack_q6_k(w, a);
            memcpy(scale, w + 192, 16);
        }
        for (int i = 0; i < 256; i++) folded[i] = (int16_t)(scale[i / 16] * a[i]);
        return;
    }
    const bool five_bits = type == EM_GGML_DOT_Q5_K;
    const uint8_t *qs = w + (five_bits ? 48 : 16);
    for (int j = 0; j < 8; j++) {
        uint8_t scale, min;
        em_k4_scale_min(j, w + 4, &scale, &min);
        for (int l = 0; l < 32; l++) {
            int q = (j % 2 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15) +
                    (five_bits ? (w[16 + l] >> j & 1) << 4 : 0);
            folded[32 * j + l] = (int16_t)(scale * q);
        }
    }
}

/* Q6_K, Q3_K, Q4_K or Q5_K: ggml_dot.h's 8 lanes, and Q4_K's and Q5_K's minima (the activation's
 * 16-value sums times sub-block j / 2's 6-bit minimum). */
static float dot_k_lanes(em_ggml_dot_type type, const uint8_t *w, const em_q8_activations *x,
                         int t) {
    const em_ggml_k_layout L = em_ggml_k_layout_of(type);
    float sums[8] = {0}, sumf = 0.0f;
    for (int b = 0; b < x->kblocks; b++, w += L.bytes) {
        size_t at = (size_t)b * x->tokens + t;
        const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
        int16_t folded[256];
        em_ggml_k_folded(type, w, folded);
        int32_t lane[8] = {0};
        for (int i = 0; i < 256; i++) lane[i % 8] += folded[i] * y[i];
        float d = em_half_at(w + L.d) * x->kd[at];
        for (int l = 0; l < 8; l++) sums[l] += d * (float)lane[l];
        if (L.dmin) {
            const int16_t *bsums = x->kbsums + at * 16;
            int summin = 0;
            for (int j = 0; j < 16; j++) {
                uint8_t scale, min;
                em_k4_scale_min(j / 2, w + 4, &scale, &min);
                summin += bsums[j] * min;
            }
            float dmin = em_half_at(w + L.dmin) * x->kd[at];
            sumf -= dmin * (float)summin;
        }
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* IQ4_XS block {f16 d, uint16 scales_h, scales_l[4], qs[128]}: sub-block j (32 values) has the
 * scale em_iq4_xs_scale; its value l < 16 is em_iq4nl_values of the low nibble of qs[16 j + l],
 * value 16 + l of the high one. ggml_vec_dot_iq4_xs_q8_K_generic's order: per sub-block,
 * sumf += (d4d8 * scale) * sumi. */
static float dot_iq4_xs(const uint8_t *w, const em_q8_activations *x, int t) {
    float sumf = 0.0f;
    for (int b = 0; b < x->kblocks; b++, w += 136) {
        size_t at = (size_t)b * x->tokens + t;
        const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
        float d4d8 = em_half_at(w) * x->kd[at];
        for (int j = 0; j < 8; j++) {
            const uint8_t *qs = w + 8 + 16 * j;
            int sumi = 0;
            for (int l = 0; l < 16; l++)
                sumi += y[32 * j + l] * em_iq4nl_values[qs[l] & 15] +
                        y[32 * j + 16 + l] * em_iq4nl_values[qs[l] >> 4];
            sumf += (d4d8 * (float)em_iq4_xs_scale(w, j)) * (float)sumi;
        }
    }
    return sumf;
}

/* A row of a type decoded to integers (ggml_dot_iq.h). */
static float dot_decoded(em_ggml_dot_type type, const uint8_t *w, const em_q8_activations *x,
                         int t) {
    float sumf = 0.0f;
    for (int b = 0; b < x->kblocks; b++, w += em_iq_block_bytes(type)) {
        size_t at = (size_t)b * x->tokens + t;
        const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
        em_iq_decoded v;
        em_iq_decode(type, w, &v);
        int32_t sum = 0, delta_sum = 0;
        for (int j = 0; j < 256; j++) sum += v.w[j] * y[j];
        for (int j = 0; em_iq_has_delta(type) && j < 256; j++) delta_sum += v.delta[j] * y[j];
        sumf = em_iq_step(type, sumf, em_iq_block_scale(type, w), x->kd[at], sum, delta_sum);
    }
    return em_iq_factor(type) * sumf;
}

/* An F16 row of K values times token t's F16 form: ggml_dot.h's 16 lanes and their tree. */
static float dot_f16(const uint8_t *w, int K, const em_q8_activations *x, int t) {
    const float *h = x->h + (size_t)t * x->hstride;
    float lane[16] = {0};
    for (int k = 0; k < x->hstride; k++)
        lane[k % 16] += (k < K ? em_half_at(w + 2 * (size_t)k) : 0.0f) * h[k];
    for (int half = 8; half >= 1; half /= 2)
        for (int l = 0; l < half; l++) lane[l] += lane[l + half];
    return lane[0];
}

/* The dot product of the column's type. */
static float dot_of(em_ggml_dot_type type, const uint8_t *w, const em_q8_activations *x, int t) {
    if (type == EM_GGML_DOT_Q2_K) return dot_q2_k(w, x, t);
    if (type == EM_GGML_DOT_IQ4_XS) return dot_iq4_xs(w, x, t);
    if (em_ggml_dot_is_decoded(type)) return dot_decoded(type, w, x, t);
    if (type == EM_GGML_DOT_Q6_K || type == EM_GGML_DOT_Q3_K || type == EM_GGML_DOT_Q4_K ||
        type == EM_GGML_DOT_Q5_K)
        return dot_k_lanes(type, w, x, t);
    return dot(type, w, x, t);
}

#define C_TILE(type, column)                                                                       \
    static void tile_##type(const uint8_t *w, size_t row_bytes, int rows,                          \
                            const em_q8_activations *x, float *ct, size_t ldc) {                   \
        for (int j = 0; j < rows; j++) {                                                           \
            for (int t = 0; t < x->tokens; t++)                                                    \
                ct[(size_t)j * ldc + t] = dot_of(column, w + (size_t)j * row_bytes, x, t);         \
        }                                                                                          \
    }
C_TILE(q8_0, EM_GGML_DOT_Q8_0)
C_TILE(q4_0, EM_GGML_DOT_Q4_0)
C_TILE(q4_1, EM_GGML_DOT_Q4_1)
C_TILE(q5_0, EM_GGML_DOT_Q5_0)
C_TILE(q5_1, EM_GGML_DOT_Q5_1)
C_TILE(q6_k, EM_GGML_DOT_Q6_K)
C_TILE(q4_k, EM_GGML_DOT_Q4_K)
C_TILE(q5_k, EM_GGML_DOT_Q5_K)
C_TILE(q3_k, EM_GGML_DOT_Q3_K)
C_TILE(q2_k, EM_GGML_DOT_Q2_K)
C_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
C_TILE(mxfp4, EM_GGML_DOT_MXFP4)
C_TILE(iq4_xs, EM_GGML_DOT_IQ4_XS)
EM_GGML_DECODED_TYPES(C_TILE)

static void tile_f16(const uint8_t *w, size_t row_bytes, int rows, const em_q8_activations *x,
                     float *ct, size_t ldc) {
    for (int j = 0; j < rows; j++)
        for (int t = 0; t < x->tokens; t++)
            ct[(size_t)j * ldc + t] =
                dot_f16(w + (size_t)j * row_bytes, (int)(row_bytes / 2), x, t);
}

static bool always(void) {
    return true;
}

const em_ggml_kernel em_ggml_kernel_c = {
    .name = "c",
    .runs_here = always,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q6_k, tile_q4_k, tile_q5_k,
             tile_q3_k, tile_q2_k, tile_f16, tile_iq4_nl, tile_iq4_xs,
             EM_GGML_DECODED_TYPES(EM_GGML_TILE_ENTRY)[EM_GGML_DOT_MXFP4] = tile_mxfp4},
};

/* The table, best first. */
static const em_ggml_kernel *const kernels[] = {
#if defined(__x86_64__)
    &em_ggml_kernel_amx, &em_ggml_kernel_avx512vnni, &em_ggml_kernel_avxvnni, &em_ggml_kernel_avx2,
#endif
    &em_ggml_kernel_c,
};
#define KERNELS (sizeof kernels / sizeof *kernels)

/* The rows as selected: each empty column filled from the next row that runs here (the C row has
 * them all). */
static em_ggml_kernel resolved[KERNELS];
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void) {
    for (size_t i = 0; i < KERNELS; i++) {
        resolved[i] = *kernels[i];
        for (int c = 0; c < EM_GGML_DOT_TYPES; c++)
            for (size_t next = i + 1; !resolved[i].tile[c] && next < KERNELS; next++)
                if (kernels[next]->runs_here()) {
                    resolved[i].tile[c] = kernels[next]->tile[c];
                    resolved[i].reads[c] = kernels[next]->reads[c];
                }
    }
}

int em_ggml_dot_type_of(em_tensor_type type) {
    switch (type) {
    case EM_TENSOR_Q8_0:
        return EM_GGML_DOT_Q8_0;
    case EM_TENSOR_Q4_0:
        return EM_GGML_DOT_Q4_0;
    case EM_TENSOR_Q4_1:
        return EM_GGML_DOT_Q4_1;
    case EM_TENSOR_Q5_0:
        return EM_GGML_DOT_Q5_0;
    case EM_TENSOR_Q5_1:
        return EM_GGML_DOT_Q5_1;
    case EM_TENSOR_Q6_K:
        return EM_GGML_DOT_Q6_K;
    case EM_TENSOR_Q4_K:
        return EM_GGML_DOT_Q4_K;
    case EM_TENSOR_Q5_K:
        return EM_GGML_DOT_Q5_K;
    case EM_TENSOR_Q3_K:
        return EM_GGML_DOT_Q3_K;
    case EM_TENSOR_Q2_K:
        return EM_GGML_DOT_Q2_K;
    case EM_TENSOR_F16:
        return EM_GGML_DOT_F16;
    case EM_TENSOR_IQ4_NL:
        return EM_GGML_DOT_IQ4_NL;
    case EM_TENSOR_IQ4_XS:
        return EM_GGML_DOT_IQ4_XS;
    case EM_TENSOR_IQ2_XXS:
        return EM_GGML_DOT_IQ2_XXS;
    case EM_TENSOR_IQ2_XS:
        return EM_GGML_DOT_IQ2_XS;
    case EM_TENSOR_IQ2_S:
        return EM_GGML_DOT_IQ2_S;
    case EM_TENSOR_IQ3_XXS:
        return EM_GGML_DOT_IQ3_XXS;
    case EM_TENSOR_IQ3_S:
        return EM_GGML_DOT_IQ3_S;
    case EM_TENSOR_IQ1_S:
        return EM_GGML_DOT_IQ1_S;
    case EM_TENSOR_IQ1_M:
        return EM_GGML_DOT_IQ1_M;
    case EM_TENSOR_TQ1_0:
        return EM_GGML_DOT_TQ1_0;
    case EM_TENSOR_TQ2_0:
        return EM_GGML_DOT_TQ2_0;
    case EM_TENSOR_MXFP4:
        return EM_GGML_DOT_MXFP4;
    default:
        return -1;
    }
}

const char *em_ggml_dot_type_names(void) {
    return "Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q6_K Q4_K Q5_K Q3_K Q2_K F16 IQ4_NL IQ4_XS IQ2_XXS IQ2_XS "
           "IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M TQ1_0 TQ2_0 MXFP4";
}

em_status em_ggml_kernel_select(const em_ggml_kernel **kernel) {
    const char *wanted = getenv("EVALMESH_CPU_KERNEL");
    /* unset, or the GEMM's and the bf16 precision's names that have no row here: the best */
    bool best =
        !wanted || !*wanted || strcmp(wanted, "avx512") == 0 || strcmp(wanted, "avx512bf16") == 0;
    *kernel = NULL;
    pthread_once(&resolve_once, resolve);
    for (size_t i = 0; i < KERNELS; i++) {
        if (kernels[i]->runs_here() && (best || strcmp(wanted, kernels[i]->name) == 0)) {
            *kernel = &resolved[i];
            return NULL;
        }
    }
    for (size_t i = 0; i < KERNELS; i++) {
        if (strcmp(wanted, kernels[i]->name) == 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "EVALMESH_CPU_KERNEL=%s, but this CPU cannot run that kernel",
                                wanted);
    }
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "EVALMESH_CPU_KERNEL=%s is not a CPU kernel (" EM_CPU_KERNEL_NAMES ")",
                        wanted);
}

/* The `ggml` precision's AMX tiles of the K-quants with 8 integer lanes (Q6_K, Q3_K, Q4_K, Q5_K;
 * ggml_dot.h). Lane l of a 256-value block sums its 32 values l, l + 8, ..., l + 248: each quant
 * times its sub-block's scale (em_ggml_k_folded, |w| <= 4096) times the activation. AMX multiplies
 * bytes, so each folded weight is cut as w = 128 hi + lo (lo 0..127, hi -32..32), and per block,
 * lane and 16 rows x 16 tokens two tdpbssd of K = 32 give the exact sums of lo and of hi:
 * lane = 128 hi + lo. The B tile of lane l is the activations' Q4_K lanes (ggml_dot_lanes.h,
 * em_ggml_fill_k_lanes) read 8 vectors apart: vector 8 j + l holds values 32 j + l + 8 i (i < 4)
 * of each token, lane l's values 4 j .. 4 j + 3. The float steps then run on a row's 16 tokens
 * as the C version's: per lane over the blocks in order sums[l] += (dw * dx) * lane, Q4_K's and
 * Q5_K's minima sumf -= (dmin * dx) * summin per block, then sumf + sums[0] + ... + sums[7]; so
 * each (row, token) gets the C result's bits. Each block's weights are folded and cut once per
 * tile, and the folding pays where more than one group of 16 tokens shares it: with 16 tokens or
 * fewer (decoding steps; EM_GGML_FEW_TOKENS) avx512vnni's tiles run, which read Q6_K's word
 * lanes (so the amx row reads those for Q6_K and Q3_K in such products only). On the Xeon, 110M
 * Q6_K, 2 threads: 16 sequences decoded together 533 generated tokens/s here against 623 on
 * avx512vnni, 48 sequences 778 against 716. The square 2048 product, one thread: Q6_K 248 GFLOP/s
 * against avx512vnni's 150, Q5_K 218 against 172. The tile stores bound it: without the float steps
 * Q6_K's product ran at 317 GFLOP/s, and at 390 without the hi tile's store (tilezero costs nothing
 * there; a second B tile for the next step gained nothing measurable). */
#include "stages/kernels/cpu/ggml_dot_amx.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "util/error.h"

#define AMX __attribute__((target(EM_AMX_TARGET)))
#define ROWS 16 /* rows per A tile */
#define LANE_VALUES 32

/* tile registers (literals: the intrinsics paste them into the instruction) */
#define TILE_LO 0 /* C: 16 rows x 16 tokens of int32 */
#define TILE_HI 1
#define TILE_A_LO 2 /* A: 16 rows x a lane's 32 bytes */
#define TILE_A_HI 3
#define TILE_B 4   /* B: 8 rows of 16 tokens' 4 bytes */
#define TILE_LO2 5 /* the next step's C tiles */
#define TILE_HI2 6

/* One block of 16 rows, folded and cut: a[part][l] is the A tile of lane l's lo (part 0) or hi
 * (part 1) bytes, row r's 32 values l + 8 m at a[part][l][r][m]; then each row's fp16 d, and for
 * Q4_K and Q5_K its dmin and the minima of sub-blocks 2 i and 2 i + 1 as a dword of two equal
 * words (vpdpwssd's operand with the activations' 16-value sums). Rows past the last are zeros. */
typedef struct folded_block {
    int8_t a[2][8][ROWS][LANE_VALUES];
    float dw[ROWS], dmin[ROWS];
    uint32_t mins[ROWS][8];
} folded_block;

/* Word 4 l + mm takes word 8 mm + l: lane l's values side by side. */
static const int16_t lane_major_words[32] = {0,  8,  16, 24, 1,  9,  17, 25, 2,  10, 18,
                                             26, 3,  11, 19, 27, 4,  12, 20, 28, 5,  13,
                                             21, 29, 6,  14, 22, 30, 7,  15, 23, 31};

/* x[l] = dword l of each of in[0..7] (an 8 x 8 transpose of dwords). */
AMX static inline void transpose_dwords(const __m256i in[8], __m256i x[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) { /* u[4 i + k]: dword k (and k + 4) of in[4 i .. 4 i + 3] */
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        x[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        x[k + 4] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* Row r of fb from the block at blk: its 256 folded words in 8 vectors of 32 (values
 * 32 v + 8 mm + l, mm < 4), each permuted so that word 4 l + mm is lane l's and taken as bytes
 * (dword l: lane l's values 4 v .. 4 v + 3), then the dwords transposed: lane l's 32 bytes. */
AMX static void fold_row(em_ggml_dot_type type, const uint8_t *blk, int r, folded_block *fb) {
    const em_ggml_k_layout L = em_ggml_k_layout_of(type);
    __m512i folded[8];
    em_ggml_k_folded_words(type, blk, folded);
    const __m512i lane_major = _mm512_loadu_si512(lane_major_words);
    __m256i parts[2][8], lanes[8];
    for (int v = 0; v < 8; v++) {
        __m512i w = _mm512_permutexvar_epi16(lane_major, folded[v]);
        parts[0][v] = _mm512_cvtepi16_epi8(_mm512_and_si512(w, _mm512_set1_epi16(127)));
        parts[1][v] = _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 7));
    }
    for (int p = 0; p < 2; p++) {
        transpose_dwords(parts[p], lanes);
        for (int l = 0; l < 8; l++) _mm256_storeu_si256((__m256i *)fb->a[p][l][r], lanes[l]);
    }
    fb->dw[r] = em_ggml_half_at(blk + L.d);
    if (!L.dmin) return;
    fb->dmin[r] = em_ggml_half_at(blk + L.dmin);
    for (int i = 0; i < 8; i++) {
        uint8_t scale, min;
        em_k4_scale_min(i, blk + 4, &scale, &min);
        fb->mins[r][i] = min * 0x10001u;
    }
}

/* Step s of a group's products (lane s / kblocks, block s % kblocks) into the C tiles lo_tile and
 * hi_tile (literals). */
#define ISSUE(s, lo_tile, hi_tile)                                                                 \
    do {                                                                                           \
        const folded_block *f_ = &fb[(s) % kblocks];                                               \
        _tile_loadd(TILE_B, yt + 64 * ((s) % kblocks) + (s) / kblocks, 512);                       \
        _tile_loadd(TILE_A_LO, f_->a[0][(s) / kblocks], LANE_VALUES);                              \
        _tile_loadd(TILE_A_HI, f_->a[1][(s) / kblocks], LANE_VALUES);                              \
        _tile_zero(lo_tile);                                                                       \
        _tile_zero(hi_tile);                                                                       \
        _tile_dpbssd(lo_tile, TILE_A_LO, TILE_B);                                                  \
        _tile_dpbssd(hi_tile, TILE_A_HI, TILE_B);                                                  \
    } while (0)
#define STORE(lo_tile, hi_tile, sums)                                                              \
    do {                                                                                           \
        _tile_stored(lo_tile, (sums)[0], 64);                                                      \
        _tile_stored(hi_tile, (sums)[1], 64);                                                      \
    } while (0)

/* Step s's float steps from its stored sums (lo and hi, 16 rows x 16 tokens): acc[r] +=
 * d[b][r] * (128 hi + lo); at a lane's first block the last lane's acc goes to lanes. */
AMX static inline __attribute__((always_inline)) void
step_floats(int s, int kblocks, const __m512 (*d)[ROWS], int32_t sums[2][ROWS][16],
            __m512 acc[ROWS], __m512 lanes[8][ROWS]) {
    int b = s % kblocks;
    if (b == 0 && s > 0)
        for (int r = 0; r < ROWS; r++) lanes[s / kblocks - 1][r] = acc[r];
    if (b == 0)
        for (int r = 0; r < ROWS; r++) acc[r] = _mm512_setzero_ps();
    for (int r = 0; r < ROWS; r++) {
        __m512i lane = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(sums[1][r]), 7),
                                        _mm512_load_si512(sums[0][r]));
        acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(d[b][r], _mm512_cvtepi32_ps(lane)));
    }
}

/* Q4_K's and Q5_K's minima of step s's block for two rows (lane l's steps take rows 2 l and
 * 2 l + 1): sumf[r] -= (dmin * dx) * summin, summin the activations' 16-value sums (ybs, 8 pairs)
 * times the row's minima, dx the block's token scales (kd_at, x->tokens apart; the live lanes). */
AMX static inline __attribute__((always_inline)) void
min_steps(int s, int kblocks, const folded_block *fb, const __m512i *ybs, const float *kd_at,
          size_t kd_stride, __mmask16 live, __m512 sumf[ROWS]) {
    const int b = s % kblocks, r0 = 2 * (s / kblocks);
    const __m512 kd = _mm512_maskz_loadu_ps(live, kd_at + (size_t)b * kd_stride);
    for (int r = r0; r < r0 + 2; r++) {
        __m512i summin = _mm512_setzero_si512();
        for (int i = 0; i < 8; i++)
            summin = _mm512_dpwssd_epi32(summin, ybs[8 * b + i],
                                         _mm512_set1_epi32((int)fb[b].mins[r][i]));
        __m512 dm = _mm512_mul_ps(_mm512_set1_ps(fb[b].dmin[r]), kd);
        sumf[r] = _mm512_sub_ps(sumf[r], _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summin)));
    }
}

/* The 16 rows of fb (kblocks blocks; m of them real) times the group of n tokens from c0 into
 * ct: per lane, the blocks in order, each step's tile products running while the last step's
 * float steps do (and, for Q4_K and Q5_K, two rows' minima of the step's block: lane l's steps
 * take rows 2 l and 2 l + 1); then sumf + the lanes. */
AMX static void rows_times_group(bool has_min, int m, const em_q8_activations *x, int c0, int n,
                                 const folded_block *fb, __m512 (*d)[ROWS], float *ct, size_t ldc) {
    const int kblocks = x->kblocks, steps = 8 * kblocks;
    const __mmask16 live = em_ggml_live_lanes(n);
    const __m512i *yt = (const __m512i *)x->k4lanes + (size_t)(c0 / EM_GGML_LANES) * kblocks * 64;
    const __m512i *ybs = (const __m512i *)x->k4bsums + (size_t)(c0 / EM_GGML_LANES) * kblocks * 8;
    const float *kd_at = x->kd + c0;
    int32_t sums[2][2][ROWS][16] __attribute__((aligned(64))); /* two steps' lo and hi */
    __m512 acc[ROWS], lanes[8][ROWS], sumf[ROWS];
    for (int r = 0; r < ROWS; r++) sumf[r] = _mm512_setzero_ps();
    for (int b = 0; b < kblocks; b++) { /* the blocks' dw * dx, row r's on its tokens */
        __m512 kd = _mm512_maskz_loadu_ps(live, kd_at + (size_t)b * x->tokens);
        for (int r = 0; r < ROWS; r++) d[b][r] = _mm512_mul_ps(_mm512_set1_ps(fb[b].dw[r]), kd);
    }
    ISSUE(0, TILE_LO, TILE_HI);
    STORE(TILE_LO, TILE_HI, sums[0]);
    for (int s = 0; s < steps; s += 2) { /* steps is even */
        ISSUE(s + 1, TILE_LO2, TILE_HI2);
        step_floats(s, kblocks, (const __m512(*)[ROWS])d, sums[0], acc, lanes);
        if (has_min) min_steps(s, kblocks, fb, ybs, kd_at, (size_t)x->tokens, live, sumf);
        STORE(TILE_LO2, TILE_HI2, sums[1]);
        if (s + 2 < steps) ISSUE(s + 2, TILE_LO, TILE_HI);
        step_floats(s + 1, kblocks, (const __m512(*)[ROWS])d, sums[1], acc, lanes);
        if (has_min) min_steps(s + 1, kblocks, fb, ybs, kd_at, (size_t)x->tokens, live, sumf);
        if (s + 2 < steps) STORE(TILE_LO, TILE_HI, sums[0]);
    }
    for (int r = 0; r < ROWS; r++) lanes[7][r] = acc[r];
    for (int r = 0; r < m; r++) {
        for (int l = 0; l < 8; l++) sumf[r] = _mm512_add_ps(sumf[r], lanes[l][r]);
        _mm512_mask_storeu_ps(ct + (size_t)r * ldc + c0, live, sumf[r]);
    }
}

AMX static void kquant_tile(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
                            const em_q8_activations *x, float *ct, size_t ldc) {
    if (x->tokens <= EM_GGML_FEW_TOKENS) { /* avx512vnni's (4 tokens or fewer: avx2's) */
        em_ggml_kernel_avx512vnni.tile[type](w, row_bytes, rows, x, ct, ldc);
        return;
    }
    const em_ggml_k_layout L = em_ggml_k_layout_of(type);
    const int kblocks = x->kblocks, groups = (rows + ROWS - 1) / ROWS;
    folded_block *fb = em_xmalloc((size_t)groups * kblocks * sizeof *fb); /* [group][block] */
    char *d_bytes = em_xmalloc((size_t)kblocks * ROWS * sizeof(__m512) + 63);
    __m512(*d)[ROWS] = (__m512(*)[ROWS])(((uintptr_t)d_bytes + 63) & ~(uintptr_t)63);
    if (rows % ROWS) memset(&fb[(size_t)(groups - 1) * kblocks], 0, (size_t)kblocks * sizeof *fb);
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < kblocks; b++)
            fold_row(type, w + (size_t)r * row_bytes + (size_t)b * L.bytes, r % ROWS,
                     &fb[(size_t)(r / ROWS) * kblocks + b]);
    em_amx_tile_config cfg = {.palette = 1};
    const int c_tiles[] = {TILE_LO, TILE_HI, TILE_LO2, TILE_HI2};
    for (int i = 0; i < 4; i++) cfg.colsb[c_tiles[i]] = 64, cfg.rows[c_tiles[i]] = ROWS;
    cfg.colsb[TILE_A_LO] = cfg.colsb[TILE_A_HI] = LANE_VALUES;
    cfg.rows[TILE_A_LO] = cfg.rows[TILE_A_HI] = ROWS;
    cfg.colsb[TILE_B] = 64, cfg.rows[TILE_B] = LANE_VALUES / 4;
    _tile_loadconfig(&cfg);
    for (int c0 = 0; c0 < x->tokens; c0 += EM_GGML_LANES) {
        int n = x->tokens - c0 < EM_GGML_LANES ? x->tokens - c0 : EM_GGML_LANES;
        for (int g = 0; g < groups; g++)
            rows_times_group(L.dmin != 0, rows - g * ROWS < ROWS ? rows - g * ROWS : ROWS, x, c0, n,
                             &fb[(size_t)g * kblocks], d, ct + (size_t)g * ROWS * ldc, ldc);
    }
    _tile_release();
    free(fb);
    free(d_bytes);
}

#define AMX_KQUANT_TILE(name, column)                                                              \
    AMX void em_ggml_amx_##name(const uint8_t *w, size_t row_bytes, int rows,                      \
                                const em_q8_activations *x, float *ct, size_t ldc) {               \
        kquant_tile(column, w, row_bytes, rows, x, ct, ldc);                                       \
    }
AMX_KQUANT_TILE(q6_k, EM_GGML_DOT_Q6_K)
AMX_KQUANT_TILE(q3_k, EM_GGML_DOT_Q3_K)
AMX_KQUANT_TILE(q4_k, EM_GGML_DOT_Q4_K)
AMX_KQUANT_TILE(q5_k, EM_GGML_DOT_Q5_K)
#endif

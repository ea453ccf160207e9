/* The `ggml` precision's AMX kernel (see ggml_dot.h) for the 32-value block types (Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) and the K-quants with 8 lanes (ggml_dot_amx_kquants.c; the
 * other columns are empty: the next row that runs here takes them). Per
 * weight block and 16 rows x 16 tokens: an A tile of the 16 rows' 32 quants as signed bytes (the
 * nibbles unpacked, the stored offset subtracted; rows past the last are zeros; a group of 16 Q8_0
 * rows is read from the weights as they are), a B tile of the 16 tokens' 32 activations
 * (ggml_dot_lanes.h: 8 rows of 16 tokens' 4 bytes), and tdpbssd gives the 16 x 16 exact integer
 * block sums. Each row's block step then runs on its 16 token lanes in
 * the order of the C version, one IEEE rounding each, so each lane gets the C result's bits; the
 * rows' sums pass through ct between chunks of blocks. With 4 tokens or fewer (a decoding step)
 * the avx512vnni kernel's tiles run instead (they hand them on to avx2's). Linux grants a process
 * the AMX state on request (arch_prctl), asked once by runs_here; each tile call loads its tile
 * configuration (per thread) and releases it. */
#include "stages/kernels/cpu/ggml_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stages/kernels/cpu/ggml_dot_amx.h"
#include "stages/kernels/cpu/ggml_dot_lanes.h"
#include "stages/kernels/cpu/matmul.h"

#define AMX __attribute__((target(EM_AMX_TARGET)))
#define BLOCK_CHUNK 64  /* blocks whose A tiles are unpacked at once */
#define ROWS 16         /* rows per A tile */
#define PREFETCH_ROWS 2 /* rows ahead whose chunk unpack_rows prefetches (8 and 16 no faster) */
#define ROW_GROUPS (EM_MATMUL_TILE_ROWS / ROWS) /* A tiles of a tile's rows */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* tile registers (literals: the intrinsics paste them into the instruction) */
#define TILE_C 0
#define TILE_A 1
#define TILE_B 2

/* Each thread's A tiles of a tile's rows for a chunk of blocks, unpacked once and multiplied with
 * every group of 16 tokens (96 KiB, too much for an OpenMP thread's stack) */
static _Thread_local int8_t unpacked[ROW_GROUPS][BLOCK_CHUNK][ROWS][32]
    __attribute__((aligned(64)));
/* ... and their blocks' scale and minimum (Q4_1, Q5_1) as floats, read once with them */
static _Thread_local float block_scales[ROW_GROUPS][BLOCK_CHUNK][ROWS][2];

/* Q8_0's A tiles are its weights as they are: a whole group's 16 rows of a block are 32 bytes each,
 * row_bytes apart, as tileloadd reads them; only a group of fewer rows is copied (zeros past the
 * last row). Copying them too took half the time of a Q8_0 tile in a 16-sequence decoding step,
 * where each block meets only one group of tokens. */
static inline bool reads_weights(em_ggml_dot_type type, int m) {
    return type == EM_GGML_DOT_Q8_0 && m == ROWS;
}

/* The A tiles of rows w .. w + (m - 1) row_bytes, their blocks b0 .. b0 + nb - 1: a[b] the 16
 * rows' 32 quants of block b0 + b as signed bytes, rows past m zeros (not where the tiles read the
 * weights); dm[b][r] the block's scale and minimum (0 where the type has none) as floats. With
 * prefetch, each row's chunk asks for the chunk PREFETCH_ROWS rows on (see below). */
AMX static inline __attribute__((always_inline)) void
unpack_rows(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int m, int b0, int nb,
            bool prefetch, int8_t (*a)[ROWS][32], float (*dm)[ROWS][2]) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    const bool has_min = type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1;
    const size_t chunk_lines = ((size_t)nb * L.bytes + 63) / 64 + 1;
    for (int r = 0; r < m; r++) { /* each row's blocks in order */
        /* the chunk of the row PREFETCH_ROWS on: the hardware's prefetcher stops at each 4 KiB
         * page, so a row's first lines came at memory latency (a prefetch past the matrix never
         * faults). With the T2 hint, not T0 or T1: into L1 the prefetches waited for its few
         * line-fill buffers (36% of tile_q8_0's samples on the prefetch); 110M Q8_0 ggml, 16
         * sequences (which took this path then), Xeon: T0 676-689, T1 697-736, T2 751-761
         * tokens/s */
        const char *next =
            (const char *)(w + (size_t)(r + PREFETCH_ROWS) * row_bytes + (size_t)b0 * L.bytes);
        for (size_t l = 0; prefetch && l < chunk_lines; l++)
            _mm_prefetch(next + 64 * l, _MM_HINT_T2);
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = w + (size_t)r * row_bytes + (size_t)(b0 + b) * L.bytes;
            if (!reads_weights(type, m)) {
                __m256i q = em_ggml_block_quants(type, blk);
                if (L.offset) q = _mm256_sub_epi8(q, _mm256_set1_epi8((char)L.offset));
                _mm256_store_si256((__m256i *)a[b][r], q);
            }
            dm[b][r][0] = em_ggml_scale_at(type, blk);
            dm[b][r][1] = has_min ? em_ggml_half_at(blk + L.m) : 0.0f;
        }
    }
    for (int b = 0; b < nb && m < ROWS; b++) memset(a[b][m], 0, (size_t)(ROWS - m) * 32);
}

/* m rows (at w, row_bytes apart; their A tiles a and block scales dm from unpack_rows), their
 * blocks b0 .. b0 + nb - 1, times the group's B tiles yt, the sums of earlier chunks (b0 > 0) read
 * from out (row r at out + r ldc, tokens 0 .. n - 1) and the rows' sums there after. Each block
 * asks for its share of next's lines (ggml_dot_lanes.h), so that the memory brings the next A
 * tiles' weights while these tiles compute. */
AMX static inline __attribute__((always_inline)) void
rows_chunk(em_ggml_dot_type type, int m, const uint8_t *w, size_t row_bytes,
           const em_q8_activations *x, int c0, int n, int b0, int nb, const int8_t (*a)[ROWS][32],
           const float (*dm)[ROWS][2], const __m512i *yt, float *out, size_t ldc,
           em_ggml_prefetch next) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    const __mmask16 live = em_ggml_live_lanes(n);
    __m512 acc[ROWS];
    for (int r = 0; r < m; r++)
        acc[r] = b0 ? _mm512_maskz_loadu_ps(live, out + (size_t)r * ldc) : _mm512_setzero_ps();
    int32_t sums[ROWS][16] __attribute__((aligned(64)));
    for (int b = 0; b < nb; b++) {
        em_ggml_prefetch_step(&next);
        if (reads_weights(type, m))
            _tile_loadd(TILE_A, w + (size_t)(b0 + b) * L.bytes + L.qs, row_bytes);
        else
            _tile_loadd(TILE_A, a[b], 32);
        _tile_loadd(TILE_B, yt + 8 * b, 64);
        _tile_zero(TILE_C);
        _tile_dpbssd(TILE_C, TILE_A, TILE_B);
        _tile_stored(TILE_C, sums, 64);
        size_t at = (size_t)(b0 + b) * x->tokens + c0;
        __m512 dx = _mm512_maskz_loadu_ps(live, x->d + at), sx = _mm512_setzero_ps();
        if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
            sx = _mm512_maskz_loadu_ps(live, x->s + at);
        for (int r = 0; r < m; r++) {
            __m512 fsum = _mm512_cvtepi32_ps(_mm512_load_si512(sums[r]));
            __m512 step = em_ggml_block_step(type, fsum, _mm512_set1_ps(dm[b][r][0]), dx);
            if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
                step = _mm512_add_ps(step, _mm512_mul_ps(_mm512_set1_ps(dm[b][r][1]), sx));
            acc[r] = _mm512_add_ps(acc[r], step);
        }
    }
    for (int r = 0; r < m; r++) _mm512_mask_storeu_ps(out + (size_t)r * ldc, live, acc[r]);
}

/* Rows w .. (at most ROW_GROUPS x 16 of them) times every token of x into ct, a chunk of blocks at
 * a time. With more than one group of 16 tokens, the chunk's A tiles are unpacked once, then
 * multiplied with each group's B tiles. With one group (a decoding step of 5 to 16 sequences) each
 * A tile meets one B tile: per group of 16 rows, unpacked and multiplied while the next group's
 * weights come (a thread's guided tiles are neighbours, so past the tile's last row comes its next
 * tile's first). Such products wait on the weights, and computing one group's tiles while the
 * memory streams the next group's beats reading them and multiplying them in turns. Xeon, 2
 * threads, 16 sequences decoded together in ggml, the two builds in turns: 110M Q8_0 686-703 ->
 * 739-771 generated tokens/s, SmolLM2-135M Q4_1 548-569 -> 613-625 (8 sequences: 356-363 ->
 * 403-413). Asking for the next group's lines from unpack_rows as well, for every second or fourth
 * line only, two groups ahead, or all within the first half of the blocks was slower. */
AMX static inline __attribute__((always_inline)) void
row_groups(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
           const em_q8_activations *x, float *ct, size_t ldc) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    for (int b0 = 0; b0 < x->blocks; b0 += BLOCK_CHUNK) {
        int nb = x->blocks - b0 < BLOCK_CHUNK ? x->blocks - b0 : BLOCK_CHUNK;
        if (x->tokens <= EM_GGML_LANES) {
            for (int r0 = 0; r0 < rows; r0 += ROWS) {
                int m = rows - r0 < ROWS ? rows - r0 : ROWS;
                const uint8_t *next =
                    em_ggml_next_rows(w, row_bytes, rows, r0, ROWS, b0, nb, x->blocks, L.bytes);
                unpack_rows(type, w + (size_t)r0 * row_bytes, row_bytes, m, b0, nb, false,
                            unpacked[0], block_scales[0]);
                rows_chunk(type, m, w + (size_t)r0 * row_bytes, row_bytes, x, 0, x->tokens, b0, nb,
                           (const int8_t(*)[ROWS][32])unpacked[0],
                           (const float(*)[ROWS][2])block_scales[0], em_ggml_lanes_at(x, 0, b0),
                           ct + (size_t)r0 * ldc, ldc,
                           em_ggml_prefetch_start(next, row_bytes, ROWS, nb, L.bytes));
            }
            continue;
        }
        for (int r0 = 0, g = 0; r0 < rows; r0 += ROWS, g++)
            unpack_rows(type, w + (size_t)r0 * row_bytes, row_bytes,
                        rows - r0 < ROWS ? rows - r0 : ROWS, b0, nb, true, unpacked[g],
                        block_scales[g]);
        for (int c0 = 0; c0 < x->tokens; c0 += EM_GGML_LANES) {
            int n = x->tokens - c0 < EM_GGML_LANES ? x->tokens - c0 : EM_GGML_LANES;
            const __m512i *yt = em_ggml_lanes_at(x, c0, b0);
            for (int r0 = 0, g = 0; r0 < rows; r0 += ROWS, g++)
                rows_chunk(type, rows - r0 < ROWS ? rows - r0 : ROWS, w + (size_t)r0 * row_bytes,
                           row_bytes, x, c0, n, b0, nb, (const int8_t(*)[ROWS][32])unpacked[g],
                           (const float(*)[ROWS][2])block_scales[g], yt, ct + (size_t)r0 * ldc + c0,
                           ldc, em_ggml_prefetch_start(NULL, row_bytes, ROWS, nb, L.bytes));
        }
    }
}

#define AMX_TILE(name, column)                                                                     \
    AMX static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                      \
                                const em_q8_activations *x, float *ct, size_t ldc) {               \
        const em_ggml_dot_type type = column;                                                      \
        if (x->tokens <= EM_GGML_ROW_LANE_TOKENS) {                                                \
            em_ggml_kernel_avx512vnni.tile[type](w, row_bytes, rows, x, ct, ldc);                  \
            return;                                                                                \
        }                                                                                          \
        em_amx_tile_config cfg = {.palette = 1}; /* C 16 x 16 int32, A 16 x 32 bytes, B 8 x 64 */  \
        cfg.colsb[TILE_C] = 64, cfg.rows[TILE_C] = ROWS;                                           \
        cfg.colsb[TILE_A] = 32, cfg.rows[TILE_A] = ROWS;                                           \
        cfg.colsb[TILE_B] = 64, cfg.rows[TILE_B] = 8;                                              \
        _tile_loadconfig(&cfg);                                                                    \
        const int most = ROW_GROUPS * ROWS;                                                        \
        for (int r0 = 0; r0 < rows; r0 += most)                                                    \
            row_groups(type, w + (size_t)r0 * row_bytes, row_bytes,                                \
                       rows - r0 < most ? rows - r0 : most, x, ct + (size_t)r0 * ldc, ldc);        \
        _tile_release();                                                                           \
    }
AMX_TILE(q8_0, EM_GGML_DOT_Q8_0)
AMX_TILE(q4_0, EM_GGML_DOT_Q4_0)
AMX_TILE(q4_1, EM_GGML_DOT_Q4_1)
AMX_TILE(q5_0, EM_GGML_DOT_Q5_0)
AMX_TILE(q5_1, EM_GGML_DOT_Q5_1)
AMX_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
AMX_TILE(mxfp4, EM_GGML_DOT_MXFP4)

static bool amx_granted;
static pthread_once_t amx_asked = PTHREAD_ONCE_INIT;

/* AMX-INT8 on the CPU, the avx512vnni row (its small tiles and the token lanes) too, and Linux's
 * permission for the tile data. */
static void ask_amx(void) {
    amx_granted = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
                  em_ggml_kernel_avx512vnni.runs_here() &&
                  syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

static bool has_amx(void) {
    pthread_once(&amx_asked, ask_amx);
    return amx_granted;
}

const em_ggml_kernel em_ggml_kernel_amx = {
    .name = "amx",
    .runs_here = has_amx,
    .prepare = em_ggml_fill_token_lanes,
    .prepare_k = em_ggml_fill_k_lanes,
    .tile = {[EM_GGML_DOT_Q6_K] = em_ggml_amx_q6_k,
             [EM_GGML_DOT_Q3_K] = em_ggml_amx_q3_k,
             [EM_GGML_DOT_Q4_K] = em_ggml_amx_q4_k,
             [EM_GGML_DOT_Q5_K] = em_ggml_amx_q5_k,
             [EM_GGML_DOT_Q8_0] = tile_q8_0,
             [EM_GGML_DOT_Q4_0] = tile_q4_0,
             [EM_GGML_DOT_Q4_1] = tile_q4_1,
             [EM_GGML_DOT_Q5_0] = tile_q5_0,
             [EM_GGML_DOT_Q5_1] = tile_q5_1,
             [EM_GGML_DOT_IQ4_NL] = tile_iq4_nl,
             [EM_GGML_DOT_MXFP4] = tile_mxfp4},
    /* the K-quant tiles read Q4_K's byte lanes, and hand products of EM_GGML_FEW_TOKENS tokens
     * or fewer to avx512vnni's, which read Q6_K's word lanes (ggml_dot_amx_kquants.c) */
    .reads = {[EM_GGML_DOT_Q6_K] = EM_GGML_READS_Q4K_LANES | EM_GGML_READS_Q6K_LANES_FEW,
              [EM_GGML_DOT_Q3_K] = EM_GGML_READS_Q4K_LANES | EM_GGML_READS_Q6K_LANES_FEW},
};
#endif

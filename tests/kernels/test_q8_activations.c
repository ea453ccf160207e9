/* The ggml precision's 8-bit rounding of activations (stages/kernels/cpu/q8_activations.h): the
 * AVX-512 rounding, 16 tokens a vector, against the C one, bit for bit, in both forms (32-value
 * Q8_0/Q8_1 blocks and 256-value Q8_K ones): every quant, scale and sum of tokens 1 to 37 (a
 * ragged last panel, padding tokens), on random activations of every magnitude with exact halves
 * (x * id = k + 0.5, where roundf and nearest_int part ways), all-zero blocks, one-value blocks,
 * denormals, and values of equal magnitude and opposite signs (Q8_K keeps the first). Also one
 * known block by hand. A CPU without AVX-512 F and BW skips the comparison with a message. The
 * F16 form (check_f16_form) likewise, F16C against C. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/q8_activations.h"
#include "test.h"

#define K 512 /* two Q8_K blocks, sixteen Q8_0 ones */

static uint32_t seed = 7;

static uint32_t random_u32(void) {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
}

/* Value j of token t: a mix of the cases above, decided by the block and the token. */
static float value(int t, int j) {
    int block = j / 32, kind = (t * 7 + block) % 6;
    float r = (float)((int)(random_u32() % 2001) - 1000) / 1000.0f; /* [-1, 1] */
    switch (kind) {
    case 0:
        return 0.0f; /* an all-zero block */
    case 1:
        return j % 32 == 5 ? -3.25f : 0.0f; /* one value */
    case 2:
        return j % 32 == 0 ? 127.0f : (float)((int)(random_u32() % 255) - 127) * 0.5f;
    case 3:
        return r * 1e-40f; /* denormals */
    case 4:
        return j % 2 ? r * 8.0f : -r * 8.0f; /* equal magnitudes, both signs */
    default:
        return r * powf(2.0f, (float)(t % 40) - 20); /* every magnitude */
    }
}

/* x (T, K) packed as GEMM panels into xp. */
static void pack(int T, float *x, float *xp) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) x[(size_t)t * K + j] = value(t, j);
    for (int p = 0; p < em_gemm_panel_count(T); p++) em_gemm_pack_panel(x, K, T, K, p, xp);
}

/* Whether both forms of a and b agree for every one of their (padded) tokens. */
static bool same(const em_q8_activations *a, const em_q8_activations *b) {
    size_t n = (size_t)a->blocks * a->tokens, nk = (size_t)a->kblocks * a->tokens;
    return a->tokens == b->tokens && memcmp(a->qs, b->qs, n * EM_Q8_BLOCK) == 0 &&
           memcmp(a->d, b->d, n * sizeof(float)) == 0 &&
           memcmp(a->s, b->s, n * sizeof(float)) == 0 &&
           memcmp(a->sum, b->sum, n * sizeof(int32_t)) == 0 &&
           memcmp(a->kqs, b->kqs, nk * EM_Q8K_BLOCK) == 0 &&
           memcmp(a->kd, b->kd, nk * sizeof(float)) == 0 &&
           memcmp(a->kbsums, b->kbsums, nk * 16 * sizeof(int16_t)) == 0;
}

/* A block by hand: amax 127 gives d = 1, so the quants are roundf of the values themselves. */
static void check_known_block(void) {
    float x[K] = {0}, xp[K]; /* one token: a narrow panel, x itself */
    const float v[6] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 3.49f};
    memcpy(x, v, sizeof v);
    em_gemm_pack_panel(x, K, 1, K, 0, xp);
    em_q8_activations q = {0};
    CHECK(em_q8_reserve(&q, 1, K) == NULL);
    em_q8_quantize_as(em_gemm_packed(xp, 1, K), 1, K, 1, false, &q);
    const int8_t want[6] = {127, 3, -3, 1, -1, 3};
    CHECK(memcmp(q.qs, want, sizeof want) == 0);
    CHECK(q.d[0] == 1.0f);
    CHECK_INT_EQ(q.sum[0], 127 + 3 - 3 + 1 - 1 + 3);
    em_q8k_quantize_as(em_gemm_packed(xp, 1, K), 1, K, 1, false, &q);
    /* Q8_K: iscale = -127 / 127 = -1, nearest_int halves to even: -2.5 -> 2, 0.5 -> -0 */
    const int8_t want_k[6] = {-127, -2, 2, 0, 0, -3};
    CHECK(memcmp(q.kqs, want_k, sizeof want_k) == 0);
    CHECK(q.kd[0] == -1.0f);
    printf("known block: roundf %d %d %d %d, nearest_int %d %d %d %d\n", q.qs[1], q.qs[2], q.qs[3],
           q.qs[4], q.kqs[1], q.kqs[2], q.kqs[3], q.kqs[4]);
    em_q8_activations_free(&q);
}

/* The F16 form (em_f16_round): hand-picked roundings (ties to even, the largest half, overflow to
 * infinity, the smallest subnormal, a NaN made quiet), then F16C's rounding against C's, bit for
 * bit, on every magnitude (halves' ties, subnormals, infinities, NaNs with payloads), 37 values a
 * token (zeros to 48), 1, 5 and 17 tokens (a narrow panel; panels with padding tokens). */
static void check_f16_form(void) {
    const float hand[][2] = {
        {1.0f + 0x1p-11f, 1.0f},             /* a tie: to the even 1 */
        {1.0f + 0x1.8p-10f, 1.0f + 0x1p-9f}, /* a tie: to the even 1 + 2^-9 */
        {65519.0f, 65504.0f},                /* below the tie with infinity */
        {65520.0f, INFINITY},
        {-0x1p-24f, -0x1p-24f}, /* the smallest subnormal */
        {0x1p-25f, 0.0f},       /* a tie with 0: to the even 0 */
        {0x1.8p-24f, 0x1p-23f}, /* a tie between subnormals: to the even 2^-23 */
    };
    const int H = (int)(sizeof hand / sizeof *hand);
    float xp[16];
    for (int j = 0; j < H; j++) xp[j] = hand[j][0]; /* one token: a narrow panel, x itself */
    em_q8_activations q = {0};
    CHECK(em_q8_reserve_f16(&q, 1, H) == NULL);
    em_f16_round_as(em_gemm_packed(xp, 1, H), 1, H, 1, false, &q);
    CHECK_INT_EQ(q.hstride, 16);
    for (int j = 0; j < H; j++) CHECK(memcmp(&q.h[j], &hand[j][1], sizeof(float)) == 0);
    for (int j = H; j < 16; j++) CHECK(q.h[j] == 0.0f);
    em_q8_activations_free(&q);
    if (!em_f16c_runs_here()) {
        printf("F16C rounding: this CPU has no F16C, skipped\n");
        return;
    }
    const int width = 37;
    for (int T = 1; T <= 17; T += T < 5 ? 4 : 12) {
        float *x = malloc((size_t)T * width * sizeof *x);
        float *packed = calloc(em_gemm_packed_floats(T, width), sizeof *packed);
        for (int i = 0; i < T * width; i++) {
            uint32_t bits = random_u32() << 8 | (random_u32() & 0xff);
            if (i % 5 == 1)
                bits = (bits & 0x80000000u) | (bits % 31 + 103) << 23 | 0x1000u; /* ties */
            memcpy(&x[i], &bits, 4);
        }
        for (int p = 0; p < em_gemm_panel_count(T); p++)
            em_gemm_pack_panel(x, width, T, width, p, packed);
        em_q8_activations c = {0}, v = {0};
        CHECK(em_q8_reserve_f16(&c, T, width) == NULL);
        CHECK(em_q8_reserve_f16(&v, T, width) == NULL);
        em_f16_round_as(em_gemm_packed(packed, T, width), T, width, 2, false, &c);
        em_f16_round_as(em_gemm_packed(packed, T, width), T, width, 2, true, &v);
        bool ok = c.tokens == v.tokens &&
                  memcmp(c.h, v.h, (size_t)c.tokens * c.hstride * sizeof(float)) == 0;
        CHECK(ok);
        printf("F16 form, T %2d: F16C rounding %s\n", T, ok ? "bit-identical to C" : "DIFFERENT");
        em_q8_activations_free(&c);
        em_q8_activations_free(&v);
        free(packed);
        free(x);
    }
}

int main(void) {
    check_known_block();
    check_f16_form();
    if (!em_q8_avx512_runs_here()) {
        printf("AVX-512 rounding: this CPU has no AVX-512 F and BW, skipped\n");
        return test_finish();
    }
    static const int Ts[] = {1, 3, 4, 15, 16, 17, 31, 37};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
        int T = Ts[i]; /* T <= 4: one narrow panel of T tokens (gemm.h) */
        float *x = malloc((size_t)T * K * sizeof *x);
        float *xp =
            malloc((size_t)em_gemm_panel_count(T) * em_gemm_panel_width(T) * K * sizeof *xp);
        pack(T, x, xp);
        em_q8_activations c = {0}, v = {0};
        CHECK(em_q8_reserve(&c, T, K) == NULL);
        CHECK(em_q8_reserve(&v, T, K) == NULL);
        memset(c.qs, 0x55, c.capacity * EM_Q8_BLOCK);
        memset(v.qs, 0x2a, v.capacity * EM_Q8_BLOCK);
        for (int threads = 1; threads <= 2; threads++) {
            em_gemm_panels panels = em_gemm_packed(xp, T, K);
            em_q8_quantize_as(panels, T, K, threads, false, &c);
            em_q8k_quantize_as(panels, T, K, threads, false, &c);
            em_q8_quantize_as(panels, T, K, threads, true, &v);
            em_q8k_quantize_as(panels, T, K, threads, true, &v);
            bool ok = same(&c, &v);
            CHECK(ok);
            printf("T %2d, %d thread%s: AVX-512 rounding %s\n", T, threads, threads > 1 ? "s" : "",
                   ok ? "bit-identical to C" : "DIFFERENT");
        }
        em_q8_activations_free(&c);
        em_q8_activations_free(&v);
        free(x);
        free(xp);
    }
    return test_finish();
}

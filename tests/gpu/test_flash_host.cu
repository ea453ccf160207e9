/* The host side of the tensor-core attention (stages/kernels/cuda/attention_flash.cuh), run on the
 * CPU (no GPU needed: runs in .ci/run):
 *  - the tile plan: every row of every window in exactly one tile, tiles relative to their
 *    window's start (the same for a window alone and in a batch), longest first; bad offsets;
 *  - the key-block range and the per-warp block visibility against brute force over every
 *    (query, key) pair, for causal and sliding windows;
 *  - the per-element helpers (score with softcap against the CPU's em_softcap, rescale and
 *    probabilities at -inf);
 *  - the kernel's algorithm emulated on the host with those helpers (tiles of 64 queries, warps of
 *    16, key blocks of 64, BF16 inputs and probabilities, online softmax) against the CPU's
 *    em_attention (FP32) on windows of 1, 17, 64 and 200 positions, GQA and plain heads, with and
 *    without softcap and sliding window, within the BF16 tolerance below;
 *  - the tiles of windows after kept rows (decoding): each window's rows covered once, and the
 *    emulation on them, keys from each sequence's slot, bit-identical to the whole sequence's.
 * The table of attention kernels: which row each mode and shape gets. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/attention_flash.cuh"
#include "stages/kernels/cuda/attention_table.cuh"
extern "C" {
#include "stages/kernels/cpu/attention.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/softcap.h"
#include "test.h"
}

/* The emulation rounds q, k, v and the probabilities to BF16 as the kernel does; em_attention
 * keeps FP32. With |v| < 1 the difference stays well inside this (measured: a few 1e-3). */
#define BF16_TOLERANCE 1e-2

static float bf16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

static void check_plan(void) {
    int32_t offsets[] = {0, 1, 18, 82, 282, 1282}; /* windows of 1, 17, 64, 200 and 1000 */
    int count = 5;
    int64_t n = em_flash_tile_count(offsets, count);
    CHECK_INT_EQ(n, 1 + 1 + 1 + 4 + 16);
    em_flash_tile *tiles = (em_flash_tile *)malloc((size_t)n * sizeof *tiles);
    em_flash_plan(offsets, count, tiles);
    int covered[1282] = {0};
    for (int64_t i = 0; i < n; i++) {
        const em_flash_tile *t = &tiles[i];
        int w = 0;
        while (w < count && offsets[w] != t->start) w++;
        CHECK(w < count);
        if (w == count) continue;
        CHECK_INT_EQ(t->len, offsets[w + 1] - offsets[w]);
        CHECK_INT_EQ(t->q0 % EM_FLASH_QUERY_TILE, 0);
        CHECK(t->q0 >= 0 && t->q0 < t->len);
        for (int q = t->q0; q < t->len && q < t->q0 + EM_FLASH_QUERY_TILE; q++)
            covered[t->start + q]++;
        if (i > 0) { /* longest first: the keys walked never grow */
            const em_flash_tile *p = &tiles[i - 1];
            int keys_prev =
                p->len < p->q0 + EM_FLASH_QUERY_TILE ? p->len : p->q0 + EM_FLASH_QUERY_TILE;
            int keys = t->len < t->q0 + EM_FLASH_QUERY_TILE ? t->len : t->q0 + EM_FLASH_QUERY_TILE;
            CHECK(keys_prev >= keys);
        }
    }
    int bad = 0;
    for (int r = 0; r < 1282; r++) bad += covered[r] != 1;
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(tiles[0].start, 282); /* the 1000-row window's last tile walks the most keys */
    CHECK_INT_EQ(tiles[0].q0, 960);

    /* the 200-row window alone: the same (len, q0) tiles as in the batch */
    int32_t alone[] = {0, 200};
    em_flash_tile mine[4];
    CHECK_INT_EQ(em_flash_tile_count(alone, 1), 4);
    em_flash_plan(alone, 1, mine);
    for (int i = 0; i < 4; i++) {
        int found = 0;
        for (int64_t j = 0; j < n; j++)
            found +=
                tiles[j].start == 82 && tiles[j].len == mine[i].len && tiles[j].q0 == mine[i].q0;
        CHECK_INT_EQ(found, 1);
        CHECK_INT_EQ(mine[i].start, 0);
    }
    free(tiles);

    int32_t empty_first[] = {0, 0, 10}, not_from_zero[] = {1, 5}, decreasing[] = {0, 5, 3};
    CHECK_INT_EQ(em_flash_tile_count(empty_first, 2), 1);
    em_flash_tile one;
    em_flash_plan(empty_first, 2, &one);
    CHECK(one.start == 0 && one.len == 10 && one.q0 == 0);
    CHECK_INT_EQ(em_flash_tile_count(not_from_zero, 1), -1);
    CHECK_INT_EQ(em_flash_tile_count(decreasing, 2), -1);
    CHECK_INT_EQ(em_flash_tile_count(offsets, 0), 0);
}

/* Block ranges and visibility against every (query, key) pair. */
static void check_blocks(void) {
    int windows[] = {0, 1, 3, 16, 64, 65, 100, 300};
    int errors = 0;
    for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++) {
        int window = windows[wi];
        for (int first = 0; first < 400; first += 16) {
            int last = first + 15;
            int begin, end;
            em_flash_key_blocks(first, last, window, &begin, &end);
            for (int b = 0; b * EM_FLASH_KEY_BLOCK <= last + 64; b++) {
                int k0 = b * EM_FLASH_KEY_BLOCK, k1 = k0 + EM_FLASH_KEY_BLOCK - 1;
                bool any = false;
                for (int q = first; q <= last; q++)
                    for (int key = k0; key <= k1; key++)
                        any = any || em_flash_key_visible(q, key, window);
                errors += any != em_flash_block_visible(first, last, k0, k1, window);
                errors += any && (b < begin || b >= end); /* a visible block outside the walk */
            }
        }
    }
    CHECK_INT_EQ(errors, 0);
    CHECK(em_flash_key_visible(5, 5, 0) && !em_flash_key_visible(5, 6, 0));
    CHECK(em_flash_key_visible(5, 3, 3) && !em_flash_key_visible(5, 2, 3));
}

static void check_helpers(void) {
    CHECK(em_flash_rescale(-INFINITY, -INFINITY) == 1.0f);
    CHECK(em_flash_rescale(-INFINITY, 0.5f) == 0.0f);
    CHECK(em_flash_rescale(2.0f, 2.0f) == 1.0f);
    CHECK(fabsf(em_flash_rescale(0.0f, 1.0f) - expf(-1.0f)) == 0.0f);
    CHECK(em_flash_probability(0.3f, -INFINITY, false) == 0.0f);
    CHECK(em_flash_probability(1.0f, 1.0f, true) == 1.0f);
    int errors = 0;
    for (int i = -400; i <= 400; i++) {
        float dot = (float)i * 0.37f, scale = 0.125f, cap = 5.0f;
        float want = dot * scale;
        em_softcap(&want, 1, cap);
        errors += em_flash_score(dot, scale, cap) != want;
        errors += em_flash_score(dot, scale, 0.0f) != dot * scale;
    }
    CHECK_INT_EQ(errors, 0);
}

/* The kernel's algorithm on the host for one window: att (T, H*hd). */
/* One CTA's work for every head, emulated: tile t's queries, window position p at row
 * t->start + p of q and att, against keys k, v (rows of KV*hd floats from the window's key 0). */
static void emulate_tile(const em_flash_tile *t, const float *q, const float *k, const float *v,
                         int H, int KV, int hd, const em_cuda_mask *mask, float *att) {
    int QD = H * hd, KVD = KV * hd, BN = EM_FLASH_KEY_BLOCK;
    float *o = (float *)malloc((size_t)hd * sizeof *o);
    float *s = (float *)malloc((size_t)BN * sizeof *s);
    int rows = t->len - t->q0 < EM_FLASH_QUERY_TILE ? t->len - t->q0 : EM_FLASH_QUERY_TILE;
    int begin, end;
    em_flash_key_blocks(t->q0, t->q0 + rows - 1, mask->window, &begin, &end);
    for (int h = 0; h < H; h++) {
        int g = h / (H / KV);
        for (int wf = t->q0; wf < t->q0 + rows; wf += 16) { /* a warp's rows */
            int wl = wf + 15 < t->len - 1 ? wf + 15 : t->len - 1;
            for (int i = wf; i <= wl; i++) {
                const float *qi = q + (size_t)(t->start + i) * QD + h * hd;
                float m = -INFINITY, l = 0.0f;
                memset(o, 0, (size_t)hd * sizeof *o);
                for (int b = begin; b < end; b++) {
                    int key0 = b * BN;
                    if (!em_flash_block_visible(wf, wl, key0, key0 + BN - 1, mask->window))
                        continue;
                    float bmax = -INFINITY;
                    for (int c = 0; c < BN; c++) {
                        int j = key0 + c;
                        bool vis = em_flash_key_visible(i, j, mask->window);
                        float dot = 0.0f;
                        for (int d = 0; vis && d < hd; d++)
                            dot += bf16(qi[d]) * bf16(k[(size_t)j * KVD + g * hd + d]);
                        s[c] = vis ? em_flash_score(dot, mask->scale, mask->softcap) : -INFINITY;
                        bmax = fmaxf(bmax, s[c]);
                    }
                    float m_new = fmaxf(m, bmax), corr = em_flash_rescale(m, m_new);
                    float sum = 0.0f;
                    for (int d = 0; d < hd; d++) o[d] *= corr;
                    for (int c = 0; c < BN; c++) {
                        int j = key0 + c;
                        bool vis = em_flash_key_visible(i, j, mask->window);
                        float p = bf16(em_flash_probability(s[c], m_new, vis));
                        sum += p;
                        for (int d = 0; p != 0.0f && d < hd; d++)
                            o[d] += p * bf16(v[(size_t)j * KVD + g * hd + d]);
                    }
                    l = l * corr + sum;
                    m = m_new;
                }
                float *out = att + (size_t)(t->start + i) * QD + h * hd;
                for (int d = 0; d < hd; d++) out[d] = o[d] / l;
            }
        }
    }
    free(o);
    free(s);
}

/* The kernel over one window of T positions, emulated tile by tile as em_flash_plan lays it. */
static void emulate(const float *q, const float *k, const float *v, int T, int H, int KV, int hd,
                    const em_cuda_mask *mask, float *att) {
    int32_t offsets[2] = {0, T};
    int64_t n = em_flash_tile_count(offsets, 1);
    em_flash_tile *tiles = (em_flash_tile *)malloc((size_t)n * sizeof *tiles);
    em_flash_plan(offsets, 1, tiles);
    for (int64_t i = 0; i < n; i++) emulate_tile(&tiles[i], q, k, v, H, KV, hd, mask, att);
    free(tiles);
}

/* em_attention (the CPU path) into a row-major att (T, H*hd). */
static void cpu_attention(const float *q, const float *k, const float *v, int T, int H, int KV,
                          int hd, const em_cuda_mask *mask, float *att) {
    int QD = H * hd;
    em_scratch s;
    em_status err = em_scratch_init(&s, 1);
    if (!err) err = em_scratch_reserve(&s, em_attention_scratch_floats(T, hd), 0);
    CHECK(err == NULL);
    if (err) return;
    float *vt = (float *)calloc(em_attention_vt_floats(T, KV, hd), sizeof(float));
    float *packed = (float *)calloc(em_gemm_packed_floats(T, QD), sizeof(float));
    em_attention_mask m = {mask->scale, mask->softcap, mask->window};
    int32_t rows[2] = {0, T};
    em_segments one = {1, rows};
    em_attention(q, k, v, &one, H, KV, hd, &m, packed, vt, &s);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < QD; c++) att[(size_t)t * QD + c] = packed[em_gemm_packed_index(T, QD, t, c)];
    free(vt);
    free(packed);
    em_scratch_free(&s);
}

static void fill(float *x, size_t n, uint32_t seed, float bound) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) * 0x1p-24f * 2.0f - 1.0f) * bound;
    }
}

static void check_emulation(int T, int H, int KV, int hd, em_cuda_mask mask) {
    size_t QD = (size_t)H * hd, KVD = (size_t)KV * hd;
    float *q = (float *)malloc(T * QD * 4), *k = (float *)malloc(T * KVD * 4);
    float *v = (float *)malloc(T * KVD * 4);
    float *want = (float *)malloc(T * QD * 4), *got = (float *)malloc(T * QD * 4);
    fill(q, T * QD, 1u + (uint32_t)T, 2.0f); /* scores of several units: softcap matters */
    fill(k, T * KVD, 2u + (uint32_t)hd, 2.0f);
    fill(v, T * KVD, 3u + (uint32_t)H, 1.0f);
    cpu_attention(q, k, v, T, H, KV, hd, &mask, want);
    emulate(q, k, v, T, H, KV, hd, &mask, got);
    double worst = 0.0;
    for (size_t i = 0; i < T * QD; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst || d != d ? d : worst;
    }
    printf("T %4d H %d/%d hd %3d scale %.3f softcap %4.1f window %3d: max |emulated - cpu| %.2e\n",
           T, H, KV, hd, mask.scale, mask.softcap, mask.window, worst);
    CHECK(worst <= BF16_TOLERANCE);
    free(q);
    free(k);
    free(v);
    free(want);
    free(got);
}

/* Windows after kept rows (decoding's cache): two sequences of L0 and L1 positions whose last
 * n0 and n1 positions are a batch's rows (window 0 in slot 1, window 1 in slot 0). Their tiles
 * (em_flash_plan_kept) cover each window's rows once, with the sequence's length and start; and
 * the kernel emulated on them, keys read from each sequence's slot, gives every row the bits the
 * whole sequence's emulation gives it (a row's numbers do not depend on its tile). */
static void check_kept(int L0, int n0, int L1, int n1, int H, int KV, int hd, em_cuda_mask mask) {
    size_t QD = (size_t)H * hd, KVD = (size_t)KV * hd;
    int L[2] = {L0, L1}, n[2] = {n0, n1};
    float *q[2], *k[2], *v[2], *whole[2];
    for (int s = 0; s < 2; s++) {
        q[s] = (float *)malloc(L[s] * QD * 4);
        k[s] = (float *)malloc(L[s] * KVD * 4);
        v[s] = (float *)malloc(L[s] * KVD * 4);
        whole[s] = (float *)malloc(L[s] * QD * 4);
        fill(q[s], L[s] * QD, 11u + (uint32_t)s, 2.0f);
        fill(k[s], L[s] * KVD, 13u + (uint32_t)s, 2.0f);
        fill(v[s], L[s] * KVD, 17u + (uint32_t)s, 1.0f);
        emulate(q[s], k[s], v[s], L[s], H, KV, hd, &mask, whole[s]);
    }
    int32_t offsets[3] = {0, n0, n0 + n1}, before[2] = {L0 - n0, L1 - n1}, slot[2] = {1, 0};
    float *qb = (float *)malloc((size_t)(n0 + n1) * QD * 4);
    float *att = (float *)malloc((size_t)(n0 + n1) * QD * 4);
    for (int w = 0; w < 2; w++)
        memcpy(qb + (size_t)offsets[w] * QD, q[w] + (size_t)before[w] * QD, n[w] * QD * 4);
    int64_t count = em_flash_kept_tile_count(offsets, before, 2);
    CHECK_INT_EQ(count, (n0 + EM_FLASH_QUERY_TILE - 1) / EM_FLASH_QUERY_TILE +
                            (n1 + EM_FLASH_QUERY_TILE - 1) / EM_FLASH_QUERY_TILE);
    em_flash_tile *tiles = (em_flash_tile *)malloc((size_t)count * sizeof *tiles);
    em_flash_plan_kept(offsets, before, slot, 2, tiles);
    int *covered = (int *)calloc((size_t)(n0 + n1), sizeof *covered);
    for (int64_t i = 0; i < count; i++) {
        const em_flash_tile *t = &tiles[i];
        int w = t->slot == 1 ? 0 : 1; /* the slot names the sequence */
        CHECK_INT_EQ(t->len, L[w]);
        CHECK_INT_EQ(t->start, offsets[w] - before[w]);
        CHECK(t->q0 >= before[w] && t->q0 < t->len && (t->q0 - before[w]) % 64 == 0);
        for (int p = t->q0; p < t->len && p < t->q0 + EM_FLASH_QUERY_TILE; p++)
            covered[t->start + p]++;
        emulate_tile(t, qb, k[w], v[w], H, KV, hd, &mask, att);
    }
    int bad = 0, differ = 0;
    for (int r = 0; r < n0 + n1; r++) bad += covered[r] != 1;
    for (int w = 0; w < 2; w++)
        differ += memcmp(att + (size_t)offsets[w] * QD, whole[w] + (size_t)before[w] * QD,
                         n[w] * QD * 4) != 0;
    printf("kept rows: sequences of %d and %d positions, last %d and %d in the batch, window %d: "
           "%lld tiles, %d rows not covered once, %d windows differing from the whole sequence\n",
           L0, L1, n0, n1, mask.window, (long long)count, bad, differ);
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(differ, 0);
    int32_t negative[2] = {-1, 0};
    CHECK_INT_EQ(em_flash_kept_tile_count(offsets, negative, 2), -1);
    for (int s = 0; s < 2; s++) {
        free(q[s]);
        free(k[s]);
        free(v[s]);
        free(whole[s]);
    }
    free(qb);
    free(att);
    free(tiles);
    free(covered);
}

static void check_table(void) {
    em_cuda_attention_shape llama = {32, 8, 128}, odd = {8, 8, 96}, big = {8, 8, 512};
    const em_cuda_attention_kernel *a = em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_HALF, &llama);
    const em_cuda_attention_kernel *b = em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_FP32, &llama);
    const em_cuda_attention_kernel *c = em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_HALF, &odd);
    CHECK(a && a->supports == em_flash_supports);
    CHECK(b && b->supports != em_flash_supports && (b->modes & EM_CUDA_COMPUTE_FP32));
    CHECK(c == b); /* head_dim 96: the FP32 kernel serves BF16 forwards too */
    CHECK(em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_HALF, &big) == NULL);
    CHECK(em_cuda_compute_of(CUDA_R_32F) == EM_CUDA_COMPUTE_FP32);
    CHECK(em_cuda_compute_of(CUDA_R_16BF) == EM_CUDA_COMPUTE_HALF);
    CHECK(em_cuda_compute_of(CUDA_R_16F) == EM_CUDA_COMPUTE_HALF);
    em_cuda_attention_shape gqa_bad = {6, 4, 64};
    CHECK(!em_flash_supports(&gqa_bad));
}

int main(void) {
    check_plan();
    check_blocks();
    check_helpers();
    check_table();
    int lens[] = {1, 17, 64, 200};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        int T = lens[i];
        check_emulation(T, 4, 2, 64, em_cuda_mask{0.125f, 0.0f, 0});
        check_emulation(T, 2, 2, 128, em_cuda_mask{1.0f / sqrtf(128.0f), 0.0f, 0});
        check_emulation(T, 4, 2, 64, em_cuda_mask{0.125f, 2.0f, 0});
        check_emulation(T, 4, 2, 64, em_cuda_mask{0.125f, 0.0f, 20});
        check_emulation(T, 2, 2, 128, em_cuda_mask{1.0f / sqrtf(128.0f), 3.0f, 70});
    }
    check_kept(130, 1, 7, 1, 4, 2, 64, em_cuda_mask{0.125f, 0.0f, 0});    /* decoding steps */
    check_kept(200, 70, 65, 65, 4, 2, 64, em_cuda_mask{0.125f, 2.0f, 0}); /* a prefill and more */
    check_kept(150, 3, 90, 40, 2, 2, 128, em_cuda_mask{1.0f / sqrtf(128.0f), 0.0f, 48});
    return test_finish();
}

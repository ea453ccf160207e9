/* Causal GQA attention in query blocks on the packed GEMM (see attention.h). */
#include "stages/kernels/cpu/attention.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/softcap.h"

/* Blocks start on whole kernel calls, so a block's output panels are whole panels of the
 * packed output. */
_Static_assert(EM_ATTN_QUERY_BLOCK % EM_GEMM_TOKENS == 0, "query blocks of whole kernel calls");

/* Row stride of V^T: T plus a cache line, so its rows do not share cache sets. */
static size_t vt_stride(int T) {
    return (size_t)T + EM_GEMM_ROW_PAD;
}

size_t em_attention_vt_floats(int T, int n_kv_heads, int head_dim) {
    return (size_t)n_kv_heads * (size_t)head_dim * vt_stride(T);
}

/* One block's working memory, carved from a thread's scratch. */
typedef struct block_memory {
    float *q_packed;  /* (padded block, head_dim): the block's queries packed */
    float *scores;    /* (padded T keys, padded block): S^T, then exp(S - max)^T */
    float *out;       /* (padded head_dim, result stride of a block): (exp(S - max) V)^T */
    float *max, *sum; /* (block) per query; sum becomes 1 / sum */
} block_memory;

/* The sizes of the parts of block_memory, each rounded up to whole cache lines. */
static void block_part_floats(int T, int head_dim, size_t sizes[5]) {
    size_t ld = em_gemm_result_stride(EM_ATTN_QUERY_BLOCK); /* the widest a block needs */
    sizes[0] = em_gemm_packed_floats(EM_ATTN_QUERY_BLOCK, head_dim);
    sizes[1] = (size_t)em_gemm_padded_rows(T) * EM_ATTN_QUERY_BLOCK;
    sizes[2] = (size_t)em_gemm_padded_rows(head_dim) * ld;
    sizes[3] = sizes[4] = EM_ATTN_QUERY_BLOCK;
    for (int i = 0; i < 5; i++) sizes[i] = (sizes[i] + 15) / 16 * 16;
}

size_t em_attention_scratch_floats(int T, int head_dim) {
    size_t sizes[5], total = 0;
    block_part_floats(T, head_dim, sizes);
    for (int i = 0; i < 5; i++) total += sizes[i];
    return total;
}

static block_memory carve_block_memory(int T, int head_dim, float *base) {
    size_t sizes[5];
    block_part_floats(T, head_dim, sizes);
    block_memory m;
    m.q_packed = base;
    m.scores = m.q_packed + sizes[0];
    m.out = m.scores + sizes[1];
    m.max = m.out + sizes[2];
    m.sum = m.max + sizes[3];
    return m;
}

/* softmax_columns where every query sees every key (keys = q0 + 1: a decoding step's heads) and
 * the columns are R = rows = padded, a constant where it is inlined: the same operations, with
 * each column's max and sum in registers, one chain per column in key order. */
__attribute__((always_inline)) static inline void softmax_all_keys_n(int R, float *scores, int keys,
                                                                     const em_attention_mask *mask,
                                                                     float *max, float *inv_sum) {
    float column_max[4], sum[4];
    size_t n = (size_t)keys * (size_t)R;
    for (int i = 0; i < R; i++) {
        column_max[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    for (size_t e = 0; e < n; e++) scores[e] *= mask->scale;
    if (mask->softcap > 0) em_softcap(scores, n, mask->softcap);
    for (int j = 0; j < keys; j++)
        for (int i = 0; i < R; i++) {
            float v = scores[(size_t)j * R + i];
            column_max[i] = v > column_max[i] ? v : column_max[i];
        }
    for (int j = 0; j < keys; j++)
        for (int i = 0; i < R; i++) scores[(size_t)j * R + i] -= column_max[i];
    em_exp_inplace(scores, n);
    for (int j = 0; j < keys; j++)
        for (int i = 0; i < R; i++) sum[i] += scores[(size_t)j * R + i];
    for (int i = 0; i < R; i++) {
        max[i] = column_max[i];
        inv_sum[i] = 1.0f / sum[i];
    }
}

/* In place on scores (keys, padded) for queries q0 .. q0+rows-1 and keys 0 .. keys-1: scale,
 * causal mask (query q0+i sees keys 0..q0+i) and the exponentials of the softmax down each
 * column; masked entries become 0. inv_sum[i] = 1 / (the column's sum): the caller divides the
 * output rather than every probability. Entries of the padded queries are left finite. */
static void softmax_columns(float *scores, int keys, int q0, int rows, int padded,
                            const em_attention_mask *mask, float *max, float *inv_sum) {
    if (keys == q0 + 1 && rows == padded && rows <= 4) {
        switch (rows) {
        case 1:
            softmax_all_keys_n(1, scores, keys, mask, max, inv_sum);
            return;
        case 2:
            softmax_all_keys_n(2, scores, keys, mask, max, inv_sum);
            return;
        case 3:
            softmax_all_keys_n(3, scores, keys, mask, max, inv_sum);
            return;
        default:
            softmax_all_keys_n(4, scores, keys, mask, max, inv_sum);
            return;
        }
    }
    size_t ld = (size_t)padded;
    float scale = mask->scale;
    for (int i = 0; i < padded; i++) {
        max[i] = i < rows ? -INFINITY : 0.0f;
        inv_sum[i] = i < rows ? 0.0f : 1.0f;
    }
    for (int j = 0; j < keys; j++) {
        float *s = scores + (size_t)j * ld;
        int first = j - q0 > 0 ? j - q0 : 0; /* the first query that sees key j */
        for (int i = 0; i < first && i < rows; i++) s[i] = 0.0f;
        for (int i = first; i < rows; i++) s[i] *= scale;
        if (mask->softcap > 0 && first < rows)
            em_softcap(s + first, (size_t)(rows - first), mask->softcap);
        for (int i = first; i < rows; i++) max[i] = s[i] > max[i] ? s[i] : max[i];
    }
    /* keys 0..q0 are seen by every query of the block: their rows are one run for the
     * exponential (the padded queries' entries are 0 - 0 there) */
    size_t full = (size_t)q0 + 1;
    for (size_t j = 0; j < full; j++) {
        for (int i = 0; i < padded; i++) scores[j * ld + i] -= max[i];
    }
    em_exp_inplace(scores, full * ld);
    for (size_t j = 0; j < full; j++) {
        for (int i = 0; i < rows; i++) inv_sum[i] += scores[j * ld + i];
    }
    /* the keys on the block's diagonal, each seen from query j - q0 on */
    for (int j = q0 + 1; j < keys; j++) {
        float *s = scores + (size_t)j * ld;
        int first = j - q0;
        for (int i = first; i < rows; i++) s[i] -= max[i];
        em_exp_inplace(s + first, (size_t)(rows - first));
        for (int i = first; i < rows; i++) inv_sum[i] += s[i];
    }
    for (int i = 0; i < rows; i++) inv_sum[i] = 1.0f / inv_sum[i];
}

/* softmax_columns through a sliding window: query q0+i sees key j iff j <= q0+i < j + window, a
 * run of queries [first, last) per key; the exponentials run key by key over those runs. */
static void softmax_columns_window(float *scores, int keys, int q0, int rows, int padded,
                                   const em_attention_mask *mask, float *max, float *inv_sum) {
    size_t ld = (size_t)padded;
    for (int i = 0; i < padded; i++) {
        max[i] = i < rows ? -INFINITY : 0.0f;
        inv_sum[i] = i < rows ? 0.0f : 1.0f;
    }
    for (int j = 0; j < keys; j++) {
        float *s = scores + (size_t)j * ld;
        int first = j - q0 > 0 ? j - q0 : 0;
        int last = j - q0 + mask->window < rows ? j - q0 + mask->window : rows;
        if (last < first) last = first;
        for (int i = 0; i < rows; i++)
            if (i < first || i >= last) s[i] = 0.0f;
        for (int i = first; i < last; i++) s[i] *= mask->scale;
        if (mask->softcap > 0) em_softcap(s + first, (size_t)(last - first), mask->softcap);
        for (int i = first; i < last; i++) max[i] = s[i] > max[i] ? s[i] : max[i];
    }
    for (int j = 0; j < keys; j++) {
        float *s = scores + (size_t)j * ld;
        int first = j - q0 > 0 ? j - q0 : 0;
        int last = j - q0 + mask->window < rows ? j - q0 + mask->window : rows;
        if (last <= first) continue;
        for (int i = first; i < last; i++) s[i] -= max[i];
        em_exp_inplace(s + first, (size_t)(last - first));
        for (int i = first; i < last; i++) inv_sum[i] += s[i];
    }
    for (int i = 0; i < rows; i++) inv_sum[i] = 1.0f / inv_sum[i];
}

/* A block of a window's queries: positions q0 .. q0 + rows - 1 of window w, whose keys are k[w]
 * and v[w] and start at row key_row0 of vt, its queries at rows query_row .. query_row + rows - 1
 * of q and the output. */
typedef struct query_block {
    int w, key_row0, query_row, q0, rows;
} query_block;

/* Longest first (most keys), so threads finish together. */
static int more_keys_first(const void *a, const void *b) {
    const query_block *x = a, *y = b;
    int kx = x->q0 + x->rows, ky = y->q0 + y->rows;
    if (kx != ky) return kx > ky ? -1 : 1;
    return x->query_row < y->query_row ? -1 : x->query_row > y->query_row;
}

void em_attention(const float *q, const float *k, const float *v, const em_segments *windows,
                  int n_heads, int n_kv_heads, int head_dim, const em_attention_mask *mask,
                  float *out_packed, float *vt, em_scratch *s) {
    size_t kv_ld = (size_t)n_kv_heads * (size_t)head_dim;
    const float **kw = em_xmalloc(2 * (size_t)windows->count * sizeof *kw),
                **vw = kw + windows->count;
    for (int w = 0; w < windows->count; w++) {
        kw[w] = k + (size_t)windows->start[w] * kv_ld;
        vw[w] = v + (size_t)windows->start[w] * kv_ld;
    }
    em_attention_queries(q, windows->start, kw, vw, windows, n_heads, n_kv_heads, head_dim, mask,
                         out_packed, vt, s);
    free(kw);
}

/* What every block of one em_attention_queries call shares. */
typedef struct attention_call {
    const float *q;
    const float *const *k, *const *v;
    const float *vt;
    size_t ldv; /* of vt */
    int n_heads, group, head_dim, q_ld, kv_ld;
    int longest, width; /* the longest window; the packed output's panel width */
    const em_attention_mask *mask;
    float *out_packed;
    em_scratch *s;
    em_gemm_few_tokens_transposed *value_sums;
} attention_call;

/* Reads one word of every cache line of a decoding block's window's keys and values (rows 0 ..
 * keys-1, contiguous) in order, so the hardware's stream prefetchers bring them at the memory's
 * speed before the block's products read them across rows. */
static void touch_window(const attention_call *a, query_block qb) {
    size_t floats = (size_t)(qb.q0 + qb.rows) * (size_t)a->kv_ld;
    float sum = 0.0f;
    for (size_t i = 0; i < floats; i += 16) sum += a->k[qb.w][i] + a->v[qb.w][i];
    volatile float sink = sum;
    (void)sink;
}

/* Query head h of block qb (or, when a decoding block's heads are grouped, the KV head's group of
 * query heads from h, and nothing for the group's other heads): its scores, softmax and output,
 * divided by the sums, into its rows of the packed output. */
static void attend_block(const attention_call *a, query_block qb, int h) {
    const float *q = a->q;
    const float *const *k = a->k, *const *v = a->v;
    const float *vt = a->vt;
    size_t ldv = a->ldv;
    int group = a->group, head_dim = a->head_dim, q_ld = a->q_ld, kv_ld = a->kv_ld;
    int longest = a->longest, width = a->width;
    const em_attention_mask *mask = a->mask;
    float *out_packed = a->out_packed;
    em_scratch *s = a->s;
    em_gemm_few_tokens_transposed *value_sums = a->value_sums;
    /* a block of one query (a decoding step): the query heads of a KV head share its keys,
     * so they are one product against K (its tokens the heads), run by the group's first */
    bool windowed = mask->window > 0 && qb.q0 + qb.rows > mask->window; /* a key out of reach */
    bool grouped = qb.rows == 1 && group > 1 && !windowed;
    if (grouped && h % group) return;
    int heads = grouped ? group : 1;
    int g = h / group;
    int q0 = qb.q0, rows = qb.rows;
    int keys = q0 + rows; /* keys 0..keys-1 of the window are visible to some query */
    int tokens = grouped ? group : rows; /* of the scores' product */
    /* the scores' row stride: the few-token kernels write their tokens alone, so the
     * softmax's exponentials run over those columns only */
    int ld_s = tokens <= EM_GEMM_FEW_TOKENS ? tokens : em_gemm_padded_tokens(tokens);
    size_t ld = em_gemm_result_stride(tokens); /* of out */
    block_memory m = carve_block_memory(longest, head_dim, s->buf[omp_get_thread_num()]);
    /* the window's k and vt, the block's queries */
    const float *kw = k[qb.w], *vtw = vt + qb.key_row0;

    /* scores (keys, ld_s) = K[0:keys, g] Q[q0:q0+rows, h]^T, or with the group's heads
     * h .. h + group - 1 of the one query as the columns */
    const float *q_block = q + (size_t)qb.query_row * q_ld + (size_t)h * head_dim;
    for (int p = 0; p < em_gemm_panel_count(tokens); p++) {
        em_gemm_pack_panel(q_block, grouped ? (size_t)head_dim : (size_t)q_ld, tokens, head_dim, p,
                           m.q_packed);
    }
    em_gemm_tile(s->kernel, em_gemm_packed(m.q_packed, tokens, head_dim), tokens, head_dim,
                 kw + (size_t)g * head_dim, (size_t)kv_ld, keys, m.scores, (size_t)ld_s);
    /* the softmax down each column: the group's heads see the same keys as one query (every
     * key up to q0, no window cutting in) */
    if (windowed)
        softmax_columns_window(m.scores, keys, q0, rows, ld_s, mask, m.max, m.sum);
    else
        softmax_columns(m.scores, keys, q0, tokens, ld_s, mask, m.max, m.sum);
    /* out (head_dim, ld) = V[0:keys, g]^T E with E = exp(S - max)^T (keys, queries) read in
     * place: the 16-query segments of its rows are panels of queries. Row d of out holds
     * feature h*head_dim+d of the block's queries, or when grouped, in column i, feature
     * (h+i)*head_dim+d of the one query. */
    if (rows == 1) { /* V's rows are the keys: the same chains from V as it is, a few heads
                      * at a time */
        for (int i = 0; i < heads; i += EM_GEMM_FEW_TOKENS) {
            int n = heads - i < EM_GEMM_FEW_TOKENS ? heads - i : EM_GEMM_FEW_TOKENS;
            value_sums(keys, m.scores + i, (size_t)ld_s, n, v[qb.w] + (size_t)g * head_dim,
                       (size_t)kv_ld, head_dim, m.out + i, ld);
        }
    } else {
        em_gemm_panels e = {m.scores, (size_t)ld_s, EM_GEMM_PANEL};
        em_gemm_tile(s->kernel, e, rows, keys, vtw + (size_t)g * head_dim * ldv, ldv, head_dim,
                     m.out, ld);
    }
    for (int i = 0; i < heads; i++) { /* head h + i: column i when grouped */
        const float *out = m.out + i, *inv_sum = m.sum + i;
        /* divided by the sums, the block's queries go to their rows of the packed output:
         * whole panels when the block starts on one, its other rows one by one */
        int first = qb.query_row; /* the block's first row of the output */
        int whole = first % EM_GEMM_PANEL == 0 ? rows / EM_GEMM_PANEL : 0;
        for (int d = 0; d < head_dim; d++) {
            const float *od = out + (size_t)d * ld;
            /* feature (h+i)*head_dim+d: token t at column[(t / 16) * q_ld * width + t % 16]
             * (gemm.h: a narrow panel's tokens are all in its first) */
            float *column = out_packed + ((size_t)(h + i) * head_dim + (size_t)d) * width;
            for (int p = 0; p < whole; p++) {
                size_t panel = (size_t)first / EM_GEMM_PANEL + (size_t)p;
                float *to = column + panel * q_ld * EM_GEMM_PANEL;
                for (int t = 0; t < EM_GEMM_PANEL; t++)
                    to[t] = od[p * EM_GEMM_PANEL + t] * inv_sum[p * EM_GEMM_PANEL + t];
            }
            for (int t = whole * EM_GEMM_PANEL; t < rows; t++) {
                int row = first + t;
                column[(size_t)(row / EM_GEMM_PANEL) * q_ld * width + row % EM_GEMM_PANEL] =
                    od[t] * inv_sum[t];
            }
        }
    }
}

void em_attention_queries(const float *q, const int32_t *query_start, const float *const *k,
                          const float *const *v, const em_segments *windows, int n_heads,
                          int n_kv_heads, int head_dim, const em_attention_mask *mask,
                          float *out_packed, float *vt, em_scratch *s) {
    int T = windows->start[windows->count], longest = em_segments_longest(windows);
    int queries = query_start[windows->count];
    int q_ld = n_heads * head_dim, kv_ld = n_kv_heads * head_dim;
    int group = n_heads / n_kv_heads;
    size_t ldv = vt_stride(T);
    /* every window's query blocks, counted from its first query */
    int blocks = 0;
    int64_t pairs = 0; /* causal (query, key) pairs, for the parallel threshold */
    for (int w = 0; w < windows->count; w++) {
        int n = windows->start[w + 1] - windows->start[w];
        int nq = query_start[w + 1] - query_start[w];
        blocks += (nq + EM_ATTN_QUERY_BLOCK - 1) / EM_ATTN_QUERY_BLOCK;
        pairs += (int64_t)nq * (2 * n - nq) / 2;
    }
    query_block *order = em_xmalloc((size_t)(blocks ? blocks : 1) * sizeof *order);
    for (int w = 0, b = 0; w < windows->count; w++) {
        int row0 = windows->start[w], n = windows->start[w + 1] - row0;
        int nq = query_start[w + 1] - query_start[w];
        for (int i = 0; i < nq; i += EM_ATTN_QUERY_BLOCK, b++)
            order[b] = (query_block){w, row0, query_start[w] + i, n - nq + i,
                                     nq - i < EM_ATTN_QUERY_BLOCK ? nq - i : EM_ATTN_QUERY_BLOCK};
    }
    qsort(order, (size_t)blocks, sizeof *order, more_keys_first);
    /* a decoding step (one query per window) runs in parallel whatever its size: each task reads
     * its KV head's keys and values from memory, where the step's weights have pushed them, so
     * the threads share that wait; and a thread idle through it falls asleep, which the next
     * product pays to wake it (7 us of SmolLM2's 25 us attention output product) */
    bool decoding = queries == windows->count;
    bool parallel = decoding || (int64_t)n_heads * pairs * head_dim >= EM_PARALLEL_MIN_WORK;
    /* a block of one query (a decoding step) reads V as it is (value_sums_one_query); only blocks
     * of more need V^T */
    bool need_vt = false;
    for (int b = 0; b < blocks; b++) need_vt = need_vt || order[b].rows > 1;
    em_gemm_few_tokens_transposed *value_sums = em_gemm_few_tokens_transposed_for(s->kernel);

    /* vt (kv_ld, ldv) = v^T, in blocks of 64 keys of a window (window w's rows of vt from its
     * start) */
    int chunks = 0;
    for (int w = 0; w < windows->count && need_vt; w++)
        chunks += (windows->start[w + 1] - windows->start[w] + 63) / 64;
#pragma omp parallel for num_threads(s->threads) if (parallel && chunks > 1)
    for (int c = 0; c < chunks; c++) {
        int w = 0, first = c; /* which window, and which of its chunks */
        while (first >= (windows->start[w + 1] - windows->start[w] + 63) / 64) {
            first -= (windows->start[w + 1] - windows->start[w] + 63) / 64;
            w++;
        }
        int t0 = 64 * first, n_w = windows->start[w + 1] - windows->start[w];
        int n = n_w - t0 < 64 ? n_w - t0 : 64;
        em_transpose(v[w] + (size_t)t0 * kv_ld, (size_t)kv_ld, n, kv_ld,
                     vt + windows->start[w] + t0, ldv, false);
    }
    /* the packed output's padding past the queries: zeros (a narrow panel has none) */
    int width = em_gemm_panel_width(queries); /* of the packed output's panels */
    for (int t = queries; width == EM_GEMM_PANEL && t < em_gemm_padded_tokens(queries); t++) {
        float *panel = out_packed + (size_t)(t / EM_GEMM_PANEL) * q_ld * EM_GEMM_PANEL;
        for (int c = 0; c < q_ld; c++) panel[(size_t)c * EM_GEMM_PANEL + t % EM_GEMM_PANEL] = 0.0f;
    }

    attention_call call = {q,    k,     v,       vt,    ldv,  n_heads,    group, head_dim,
                           q_ld, kv_ld, longest, width, mask, out_packed, s,     value_sums};
    if (decoding && blocks >= 2 * s->threads) {
        /* a decoding step of several sequences: a window a task, its heads in turn, the threads
         * taking the windows in turn. Each first reads its window's keys and values in order:
         * they come from memory (the step's weights have pushed them out), and read across rows
         * by the products they came at half the memory's speed. */
#pragma omp parallel num_threads(s->threads)
        {
            int threads = omp_get_num_threads();
            for (int b = omp_get_thread_num(); b < blocks; b += threads) {
                touch_window(&call, order[b]);
                for (int h = 0; h < n_heads; h++) attend_block(&call, order[b], h);
            }
        }
    } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
        for (int task = 0; task < n_heads * blocks; task++)
            attend_block(&call, order[task / n_heads], task % n_heads);
    }
    free(order);
}

/* The tensor-parallel shard description both forward backends take their weights from
 * (stages/kernels/llama_shard.h), on a model built in memory whose F32 values name their place
 * (tag * 1e6 + row * 1000 + column): for tp = 1 and 2 every rank's Q/K/V and gate/up rows are
 * views of the right rows, its Wo and Wdown the right columns of every row, its biases the right
 * slices and its output head whole vocabulary tiles covering the vocabulary in rank order; the
 * ranks' weight bytes add up to the whole plus the norms each holds. A split that does not fit
 * (heads, KV heads, MLP columns, a quantization block cut) fails with exit status 2 and the
 * numbers, and both backends' create (cpu, and cuda where built: it checks before touching a
 * device) refuse a tp that does not divide the heads with the same message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/forward_backend.h"
#include "stages/kernels/llama_shard.h"
#include "stages/kernels/vocab_head.h"
#include "stages/formats/ggml_types.h"
#include "test.h"

enum { VOCAB = 400, DIM = 8, HEADS = 4, KV_HEADS = 2, HEAD_DIM = 16, FFN = 96 };
#define QD (HEADS * HEAD_DIM)
#define KVD (KV_HEADS * HEAD_DIM)

enum { TAG_EMBD = 1, TAG_OUT, TAG_Q, TAG_K, TAG_V, TAG_O, TAG_GATE, TAG_UP, TAG_DOWN, TAG_BIAS };

static float value(int tag, int64_t row, int64_t col) {
    return (float)tag * 1e6f + (float)row * 1000.0f + (float)col;
}

/* An F32 matrix {cols, rows} of value(tag, row, col). */
static em_tensor matrix(const char *name, int tag, int64_t cols, int64_t rows) {
    float *data = malloc((size_t)(cols * rows) * sizeof *data);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) data[r * cols + c] = value(tag, r, c);
    return (em_tensor){
        name, EM_TENSOR_F32, 2, {cols, rows, 1, 1}, data, (size_t)(cols * rows) * sizeof(float)};
}

typedef struct test_model {
    em_model m;
    em_layer_weights layer;
    em_tensor embd, out, out_norm, attn_norm, ffn_norm, wq, wk, wv, wo, gate, up, down, bq, bk, bv;
} test_model;

static void build(test_model *t) {
    memset(t, 0, sizeof *t);
    em_llama_config *c = &t->m.config;
    strcpy(c->architecture, "llama");
    c->n_vocab = VOCAB, c->dim = DIM, c->n_layers = 1, c->ffn_dim = FFN, c->n_heads = HEADS;
    c->n_kv_heads = KV_HEADS, c->head_dim = HEAD_DIM, c->rope_dim = HEAD_DIM;
    c->rope_freq_base = 10000.0f, c->rms_eps = 1e-5f, c->has_qkv_bias = true;
    c->embed_scale = 1.0f, c->attn_scale_base = HEAD_DIM;
    t->embd = matrix("token_embd.weight", TAG_EMBD, DIM, VOCAB);
    t->out = matrix("output.weight", TAG_OUT, DIM, VOCAB);
    t->out_norm = matrix("output_norm.weight", 0, DIM, 1);
    t->attn_norm = matrix("blk.0.attn_norm.weight", 0, DIM, 1);
    t->ffn_norm = matrix("blk.0.ffn_norm.weight", 0, DIM, 1);
    t->wq = matrix("blk.0.attn_q.weight", TAG_Q, DIM, QD);
    t->wk = matrix("blk.0.attn_k.weight", TAG_K, DIM, KVD);
    t->wv = matrix("blk.0.attn_v.weight", TAG_V, DIM, KVD);
    t->wo = matrix("blk.0.attn_output.weight", TAG_O, QD, DIM);
    t->gate = matrix("blk.0.ffn_gate.weight", TAG_GATE, DIM, FFN);
    t->up = matrix("blk.0.ffn_up.weight", TAG_UP, DIM, FFN);
    t->down = matrix("blk.0.ffn_down.weight", TAG_DOWN, FFN, DIM);
    t->bq = matrix("blk.0.attn_q.bias", TAG_BIAS, QD, 1);
    t->bk = matrix("blk.0.attn_k.bias", TAG_BIAS, KVD, 1);
    t->bv = matrix("blk.0.attn_v.bias", TAG_BIAS, KVD, 1);
    t->layer = (em_layer_weights){.attn_norm = &t->attn_norm,
                                  .wq = &t->wq,
                                  .wk = &t->wk,
                                  .wv = &t->wv,
                                  .wo = &t->wo,
                                  .bq = &t->bq,
                                  .bk = &t->bk,
                                  .bv = &t->bv,
                                  .ffn_norm = &t->ffn_norm,
                                  .w_gate = &t->gate,
                                  .w_up = &t->up,
                                  .w_down = &t->down};
    t->m.path = "in-memory.gguf";
    t->m.tok_embd = &t->embd;
    t->m.output = &t->out;
    t->m.output_norm = &t->out_norm;
    t->m.layers = &t->layer;
}

static void release(test_model *t) {
    em_tensor *all[] = {&t->embd, &t->out,  &t->out_norm, &t->attn_norm, &t->ffn_norm,
                        &t->wq,   &t->wk,   &t->wv,       &t->wo,        &t->gate,
                        &t->up,   &t->down, &t->bq,       &t->bk,        &t->bv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free((void *)all[i]->data);
}

/* Every value of s, {cols, rows}, is value(tag, row0 + r, col0 + c). */
static int holds(const em_tensor *s, int tag, int64_t row0, int64_t rows, int64_t col0,
                 int64_t cols) {
    if (s->type != EM_TENSOR_F32 || s->shape[0] != cols || s->shape[1] != rows) return 0;
    const float *d = s->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            if (d[r * cols + c] != value(tag, row0 + r, col0 + c)) return 0;
    return s->nbytes == (size_t)(rows * cols) * sizeof(float);
}

static int slice(const float *b, int64_t i0, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (b[i] != value(TAG_BIAS, 0, i0 + i)) return 0;
    return 1;
}

/* Checks every rank's shard of tp; returns the sum of their weight bytes. */
static size_t check_split(const test_model *t, int tp) {
    size_t whole = 0, sum = 0,
           norms = 3 * DIM * sizeof(float); /* attention, MLP and output norms */
    int64_t next_row = 0;
    for (int r = 0; r < tp; r++) {
        em_llama_shard s;
        em_status err = em_llama_shard_new(&t->m, tp, r, &s);
        CHECK(err == NULL);
        if (err) {
            fprintf(stderr, "tp %d rank %d: %s\n", tp, r, err->message);
            em_error_free(err);
            continue;
        }
        int h = HEADS / tp, kv = KV_HEADS / tp, f = FFN / tp;
        CHECK_INT_EQ(s.n_heads, h);
        CHECK_INT_EQ(s.n_kv_heads, kv);
        CHECK_INT_EQ(s.ffn_dim, f);
        const em_llama_shard_layer *l = &s.layers[0];
        int64_t q0 = (int64_t)r * h * HEAD_DIM, kv0 = (int64_t)r * kv * HEAD_DIM,
                f0 = (int64_t)r * f;
        CHECK(holds(&l->wq, TAG_Q, q0, h * HEAD_DIM, 0, DIM));
        CHECK(holds(&l->wk, TAG_K, kv0, kv * HEAD_DIM, 0, DIM));
        CHECK(holds(&l->wv, TAG_V, kv0, kv * HEAD_DIM, 0, DIM));
        CHECK(holds(&l->w_gate, TAG_GATE, f0, f, 0, DIM));
        CHECK(holds(&l->w_up, TAG_UP, f0, f, 0, DIM));
        CHECK(holds(&l->wo, TAG_O, 0, DIM, q0, h * HEAD_DIM));
        CHECK(holds(&l->w_down, TAG_DOWN, 0, DIM, f0, f));
        CHECK(l->wq.data == (const float *)t->wq.data + q0 * DIM); /* rows are views */
        CHECK(slice(l->bq, q0, h * HEAD_DIM));
        CHECK(slice(l->bk, kv0, kv * HEAD_DIM));
        CHECK(slice(l->bv, kv0, kv * HEAD_DIM));
        /* whole tiles, rank after rank, the output view on exactly those rows */
        CHECK_INT_EQ(s.vocab_row0, next_row);
        CHECK(s.vocab_row0 % EM_HEAD_TILE_ROWS == 0);
        CHECK(holds(&s.output, TAG_OUT, s.vocab_row0, s.vocab_rows, 0, DIM));
        next_row += s.vocab_rows;
        sum += s.weight_bytes;
        if (tp == 1) whole = s.weight_bytes;
        em_llama_shard_free(&s, 1);
    }
    CHECK_INT_EQ(next_row, VOCAB);
    if (tp == 1) {
        size_t blocks = (size_t)(2 * QD * DIM + 2 * KVD * DIM + 3 * FFN * DIM + VOCAB * DIM);
        CHECK_INT_EQ(whole, blocks * sizeof(float) + norms);
    }
    return sum;
}

static void check_refused(const test_model *t, int tp, const char *message) {
    em_llama_shard s;
    em_status err = em_llama_shard_new(&t->m, tp, 0, &s);
    CHECK(err != NULL);
    if (!err) {
        em_llama_shard_free(&s, 1);
        return;
    }
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    CHECK_CONTAINS(err->message, message);
    em_error_free(err);
}

/* Both backends' create refuse tp = 3 of 4 heads (the cuda one before touching a device). */
static void check_create(const test_model *t) {
    const char *names[] = {"cpu", "cuda"};
    for (int i = 0; i < 2; i++) {
        const em_forward_backend *be = em_forward_backend_find(names[i]);
        CHECK(be != NULL);
        if (!be || !be->create) {
            printf("%s: not built here, its create is not checked\n", names[i]);
            continue;
        }
        em_forward_groups groups = {.tp = {.rank = 0, .size = 3}, .cp = {.rank = 0, .size = 1}};
        void *f = NULL;
        em_status err = be->create(&t->m, &groups, 1, &(em_forward_options){0}, &f);
        CHECK(err != NULL && f == NULL);
        if (!err) {
            be->free(f);
            continue;
        }
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        CHECK_CONTAINS(err->message, "model in-memory.gguf: tp = 3 does not divide the model's 4 "
                                     "attention heads");
        em_error_free(err);
    }
}

int main(void) {
    test_model t;
    build(&t);
    size_t whole = check_split(&t, 1), norms = 3 * DIM * sizeof(float);
    CHECK_INT_EQ(check_split(&t, 2), whole + norms); /* each rank holds the norms whole */
    check_refused(&t, 3, "tp = 3 does not divide the model's 4 attention heads");
    check_refused(&t, 4, "tp = 4 does not divide the model's 2 KV heads");
    t.m.config.ffn_dim = 95;
    check_refused(&t, 2, "tp = 2 does not divide the model's 95 MLP columns (ffn)");
    t.m.config.ffn_dim = FFN;
    /* Wdown in Q8_0 (blocks of 32): tp = 2 would cut it into slices of 48 columns */
    size_t row_bytes = em_tensor_type_row_bytes(EM_TENSOR_Q8_0, FFN);
    em_tensor q8 = {"blk.0.ffn_down.weight", EM_TENSOR_Q8_0,         2,
                    {FFN, DIM, 1, 1},        calloc(DIM, row_bytes), DIM * row_bytes};
    t.layer.w_down = &q8;
    check_refused(&t, 2,
                  "tensor 'blk.0.ffn_down.weight' (Q8_0, blocks of 32 values) cannot be "
                  "split at column 0 into slices of 48 columns");
    t.layer.w_down = &t.down;
    free((void *)q8.data);
    check_create(&t);
    release(&t);
    return test_finish();
}

/* Models written by evalmesh-mkmodel load back bit-identical: a GGUF file and a safetensors
 * checkpoint made with the same options give the same em_model (same config, same tensors, byte
 * for byte, after the Q/K permutation round trip), for F32, F16 and BF16; Q8_0/Q4_0 GGUF files
 * hold the quantized F32 weights; GGUF v2 reads like v3; the maker is deterministic; and the
 * safetensors export of stories260K.gguf loads to the same tensors as the GGUF.
 * argv[1] is the evalmesh-mkmodel binary. */
#include <math.h>

#include "model_test_util.h"
#include "util/sha256.h"
#include "stages/formats/half.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"
#include "test.h"

static em_model *load(const char *path) {
    em_model *m = NULL;
    em_status err = em_model_load(path, &m);
    if (err) {
        fprintf(stderr, "load %s: %s\n", path, err->message);
        em_error_free(err);
    }
    CHECK(m != NULL);
    return m;
}

static void same_config(const em_llama_config *a, const em_llama_config *b) {
    CHECK_STR_EQ(a->architecture, b->architecture);
    CHECK_INT_EQ(a->n_vocab, b->n_vocab);
    CHECK_INT_EQ(a->dim, b->dim);
    CHECK_INT_EQ(a->n_layers, b->n_layers);
    CHECK_INT_EQ(a->ffn_dim, b->ffn_dim);
    CHECK_INT_EQ(a->n_heads, b->n_heads);
    CHECK_INT_EQ(a->n_kv_heads, b->n_kv_heads);
    CHECK_INT_EQ(a->head_dim, b->head_dim);
    CHECK_INT_EQ(a->rope_dim, b->rope_dim);
    CHECK_INT_EQ(a->n_ctx_train, b->n_ctx_train);
    CHECK(a->rope_freq_base == b->rope_freq_base);
    CHECK_INT_EQ(a->rope_scaling, b->rope_scaling);
    CHECK(a->rope_freq_scale == b->rope_freq_scale);
    CHECK(a->rope_llama3_factor == b->rope_llama3_factor);
    CHECK(a->rope_llama3_low_freq_factor == b->rope_llama3_low_freq_factor);
    CHECK(a->rope_llama3_high_freq_factor == b->rope_llama3_high_freq_factor);
    CHECK_INT_EQ(a->rope_llama3_original_ctx, b->rope_llama3_original_ctx);
    CHECK_INT_EQ(a->rope_yarn_original_ctx, b->rope_yarn_original_ctx);
    CHECK(a->rope_yarn_beta_fast == b->rope_yarn_beta_fast);
    CHECK(a->rope_yarn_beta_slow == b->rope_yarn_beta_slow);
    CHECK(a->rope_attn_factor == b->rope_attn_factor);
    CHECK(a->rms_eps == b->rms_eps);
    CHECK_INT_EQ(a->has_qkv_bias, b->has_qkv_bias);
    CHECK_INT_EQ(a->tied_output, b->tied_output);
}

/* Every tensor of a is in b with the same type, shape and bytes. */
static void same_tensors(const em_model *a, const em_model *b) {
    CHECK_INT_EQ(a->tensor_count, b->tensor_count);
    for (size_t i = 0; i < a->tensor_count; i++) {
        const em_tensor *x = &a->tensors[i], *y = em_model_find_tensor(b, x->name);
        CHECK(y != NULL);
        if (!y) {
            fprintf(stderr, "  missing %s\n", x->name);
            continue;
        }
        CHECK_INT_EQ(x->type, y->type);
        for (int d = 0; d < 4; d++) CHECK_INT_EQ(x->shape[d], y->shape[d]);
        CHECK_INT_EQ(x->nbytes, y->nbytes);
        if (x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) != 0) {
            CHECK(!"tensor bytes differ");
            fprintf(stderr, "  %s differs\n", x->name);
        }
    }
}

/* The default byte-level vocabulary encodes text as its bytes after BOS, from both formats. */
static void check_byte_tokenizer(const em_model *m) {
    if (!m->tokenizer) return;
    const char *text = "Hi there\n\xc3\xa9";
    int32_t *ids = NULL;
    size_t n = 0;
    em_encode_options o = em_tokenizer_default_options(m->tokenizer);
    CHECK(o.add_bos && !o.add_eos);
    em_status err = em_tokenizer_encode(m->tokenizer, text, strlen(text), o, &ids, &n);
    CHECK(err == NULL);
    em_error_free(err);
    CHECK_INT_EQ(n, strlen(text) + 1);
    if (n == strlen(text) + 1) {
        CHECK_INT_EQ(ids[0], 256);
        for (size_t i = 1; i < n; i++) CHECK_INT_EQ(ids[i], (uint8_t)text[i - 1]);
    }
    free(ids);
    CHECK_INT_EQ(em_tokenizer_eos(m->tokenizer), 257);
}

/* --tokenizer FILE copies a vocabulary: a GGUF's into a GGUF, a tokenizer.json beside the
 * safetensors; the vocabulary size follows it. */
static void check_given_tokenizer(const char *mk, const char *dir) {
    const char *data = getenv("EVALMESH_SHARED_DATA");
    char spm[4096], llama3[4096], out[512], out_st[512];
    snprintf(spm, sizeof spm, "%s/tokenizers/llama-spm/ggml-vocab-llama-spm.gguf",
             data ? data : "../shared/data");
    snprintf(llama3, sizeof llama3, "%s/tokenizers/llama3/tokenizer.json",
             data ? data : "../shared/data");
    FILE *f = fopen(spm, "rb");
    if (!f) {
        printf("note: %s absent, --tokenizer checks skipped\n", spm);
        return;
    }
    fclose(f);
    snprintf(out, sizeof out, "%s/spm.gguf", dir);
    snprintf(out_st, sizeof out_st, "%s/llama3-st", dir);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --tokenizer %s --dim 32 --heads 2 --layers 1", out, spm),
                 0);
    CHECK_INT_EQ(run_mkmodel(mk,
                             "--out %s --format safetensors --tokenizer %s --vocab 128256 --dim 32 "
                             "--heads 2 --layers 1 --type bf16",
                             out_st, llama3),
                 0);
    em_model *a = load(out), *b = load(out_st);
    if (a) {
        CHECK_INT_EQ(a->config.n_vocab, 32000);
        CHECK(a->tokenizer && strcmp(em_tokenizer_kind(a->tokenizer), "llama") == 0);
    }
    if (b) {
        CHECK_INT_EQ(b->config.n_vocab, 128256);
        CHECK(b->tokenizer && strcmp(em_tokenizer_kind(b->tokenizer), "gpt2") == 0);
        if (b->tokenizer) CHECK_INT_EQ(em_tokenizer_vocab_size(b->tokenizer), 128256);
    }
    em_model_free(a);
    em_model_free(b);
}

static void check_pair(const char *mk, const char *dir, const char *tag, const char *type,
                       const char *extra) {
    char gguf[512], st[512];
    snprintf(gguf, sizeof gguf, "%s/%s-%s.gguf", dir, tag, type);
    snprintf(st, sizeof st, "%s/%s-%s", dir, tag, type);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --type %s %s", gguf, type, extra), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --format safetensors --type %s %s", st, type, extra), 0);
    em_model *a = load(gguf), *b = load(st);
    if (a && b) {
        CHECK_STR_EQ(a->format, "gguf");
        CHECK_STR_EQ(b->format, "safetensors");
        same_config(&a->config, &b->config);
        same_tensors(a, b);
        CHECK(a->tokenizer != NULL && b->tokenizer != NULL);
        check_byte_tokenizer(a);
        check_byte_tokenizer(b);
        /* matrices keep the requested type; norms and biases are F32 in memory */
        CHECK_STR_EQ(em_tensor_type_name(a->layers[0].wq->type), strcmp(type, "f32") == 0 ? "F32"
                                                                 : strcmp(type, "f16") == 0
                                                                     ? "F16"
                                                                     : "BF16");
        CHECK_INT_EQ(a->layers[0].attn_norm->type, EM_TENSOR_F32);
        CHECK_INT_EQ(b->output_norm->type, EM_TENSOR_F32);
        /* the safetensors header checksum covers the length and the JSON */
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", st);
        size_t size;
        uint8_t *bytes = read_file(path, &size);
        uint64_t json_len;
        memcpy(&json_len, bytes, 8);
        char hex[65];
        em_sha256_hex(bytes, 8 + json_len, hex);
        CHECK_STR_EQ(b->header_sha256, hex);
        CHECK_INT_EQ(b->file_size, size);
        free(bytes);
    }
    em_model_free(a);
    em_model_free(b);
}

/* In the qwen2 GGUF file the Q rows are in rotate-half order: row 1 of head 0 (adjacent-pair
 * order) is file row head_dim/2. */
static void check_qwen2_rows(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/qwen2-f32.gguf", dir);
    em_model *m = load(path);
    if (m) {
        CHECK_STR_EQ(m->config.architecture, "qwen2");
        CHECK(m->config.has_qkv_bias && m->layers[0].bq != NULL);
        size_t size;
        uint8_t *bytes = read_file(path, &size);
        const em_tensor *q = m->layers[0].wq;
        size_t row = (size_t)q->shape[0] * 4;
        const uint8_t *file_q = memmem(bytes, size, (const uint8_t *)q->data, row);
        CHECK(file_q != NULL); /* row 0 is row 0 in both orders */
        if (file_q) {
            int half = m->config.head_dim / 2;
            CHECK(memcmp(file_q + (size_t)half * row, (const uint8_t *)q->data + row, row) == 0);
            CHECK(memcmp(file_q + row, (const uint8_t *)q->data + row, row) != 0);
        }
        free(bytes);
    }
    em_model_free(m);
}

/* The Q8_0 model holds the F32 model's weights to within half a quantization step. */
static void check_q8_0(const char *mk, const char *dir) {
    char f32[512], q8[512], q4[512];
    snprintf(f32, sizeof f32, "%s/q-f32.gguf", dir);
    snprintf(q8, sizeof q8, "%s/q-q8.gguf", dir);
    snprintf(q4, sizeof q4, "%s/q-q4.gguf", dir);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --type f32", f32), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --type q8_0", q8), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --type q4_0", q4), 0);
    em_model *a = load(f32), *b = load(q8), *c = load(q4);
    if (a && b && c) {
        const em_tensor *x = a->layers[1].w_gate, *y = b->layers[1].w_gate,
                        *z = c->layers[1].w_gate;
        CHECK_INT_EQ(y->type, EM_TENSOR_Q8_0);
        CHECK_INT_EQ(z->type, EM_TENSOR_Q4_0);
        CHECK_INT_EQ(y->nbytes, em_tensor_numel(x) / 32 * 34);
        CHECK_INT_EQ(z->nbytes, em_tensor_numel(x) / 32 * 18);
        CHECK_INT_EQ(b->layers[1].ffn_norm->type, EM_TENSOR_F32);
        const float *v = x->data;
        int bad8 = 0, bad4 = 0;
        for (int64_t blk = 0; blk < em_tensor_numel(x) / 32; blk++) {
            const uint8_t *q = (const uint8_t *)y->data + blk * 34;
            const uint8_t *q4b = (const uint8_t *)z->data + blk * 18;
            uint16_t dh, dh4;
            memcpy(&dh, q, 2);
            memcpy(&dh4, q4b, 2);
            float d = em_f16_to_f32(dh), d4 = em_f16_to_f32(dh4);
            for (int j = 0; j < 32; j++) {
                float w = v[blk * 32 + j];
                float w8 = d * (float)(int8_t)q[2 + j];
                int nib = j < 16 ? (q4b[2 + j] & 15) : (q4b[2 + j - 16] >> 4);
                float w4 = d4 * (float)(nib - 8);
                if (fabsf(w8 - w) > fabsf(d) * 0.5f + 1e-3f * fabsf(w) + 1e-7f) bad8++;
                /* Q4_0 rounds to nearest, except that x/d in [7.5, 8] is clamped to 7 */
                float step4 = nib == 15 ? fabsf(d4) : fabsf(d4) * 0.5f;
                if (fabsf(w4 - w) > step4 + 1e-3f * fabsf(w) + 1e-7f) bad4++;
            }
        }
        CHECK_INT_EQ(bad8, 0);
        CHECK_INT_EQ(bad4, 0);
    }
    em_model_free(a);
    em_model_free(b);
    em_model_free(c);
}

static void check_deterministic(const char *mk, const char *dir) {
    char p1[512], p2[512], p3[512], v2[512];
    snprintf(p1, sizeof p1, "%s/d1.gguf", dir);
    snprintf(p2, sizeof p2, "%s/d2.gguf", dir);
    snprintf(p3, sizeof p3, "%s/d3.gguf", dir);
    snprintf(v2, sizeof v2, "%s/d-v2.gguf", dir);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --seed 7 --type f16", p1), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --seed 7 --type f16", p2), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --seed 8 --type f16", p3), 0);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --seed 7 --type f16 --gguf-version 2", v2), 0);
    size_t n1, n2, n3;
    uint8_t *a = read_file(p1, &n1), *b = read_file(p2, &n2), *c = read_file(p3, &n3);
    CHECK(n1 == n2 && memcmp(a, b, n1) == 0);
    CHECK(n1 == n3 && memcmp(a, c, n1) != 0);
    free(a);
    free(b);
    free(c);
    em_model *x = load(p1), *y = load(v2);
    if (x && y) {
        same_config(&x->config, &y->config);
        same_tensors(x, y);
    }
    em_model_free(x);
    em_model_free(y);
}

static void check_stories_export(const char *mk, const char *dir) {
    const char *data = getenv("EVALMESH_SHARED_DATA");
    char src[4096], out[512];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", data ? data : "../shared/data");
    FILE *f = fopen(src, "rb");
    if (!f) {
        printf("note: %s absent, export check skipped\n", src);
        return;
    }
    fclose(f);
    snprintf(out, sizeof out, "%s/stories-st", dir);
    CHECK_INT_EQ(run_mkmodel(mk, "--from %s --out %s", src, out), 0);
    em_model *a = load(src), *b = load(out);
    if (a && b) {
        same_config(&a->config, &b->config);
        same_tensors(a, b);
        /* the tokenizer travels as tokenizer.gguf and encodes like the original */
        CHECK(b->tokenizer != NULL);
        if (a->tokenizer && b->tokenizer) {
            CHECK_STR_EQ(em_tokenizer_kind(b->tokenizer), "llama");
            const char *text = "Once upon a time, there was a little dog.";
            int32_t *x = NULL, *y = NULL;
            size_t nx = 0, ny = 0;
            em_encode_options o = em_tokenizer_default_options(a->tokenizer);
            CHECK(em_tokenizer_encode(a->tokenizer, text, strlen(text), o, &x, &nx) == NULL);
            CHECK(em_tokenizer_encode(b->tokenizer, text, strlen(text), o, &y, &ny) == NULL);
            CHECK(nx > 5 && nx == ny && memcmp(x, y, nx * sizeof *x) == 0);
            free(x);
            free(y);
        }
        /* in the file the Q rows are in Hugging Face order: not the GGUF bytes */
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", out);
        size_t size;
        uint8_t *bytes = read_file(path, &size);
        const em_tensor *q = a->layers[0].wq;
        CHECK(memmem(bytes, size, q->data, q->nbytes) == NULL);
        CHECK(memmem(bytes, size, a->layers[0].wv->data, a->layers[0].wv->nbytes) != NULL);
        free(bytes);
    }
    em_model_free(a);
    em_model_free(b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MKMODEL\n", argv[0]);
        return 2;
    }
    const char *mk = argv[1];
    char *dir = scratch_dir();
    check_pair(mk, dir, "m", "f32", "--qkv-bias --kv-heads 2 --layers 3");
    check_pair(mk, dir, "m", "f16", "--tied --rope-scaling llama3 --rope-factor 32 --ctx 4096");
    check_pair(mk, dir, "m", "bf16",
               "--rope-scaling linear --rope-factor 4 --heads 8 --kv-heads 1");
    check_pair(mk, dir, "m", "f32",
               "--rope-scaling yarn --rope-factor 4 --rope-orig-ctx 64 --rope-beta-fast 16 "
               "--ctx 256");
    /* qwen2: GGUF holds Q/K in rotate-half order; both load to the adjacent-pair order */
    check_pair(mk, dir, "qwen2", "f32", "--qwen2 --kv-heads 2");
    check_qwen2_rows(dir);
    check_given_tokenizer(mk, dir);
    check_q8_0(mk, dir);
    check_deterministic(mk, dir);
    check_stories_export(mk, dir);
    scratch_remove(dir);
    return test_finish();
}

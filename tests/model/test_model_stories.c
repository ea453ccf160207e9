/* The real trained model in the shared data (stories260K.gguf) loads with its documented
 * hyperparameters, tensors and tokenizer. Skips when the shared data is absent. */
#include <stdlib.h>

#include "stages/formats/gguf.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"
#include "test.h"

int main(void) {
    const char *data = getenv("EVALMESH_SHARED_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", data ? data : "../shared/data");
    FILE *f = fopen(path, "rb");
    if (!f) TEST_SKIP("%s is absent", path);
    fclose(f);

    em_gguf *g;
    em_status err = em_gguf_open(path, &g);
    CHECK(err == NULL);
    if (err) return test_finish();
    CHECK_INT_EQ(g->version, 3);
    CHECK_INT_EQ(g->tensor_count, 48);
    CHECK_INT_EQ(g->alignment, 32);
    CHECK_INT_EQ(g->data_offset % 32, 0);
    em_gguf_string arch;
    bool found;
    CHECK(em_gguf_get_string(g, "general.architecture", &arch, &found) == NULL && found);
    CHECK(arch.len == 5 && memcmp(arch.data, "llama", 5) == 0);
    uint64_t u;
    CHECK(em_gguf_get_u64(g, "llama.block_count", &u, &found) == NULL && found && u == 5);
    CHECK(em_gguf_get_u64(g, "no.such.key", &u, &found) == NULL && !found);
    /* a string key read as an integer: a clear error */
    em_status wrong = em_gguf_get_u64(g, "general.architecture", &u, &found);
    CHECK(wrong != NULL);
    if (wrong) {
        CHECK_CONTAINS(wrong->message, "metadata key 'general.architecture' has type string, "
                                       "expected an integer");
        CHECK_INT_EQ(wrong->exit_code, EM_EXIT_BAD_INPUT);
    }
    em_error_free(wrong);
    const em_gguf_kv *tokens = em_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(tokens && tokens->value.type == EM_GGUF_ARRAY &&
          tokens->value.arr.elem_type == EM_GGUF_STRING && tokens->value.arr.count == 512);
    em_gguf_close(g);

    em_model *m;
    err = em_model_load(path, &m);
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        return test_finish();
    }
    const em_llama_config *c = &m->config;
    CHECK_STR_EQ(m->format, "gguf");
    CHECK_STR_EQ(c->architecture, "llama");
    CHECK_INT_EQ(c->dim, 64);
    CHECK_INT_EQ(c->ffn_dim, 172);
    CHECK_INT_EQ(c->n_layers, 5);
    CHECK_INT_EQ(c->n_heads, 8);
    CHECK_INT_EQ(c->n_kv_heads, 4);
    CHECK_INT_EQ(c->head_dim, 8);
    CHECK_INT_EQ(c->rope_dim, 8);
    CHECK_INT_EQ(c->n_vocab, 512);
    CHECK(c->rope_freq_base == 10000.0f);
    CHECK(c->rope_scaling == EM_ROPE_SCALING_NONE);
    CHECK(c->rms_eps == 1e-5f);
    CHECK(!c->tied_output && !c->has_qkv_bias);
    CHECK_INT_EQ(m->tensor_count, 48);
    CHECK_INT_EQ(m->file_size, 1185376);
    for (size_t i = 0; i < m->tensor_count; i++) CHECK_INT_EQ(m->tensors[i].type, EM_TENSOR_F32);
    CHECK(m->tok_embd && m->tok_embd->shape[0] == 64 && m->tok_embd->shape[1] == 512);
    CHECK(m->output && m->output != m->tok_embd);
    CHECK(m->layers[4].wk->shape[0] == 64 && m->layers[4].wk->shape[1] == 32);
    CHECK(m->layers[4].w_down->shape[0] == 172 && m->layers[4].w_down->shape[1] == 64);
    CHECK(m->layers[0].bq == NULL);
    CHECK(em_model_find_tensor(m, "blk.2.ffn_up.weight") == m->layers[2].w_up);
    CHECK(m->tokenizer != NULL);
    if (m->tokenizer) {
        CHECK_STR_EQ(em_tokenizer_kind(m->tokenizer), "llama");
        CHECK_INT_EQ(em_tokenizer_vocab_size(m->tokenizer), 512);
        CHECK_INT_EQ(em_tokenizer_bos(m->tokenizer), 1);
        CHECK_INT_EQ(em_tokenizer_eos(m->tokenizer), 2);
    }
    em_model_free(m);
    return test_finish();
}

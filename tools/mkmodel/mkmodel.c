/* evalmesh-mkmodel: writes a model of any row of the architecture table (architectures.h: llama,
 * qwen2, qwen3, gemma, gemma2, gemma3, phi3) with deterministic random weights, as a
 * GGUF file or a Hugging Face safetensors directory (config.json, model.safetensors,
 * tokenizer.json), or exports an existing GGUF file to safetensors (--from).
 *
 * Tensors are produced and written one batch of rows at a time, so memory stays at a few MB
 * whatever the model size. Weights are those of random_weights.h in GGUF row order; the
 * safetensors writer puts Q/K rows in Hugging Face's order (hf_names.h), so both formats load
 * back to the same em_model. In GGUF, 1-D tensors (norms, biases) are F32 as llama.cpp writes
 * them, rounded through --type when it is f16/bf16 so that the two formats agree bit for bit. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "byte_vocab.h"
#include "stages/formats/gguf_writer.h"
#include "quantize_blocks.h"
#include "random_weights.h"
#include "util/error.h"
#include "safetensors_writer.h"
#include "stages/model/architectures.h"
#include "stages/formats/ggml_types.h"
#include "stages/formats/gguf.h"
#include "stages/formats/half.h"
#include "stages/model/hf_names.h"
#include "stages/model/loaded_model.h"
#include "stages/model/rope_scaling.h"

static const char usage[] =
    "usage: evalmesh-mkmodel --out PATH [options]\n"
    "       evalmesh-mkmodel --from MODEL.gguf --out DIR   (export to safetensors)\n\n"
    "Writes a Llama-architecture model with deterministic random weights.\n\n"
    "  --format gguf|safetensors  output format (default gguf; safetensors writes a directory)\n"
    "  --vocab N        vocabulary size (default: the tokenizer's token count)\n"
    "  --dim D          embedding length (default 64)\n"
    "  --layers L       block count (default 2)\n"
    "  --heads H        attention heads (default 4)\n"
    "  --kv-heads K     KV heads (default H)\n"
    "  --ffn F          feed-forward length (default 4*D rounded up to a multiple of 32)\n"
    "  --ctx N          training context length (default 2048)\n"
    "  --type T         the matrices' type (default f32; all but f32, f16, bf16 GGUF only):\n"
    "                   f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl\n"
    "                   iq4_xs tq2_0, or q4_k_m / q5_k_m: llama-quantize's mixes, Q4_K / Q5_K\n"
    "                   with Q6_K for the output head, and attn_v and ffn_down in some layers\n"
    "  --seed S         weight seed (default 1)\n"
    "  --tied           no output.weight: the token embedding is the output head\n"
    "  --qkv-bias       Q, K, V projection biases\n"
    "  --arch NAME      an architecture of the table (default llama): llama qwen2 qwen3 gemma\n"
    "                   gemma2 gemma3 phi3; its tensors, keys and Q/K row order as llama.cpp and\n"
    "                   Hugging Face write them (Gemma's HF norm weights as w - 1)\n"
    "  --qwen2          the same as --arch qwen2\n"
    "  --head-dim N     attention head width (default D/H)\n"
    "  --sliding-window N  the window of the architecture's sliding layers (default none)\n"
    "  --attn-softcap F, --final-softcap F  soft-capping values (gemma2)\n"
    "  --query-scalar N  gemma2/gemma3 safetensors: query_pre_attn_scalar (default head dim;\n"
    "                   GGUF has no key: llama.cpp derives it from the layer count)\n"
    "  --rope-theta F   RoPE frequency base (default 10000)\n"
    "  --rms-eps F      RMS norm epsilon (default 1e-5)\n"
    "  --rope-scaling none|linear|llama3|yarn  with --rope-factor F (default 8 for llama3, 4\n"
    "                   for yarn, 2 for linear), --rope-low F (1), --rope-high F (4),\n"
    "                   --rope-orig-ctx N (8192), --rope-beta-fast F (32), --rope-beta-slow F (1)\n"
    "  --tokenizer byte|FILE  byte-level vocabulary (default) or the vocabulary of a GGUF file\n"
    "                   (GGUF output) or a tokenizer.json (safetensors output)\n"
    "  --rope-freqs     GGUF: write llama3 scaling as the rope_freqs.weight tensor of\n"
    "                   frequency factors (as llama.cpp's converter does) instead of keys\n"
    "  --gguf-version 2|3  (default 3)\n"
    "  --from GGUF      export that file's weights and config to safetensors; its tokenizer\n"
    "                   goes to tokenizer.gguf (vocabulary only) in the directory\n";

typedef struct spec {
    const char *out;
    bool safetensors;
    int vocab, dim, layers, heads, kv_heads, ffn, ctx;
    em_tensor_type type;
    bool k_m_mix; /* --type q4_k_m / q5_k_m: some matrices Q6_K (matrix_type) */
    uint64_t seed;
    bool tied, qkv_bias;
    const em_architecture *arch; /* the row: its tensors, keys and GGUF Q/K row order */
    int head_dim, sliding_window;
    float attn_softcap, final_softcap;
    int query_scalar; /* HF query_pre_attn_scalar; 0: the head dim */
    bool rope_freqs; /* GGUF llama3 scaling as a rope_freqs.weight tensor, as llama.cpp writes it */
    float rope_theta, rms_eps;
    em_rope_scaling rope_scaling;
    float rope_factor, rope_low, rope_high, rope_beta_fast, rope_beta_slow;
    int rope_orig_ctx;
    float rope_attn_factor; /* yarn from --from: the file's cos/sin magnitude, else 0 */
    const char *tokenizer;  /* NULL: byte-level */
    uint32_t gguf_version;
    const em_model *from; /* export: tensors come from this model */
} spec;

/* One tensor to write, in GGUF terms. */
typedef struct plan_tensor {
    char name[64];
    weight_kind kind;
    em_tensor_type type; /* as written */
    int n_dims;
    int64_t shape[2];        /* shape[0] innermost */
    const em_tensor *source; /* --from */
} plan_tensor;

static int fail(const char *fmt, const char *arg) {
    fprintf(stderr, "evalmesh-mkmodel: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return EM_EXIT_BAD_INPUT;
}

static int64_t rows_of(const plan_tensor *t) {
    return t->n_dims == 2 ? t->shape[1] : 1;
}

static size_t tensor_bytes(const plan_tensor *t) {
    return em_tensor_type_row_bytes(t->type, t->shape[0]) * (size_t)rows_of(t);
}

static void add(plan_tensor **plan, size_t *n, const char *name, weight_kind kind,
                em_tensor_type type, int n_dims, int64_t d0, int64_t d1) {
    *plan = em_xrealloc(*plan, (*n + 1) * sizeof **plan);
    plan_tensor *t = &(*plan)[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->type = type;
    t->n_dims = n_dims;
    t->shape[0] = d0;
    t->shape[1] = n_dims == 2 ? d1 : 1;
}

/* llama.cpp's use_more_bits: the layers of a K_M mix whose attn_v and ffn_down get Q6_K. */
static bool more_bits(int layer, int layers) {
    return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

/* The type of a weight matrix: --type, or in a K_M mix Q6_K for the output head (the token
 * embedding when tied) and for attn_v and ffn_down of the more_bits layers. */
static em_tensor_type matrix_type(const spec *s, const char *suffix, int layer) {
    if (!s->k_m_mix) return s->type;
    bool head = strcmp(suffix, "output.weight") == 0 ||
                (s->tied && strcmp(suffix, "token_embd.weight") == 0);
    bool wide = (strcmp(suffix, "attn_v.weight") == 0 || strcmp(suffix, "ffn_down.weight") == 0) &&
                more_bits(layer, s->layers);
    return head || wide ? (em_tensor_type)em_ggml_type_by_name("Q6_K")->id : s->type;
}

/* The tensors of a Llama model in GGUF order (llama.cpp's: embedding, output norm, output,
 * then each block). */
static plan_tensor *make_plan(const spec *s, size_t *count) {
    plan_tensor *plan = NULL;
    size_t n = 0;
    int hd = s->head_dim;
    int64_t q = (int64_t)s->heads * hd, kv = (int64_t)s->kv_heads * hd;
    const em_architecture *a = s->arch;
    em_tensor_type vec = s->safetensors ? s->type : EM_TENSOR_F32;
    add(&plan, &n, "token_embd.weight", WEIGHT_MATRIX, matrix_type(s, "token_embd.weight", 0), 2,
        s->dim, s->vocab);
    add(&plan, &n, "output_norm.weight", WEIGHT_NORM, vec, 1, s->dim, 1);
    if (!s->tied)
        add(&plan, &n, "output.weight", WEIGHT_MATRIX, matrix_type(s, "output.weight", 0), 2,
            s->dim, s->vocab);
    if (s->rope_freqs && !s->safetensors)
        add(&plan, &n, "rope_freqs.weight", WEIGHT_NORM, EM_TENSOR_F32, 1, hd / 2, 1);
    for (int l = 0; l < s->layers; l++) {
        struct {
            const char *suffix;
            weight_kind kind;
            int n_dims;
            int64_t d0, d1;
            bool skip;
        } parts[] = {
            {"attn_norm.weight", WEIGHT_NORM, 1, s->dim, 1, false},
            {"attn_qkv.weight", WEIGHT_MATRIX, 2, s->dim, q + 2 * kv, !a->fused_qkv},
            {"attn_q.weight", WEIGHT_MATRIX, 2, s->dim, q, a->fused_qkv},
            {"attn_k.weight", WEIGHT_MATRIX, 2, s->dim, kv, a->fused_qkv},
            {"attn_v.weight", WEIGHT_MATRIX, 2, s->dim, kv, a->fused_qkv},
            {"attn_q.bias", WEIGHT_BIAS, 1, q, 1, !s->qkv_bias},
            {"attn_k.bias", WEIGHT_BIAS, 1, kv, 1, !s->qkv_bias},
            {"attn_v.bias", WEIGHT_BIAS, 1, kv, 1, !s->qkv_bias},
            {"attn_q_norm.weight", WEIGHT_NORM, 1, hd, 1, !a->qk_norm},
            {"attn_k_norm.weight", WEIGHT_NORM, 1, hd, 1, !a->qk_norm},
            {"attn_output.weight", WEIGHT_MATRIX, 2, q, s->dim, false},
            {"attn_post_norm.weight", WEIGHT_NORM, 1, s->dim, 1, !a->post_norms},
            {"ffn_norm.weight", WEIGHT_NORM, 1, s->dim, 1, false},
            {"ffn_gate.weight", WEIGHT_MATRIX, 2, s->dim, s->ffn, a->fused_gate_up},
            {"ffn_up.weight", WEIGHT_MATRIX, 2, s->dim, s->ffn * (a->fused_gate_up ? 2 : 1), false},
            {"ffn_down.weight", WEIGHT_MATRIX, 2, s->ffn, s->dim, false},
            {"ffn_post_norm.weight", WEIGHT_NORM, 1, s->dim, 1, !a->post_norms},
        };
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            if (parts[i].skip) continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, parts[i].suffix);
            add(&plan, &n, name, parts[i].kind,
                parts[i].n_dims == 2 ? matrix_type(s, parts[i].suffix, l) : vec, parts[i].n_dims,
                parts[i].d0, parts[i].d1);
        }
    }
    *count = n;
    return plan;
}

/* The plan of an export: every tensor of the source model, as it is. */
static em_status make_export_plan(const em_model *m, plan_tensor **out, size_t *count) {
    plan_tensor *plan = NULL;
    size_t n = 0;
    const em_architecture *m_arch = em_architecture_find(m->config.architecture);
    if (m_arch->fused_qkv || m_arch->fused_gate_up || m_arch->hf_norm_offset)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: exporting a %s model is not supported (fused tensors or norm "
                            "offsets); write it with --arch %s --format safetensors instead",
                            m->path, m_arch->name, m_arch->name);
    for (size_t i = 0; i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        if (t->type != EM_TENSOR_F32 && t->type != EM_TENSOR_F16 && t->type != EM_TENSOR_BF16) {
            free(plan);
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor %s has type %s; safetensors holds F32, F16 and BF16",
                                m->path, t->name, em_tensor_type_name(t->type));
        }
        char hf[128];
        if (!em_gguf_to_hf_name(m_arch, t->name, hf, sizeof hf) || t->n_dims > 2) {
            free(plan);
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s has no Hugging Face name",
                                m->path, t->name);
        }
        add(&plan, &n, t->name, t->n_dims == 2 ? WEIGHT_MATRIX : WEIGHT_NORM, t->type, t->n_dims,
            t->shape[0], t->shape[1]);
        plan[n - 1].source = t;
    }
    *out = plan;
    *count = n;
    return NULL;
}

/* Converts n floats to type (one quantize_blocks.h writes) into out. */
static void encode(const float *x, int64_t n, em_tensor_type type, void *out) {
    quantizer_for((uint32_t)type)(x, n, out);
}

/* llama.cpp's Llama 3.1 frequency factors (convert_hf_to_gguf.py): for each rotated pair i,
 * wavelength 2*pi*base^(2i/d); short wavelengths keep 1, long ones get the factor, and those in
 * between a smooth mix. out has head_dim/2 entries. */
static void llama3_rope_freqs(const spec *s, float *out) {
    int d = s->head_dim;
    double low_wavelen = s->rope_orig_ctx / s->rope_low,
           high_wavelen = s->rope_orig_ctx / s->rope_high;
    for (int i = 0; i < d / 2; i++) {
        double wavelen = 2 * M_PI * pow(s->rope_theta, 2.0 * i / d);
        if (wavelen < high_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[i] = s->rope_factor;
        } else {
            double smooth =
                (s->rope_orig_ctx / wavelen - s->rope_low) / (s->rope_high - s->rope_low);
            out[i] = (float)(1.0 / ((1 - smooth) / s->rope_factor + smooth));
        }
    }
}

/* The values of one GGUF row of a generated tensor, as written to the file. 1-D F32 tensors
 * are rounded through the --type when it is a 16-bit type (see the file comment). */
static void make_row(const spec *s, const plan_tensor *t, int64_t row, float *values, void *out) {
    int64_t n = t->shape[0];
    if (t->source) {
        size_t row_bytes = em_tensor_type_row_bytes(t->type, n);
        memcpy(out, (const char *)t->source->data + (size_t)row * row_bytes, row_bytes);
        return;
    }
    if (strcmp(t->name, "rope_freqs.weight") == 0) {
        llama3_rope_freqs(s, values);
        encode(values, n, t->type, out);
        return;
    }
    random_weights(s->seed, t->name, t->kind, t->shape[0], row * n, values, n);
    if (t->n_dims == 1 && (s->type == EM_TENSOR_F16 || s->type == EM_TENSOR_BF16)) {
        for (int64_t i = 0; i < n; i++)
            values[i] = s->type == EM_TENSOR_F16 ? em_f16_to_f32(em_f32_to_f16(values[i]))
                                                 : em_bf16_to_f32(em_f32_to_bf16(values[i]));
    }
    /* after the rounding: w - 1 of a 16-bit w near 1 is exact in the same type */
    if (s->safetensors && t->kind == WEIGHT_NORM && s->arch->hf_norm_offset)
        for (int64_t i = 0; i < n; i++) values[i] -= 1.0f;
    encode(values, n, t->type, out);
}

/* The GGUF row of file row r of t in HF order: within each head of a Q or K projection (the
 * first q and next kv rows of a fused attn_qkv) row r is GGUF row perm(r); others are r. */
static int64_t hf_row_source(const spec *s, const plan_tensor *t, int64_t r) {
    em_qk_kind kind = em_gguf_name_qk_kind(t->name);
    int64_t q = (int64_t)s->heads * s->head_dim, kv = (int64_t)s->kv_heads * s->head_dim;
    int64_t base = 0;
    if (strstr(t->name, ".attn_qkv.")) {
        if (r >= q + kv) return r;
        base = r < q ? 0 : q;
    } else if (kind != EM_QK_Q && kind != EM_QK_K) {
        return r;
    }
    int64_t hd = s->head_dim, k = (r - base) % hd, head0 = r - k, half = hd / 2;
    return head0 + 2 * (k % half) + k / half;
}

/* Writes a tensor's rows in file order: GGUF order, or with hf_order (safetensors, and GGUF files
 * of the architectures llama.cpp gives NEOX RoPE) Q/K in HF order (hf_row_source; a bias or a
 * per-head norm is permuted within its one row). Gemma's norms go to safetensors as w - 1 (exact
 * for weights near 1). Batches of rows keep writes large. */
static bool write_tensor(const spec *s, const plan_tensor *t, FILE *f, bool hf_order) {
    int64_t rows = rows_of(t);
    size_t row_bytes = em_tensor_type_row_bytes(t->type, t->shape[0]);
    int64_t batch = (int64_t)((4u << 20) / (row_bytes ? row_bytes : 1));
    if (batch < 1) batch = 1;
    if (batch > rows) batch = rows;
    float *values = em_xmalloc((size_t)t->shape[0] * sizeof(float));
    char *buf = em_xmalloc((size_t)batch * row_bytes);
    em_qk_kind kind = em_gguf_name_qk_kind(t->name);
    bool permute = hf_order && kind != EM_QK_NONE;
    int heads = kind == EM_QK_Q ? s->heads : kind == EM_QK_K ? s->kv_heads : 1;
    bool ok = true;
    if (permute && t->n_dims == 1) {
        /* a bias or norm: one row of values, permuted as single-value rows */
        size_t elem = em_tensor_type_row_bytes(t->type, 1);
        char *row = em_xmalloc(row_bytes);
        make_row(s, t, 0, values, row);
        em_qk_permute(row, buf, t->shape[0], elem, heads, false);
        ok = fwrite(buf, 1, row_bytes, f) == row_bytes;
        free(row);
    } else {
        for (int64_t r0 = 0; r0 < rows && ok; r0 += batch) {
            int64_t nr = rows - r0 < batch ? rows - r0 : batch;
            for (int64_t r = r0; r < r0 + nr; r++) {
                int64_t src = hf_order ? hf_row_source(s, t, r) : r;
                make_row(s, t, src, values, buf + (size_t)(r - r0) * row_bytes);
            }
            ok = fwrite(buf, 1, (size_t)nr * row_bytes, f) == (size_t)nr * row_bytes;
        }
    }
    free(values);
    free(buf);
    return ok;
}

/* "<arch>.<name>" in buf. */
static const char *key(const char *arch, const char *name, char buf[96]) {
    snprintf(buf, 96, "%s.%s", arch, name);
    return buf;
}

static void write_gguf_config(const spec *s, gguf_writer *w) {
    const char *arch = s->arch->name;
    char k[96];
    gguf_kv_string(w, "general.architecture", arch);
    gguf_kv_string(w, "general.name", "evalmesh-mkmodel");
    gguf_kv_u32(w, key(arch, "vocab_size", k), (uint32_t)s->vocab);
    gguf_kv_u32(w, key(arch, "context_length", k), (uint32_t)s->ctx);
    gguf_kv_u32(w, key(arch, "embedding_length", k), (uint32_t)s->dim);
    gguf_kv_u32(w, key(arch, "block_count", k), (uint32_t)s->layers);
    gguf_kv_u32(w, key(arch, "feed_forward_length", k), (uint32_t)s->ffn);
    gguf_kv_u32(w, key(arch, "attention.head_count", k), (uint32_t)s->heads);
    gguf_kv_u32(w, key(arch, "attention.head_count_kv", k), (uint32_t)s->kv_heads);
    gguf_kv_u32(w, key(arch, "rope.dimension_count", k), (uint32_t)s->head_dim);
    if (s->head_dim * s->heads != s->dim) {
        gguf_kv_u32(w, key(arch, "attention.key_length", k), (uint32_t)s->head_dim);
        gguf_kv_u32(w, key(arch, "attention.value_length", k), (uint32_t)s->head_dim);
    }
    if (s->sliding_window)
        gguf_kv_u32(w, key(arch, "attention.sliding_window", k), (uint32_t)s->sliding_window);
    if (s->attn_softcap > 0 && s->arch->attn_softcap_key)
        gguf_kv_f32(w, key(arch, s->arch->attn_softcap_key, k), s->attn_softcap);
    if (s->final_softcap > 0 && s->arch->final_softcap_key)
        gguf_kv_f32(w, key(arch, s->arch->final_softcap_key, k), s->final_softcap);
    gguf_kv_f32(w, key(arch, "rope.freq_base", k), s->rope_theta);
    gguf_kv_f32(w, key(arch, "attention.layer_norm_rms_epsilon", k), s->rms_eps);
    if (s->rope_freqs) return; /* the scaling is in the rope_freqs.weight tensor */
    if (s->rope_scaling == EM_ROPE_SCALING_LINEAR) {
        gguf_kv_string(w, key(arch, "rope.scaling.type", k), "linear");
        gguf_kv_f32(w, key(arch, "rope.scaling.factor", k), s->rope_factor);
    } else if (s->rope_scaling == EM_ROPE_SCALING_LLAMA3) {
        gguf_kv_string(w, key(arch, "rope.scaling.type", k), "llama3");
        gguf_kv_f32(w, key(arch, "rope.scaling.factor", k), s->rope_factor);
        gguf_kv_f32(w, key(arch, "rope.scaling.low_freq_factor", k), s->rope_low);
        gguf_kv_f32(w, key(arch, "rope.scaling.high_freq_factor", k), s->rope_high);
        gguf_kv_u32(w, key(arch, "rope.scaling.original_context_length", k),
                    (uint32_t)s->rope_orig_ctx);
    } else if (s->rope_scaling == EM_ROPE_SCALING_YARN) {
        gguf_kv_string(w, key(arch, "rope.scaling.type", k), "yarn");
        gguf_kv_f32(w, key(arch, "rope.scaling.factor", k), s->rope_factor);
        gguf_kv_u32(w, key(arch, "rope.scaling.original_context_length", k),
                    (uint32_t)s->rope_orig_ctx);
        gguf_kv_f32(w, key(arch, "rope.scaling.yarn_beta_fast", k), s->rope_beta_fast);
        gguf_kv_f32(w, key(arch, "rope.scaling.yarn_beta_slow", k), s->rope_beta_slow);
    }
}

/* Copies every tokenizer.* key of a GGUF file. */
static em_status copy_gguf_tokenizer(const char *path, gguf_writer *w) {
    em_gguf *g;
    em_status err = em_gguf_open(path, &g);
    if (err) return err;
    size_t copied = 0;
    for (uint64_t i = 0; i < g->kv_count; i++)
        if (strncmp(g->kvs[i].key, "tokenizer.", 10) == 0) {
            gguf_kv_copy(w, &g->kvs[i]);
            copied++;
        }
    em_gguf_close(g);
    if (!copied) return em_error_new(EM_EXIT_BAD_INPUT, "%s: has no tokenizer.* metadata", path);
    return NULL;
}

static em_status write_gguf(const spec *s, const plan_tensor *plan, size_t n) {
    gguf_writer *w = gguf_writer_new(s->gguf_version);
    write_gguf_config(s, w);
    em_status err = NULL;
    if (s->tokenizer) {
        err = copy_gguf_tokenizer(s->tokenizer, w);
    } else {
        byte_vocab v = byte_vocab_new(s->vocab);
        byte_vocab_write_gguf(&v, w);
        byte_vocab_free(&v);
    }
    for (size_t i = 0; i < n && !err; i++)
        gguf_add_tensor(w, plan[i].name, plan[i].type, plan[i].n_dims, plan[i].shape,
                        tensor_bytes(&plan[i]));
    FILE *f = err ? NULL : fopen(s->out, "wb");
    if (!err && !f) err = em_error_new(EM_EXIT_BAD_INPUT, "%s: %s", s->out, strerror(errno));
    bool ok = !err && gguf_write_header(w, f);
    for (size_t i = 0; i < n && ok; i++) {
        ok = write_tensor(s, &plan[i], f, s->arch->gguf_neox) &&
             gguf_write_padding(f, tensor_bytes(&plan[i]));
    }
    if (f && fclose(f) != 0) ok = false;
    if (!err && !ok) err = em_error_new(EM_EXIT_RUNTIME, "%s: write failed", s->out);
    gguf_writer_free(w);
    return err;
}

/* The first (or second) space-separated word of list, in a static buffer. */
static const char *hf_word(const char *list, bool second) {
    static char word[64];
    if (second && strchr(list, ' ')) list = strchr(list, ' ') + 1;
    snprintf(word, sizeof word, "%.*s", (int)strcspn(list, " "), list);
    return word;
}

static bool write_config_json(const spec *s, const char *path) {
    cJSON *c = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(c, "architectures");
    /* the row's first HF class and model type (its second, Mistral's, for a windowed llama) */
    bool mistral = strcmp(s->arch->name, "llama") == 0 && s->sliding_window;
    cJSON_AddItemToArray(archs, cJSON_CreateString(hf_word(s->arch->hf_architectures, mistral)));
    cJSON_AddStringToObject(c, "model_type", hf_word(s->arch->hf_model_types, mistral));
    if (s->arch->hf_query_scalar_key)
        cJSON_AddNumberToObject(c, s->arch->hf_query_scalar_key,
                                s->query_scalar ? s->query_scalar : s->head_dim);
    /* absent: the architecture's defaults in transformers and in llama.cpp alike */
    if (s->arch->hf_attn_softcap_key && s->attn_softcap > 0)
        cJSON_AddNumberToObject(c, s->arch->hf_attn_softcap_key, s->attn_softcap);
    if (s->arch->hf_final_softcap_key && s->final_softcap > 0)
        cJSON_AddNumberToObject(c, s->arch->hf_final_softcap_key, s->final_softcap);
    if (s->arch->swa_pattern) {
        if (s->sliding_window)
            cJSON_AddNumberToObject(c, "sliding_window", s->sliding_window);
        else
            cJSON_AddNullToObject(c, "sliding_window");
    }
    if (s->arch->hf_swa_pattern_key)
        cJSON_AddNumberToObject(c, s->arch->hf_swa_pattern_key, s->arch->swa_pattern);
    if (s->arch->hf_rope_swa_key)
        cJSON_AddNumberToObject(c, s->arch->hf_rope_swa_key, s->arch->rope_freq_base_swa);
    cJSON_AddNumberToObject(c, "vocab_size", s->vocab);
    cJSON_AddNumberToObject(c, "hidden_size", s->dim);
    cJSON_AddNumberToObject(c, "intermediate_size", s->ffn);
    cJSON_AddNumberToObject(c, "num_hidden_layers", s->layers);
    cJSON_AddNumberToObject(c, "num_attention_heads", s->heads);
    cJSON_AddNumberToObject(c, "num_key_value_heads", s->kv_heads);
    cJSON_AddNumberToObject(c, "head_dim", s->head_dim);
    cJSON_AddNumberToObject(c, "max_position_embeddings", s->ctx);
    cJSON_AddNumberToObject(c, "rms_norm_eps", s->rms_eps);
    cJSON_AddNumberToObject(c, "rope_theta", s->rope_theta);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", s->tied);
    cJSON_AddNullToObject(c,
                          "pad_token_id"); /* transformers' defaults (Phi-3: 32000) may not fit */
    cJSON_AddBoolToObject(c, "attention_bias", s->qkv_bias);
    bool gelu = s->arch->activation == EM_ACTIVATION_GELU_TANH;
    cJSON_AddStringToObject(c, gelu ? "hidden_activation" : "hidden_act",
                            gelu ? "gelu_pytorch_tanh" : "silu");
    cJSON_AddStringToObject(c, "torch_dtype",
                            s->type == EM_TENSOR_F16    ? "float16"
                            : s->type == EM_TENSOR_BF16 ? "bfloat16"
                                                        : "float32");
    if (s->rope_scaling == EM_ROPE_SCALING_NONE) {
        cJSON_AddNullToObject(c, "rope_scaling");
    } else {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        bool llama3 = s->rope_scaling == EM_ROPE_SCALING_LLAMA3;
        bool yarn = s->rope_scaling == EM_ROPE_SCALING_YARN;
        cJSON_AddStringToObject(rs, "rope_type", em_rope_scaling_of(s->rope_scaling)->name);
        cJSON_AddNumberToObject(rs, "factor", s->rope_factor);
        if (llama3) {
            cJSON_AddNumberToObject(rs, "low_freq_factor", s->rope_low);
            cJSON_AddNumberToObject(rs, "high_freq_factor", s->rope_high);
        }
        if (llama3 || yarn)
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", s->rope_orig_ctx);
        if (yarn) {
            cJSON_AddNumberToObject(rs, "beta_fast", s->rope_beta_fast);
            cJSON_AddNumberToObject(rs, "beta_slow", s->rope_beta_slow);
            if (s->rope_attn_factor > 0)
                cJSON_AddNumberToObject(rs, "attention_factor", s->rope_attn_factor);
        }
    }
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    FILE *f = fopen(path, "w");
    bool ok = f && text && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    return ok;
}

static bool copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    bool ok = in && out;
    char buf[65536];
    size_t got;
    while (ok && (got = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, got, out) == got;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = false;
    return ok;
}

/* tokenizer.json (and tokenizer_config.json) for a safetensors directory. */
static em_status write_hf_tokenizer(const spec *s) {
    char *dst = em_xasprintf("%s/tokenizer.json", s->out);
    bool ok = true;
    if (s->tokenizer) {
        ok = copy_file(s->tokenizer, dst);
        char *src_dir = em_xstrdup(s->tokenizer);
        char *slash = strrchr(src_dir, '/');
        char *cfg = em_xasprintf("%s/tokenizer_config.json", slash ? (*slash = 0, src_dir) : ".");
        char *cfg_dst = em_xasprintf("%s/tokenizer_config.json", s->out);
        struct stat st;
        if (ok && stat(cfg, &st) == 0) ok = copy_file(cfg, cfg_dst);
        free(src_dir);
        free(cfg);
        free(cfg_dst);
    } else {
        byte_vocab v = byte_vocab_new(s->vocab);
        ok = byte_vocab_write_json(&v, s->out);
        byte_vocab_free(&v);
    }
    em_status err =
        ok ? NULL : em_error_new(EM_EXIT_RUNTIME, "%s: cannot write the tokenizer", dst);
    free(dst);
    return err;
}

/* DIR/tokenizer.gguf: the tokenizer.* metadata of the --from file, no tensors. */
static em_status write_tokenizer_gguf(const spec *s) {
    gguf_writer *w = gguf_writer_new(3);
    em_status err = copy_gguf_tokenizer(s->from->path, w);
    char *path = em_xasprintf("%s/tokenizer.gguf", s->out);
    FILE *f = err ? NULL : fopen(path, "wb");
    bool ok = f && gguf_write_header(w, f);
    if (f && fclose(f) != 0) ok = false;
    if (!err && !ok) err = em_error_new(EM_EXIT_RUNTIME, "%s: write failed", path);
    free(path);
    gguf_writer_free(w);
    return err;
}

static em_status write_safetensors(const spec *s, const plan_tensor *plan, size_t n) {
    if (mkdir(s->out, 0777) != 0 && errno != EEXIST)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot create directory: %s", s->out,
                            strerror(errno));
    char *config = em_xasprintf("%s/config.json", s->out);
    bool ok = write_config_json(s, config);
    free(config);
    if (!ok) return em_error_new(EM_EXIT_RUNTIME, "%s/config.json: write failed", s->out);
    /* An export keeps the source's tokenizer as a vocabulary-only tokenizer.gguf (evalmesh reads
     * it when there is no tokenizer.json): SentencePiece vocabularies have no tokenizer.json form
     * that evalmesh reads. */
    em_status err =
        s->from ? (s->from->tokenizer ? write_tokenizer_gguf(s) : NULL) : write_hf_tokenizer(s);
    if (err) return err;
    st_entry *entries = em_xcalloc(n, sizeof *entries);
    char(*names)[128] = em_xcalloc(n, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        em_gguf_to_hf_name(s->arch, plan[i].name, names[i], sizeof names[i]);
        entries[i].name = names[i];
        entries[i].dtype = em_tensor_type_name(plan[i].type);
        entries[i].n_dims = plan[i].n_dims;
        for (int d = 0; d < plan[i].n_dims; d++)
            entries[i].shape[d] = plan[i].shape[plan[i].n_dims - 1 - d];
        entries[i].nbytes = tensor_bytes(&plan[i]);
    }
    char *path = em_xasprintf("%s/model.safetensors", s->out);
    FILE *f = fopen(path, "wb");
    ok = f && st_write_header(f, entries, n);
    for (size_t i = 0; i < n && ok; i++) ok = write_tensor(s, &plan[i], f, true);
    if (f && fclose(f) != 0) ok = false;
    if (!ok) err = em_error_new(EM_EXIT_RUNTIME, "%s: write failed", path);
    free(path);
    free(entries);
    free(names);
    return err;
}

static bool parse_int(const char *text, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v <= 0 || v > (1 << 30)) return false;
    *out = (int)v;
    return true;
}

static bool parse_float(const char *text, float *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || end == text || !(v > 0)) return false;
    *out = (float)v;
    return true;
}

static bool takes_value(const char *option) {
    static const char *const options[] = {"--out",
                                          "--from",
                                          "--tokenizer",
                                          "--format",
                                          "--vocab",
                                          "--dim",
                                          "--layers",
                                          "--heads",
                                          "--kv-heads",
                                          "--ffn",
                                          "--ctx",
                                          "--rope-orig-ctx",
                                          "--rope-theta",
                                          "--rms-eps",
                                          "--rope-factor",
                                          "--rope-low",
                                          "--rope-high",
                                          "--seed",
                                          "--gguf-version",
                                          "--rope-scaling",
                                          "--type",
                                          "--arch",
                                          "--query-scalar",
                                          "--head-dim",
                                          "--sliding-window",
                                          "--attn-softcap",
                                          "--final-softcap",
                                          "--rope-beta-fast",
                                          "--rope-beta-slow"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (strcmp(option, options[i]) == 0) return true;
    return false;
}

static int parse_args(int argc, char **argv, spec *s, const char **from) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("%s", usage);
            exit(0);
        }
        bool flag = strcmp(a, "--tied") == 0 || strcmp(a, "--qkv-bias") == 0 ||
                    strcmp(a, "--qwen2") == 0 || strcmp(a, "--rope-freqs") == 0;
        if (!flag && !takes_value(a)) return fail("unknown option '%s' (see --help)", a);
        if (!flag && i + 1 >= argc) return fail("%s needs a value (see --help)", a);
        const char *v = flag ? NULL : argv[++i];
        bool ok = true;
        if (strcmp(a, "--tied") == 0)
            s->tied = true;
        else if (strcmp(a, "--qkv-bias") == 0)
            s->qkv_bias = true;
        else if (strcmp(a, "--qwen2") == 0)
            s->arch = em_architecture_find("qwen2");
        else if (strcmp(a, "--arch") == 0) {
            s->arch = em_architecture_find(v);
            if (!s->arch) {
                fprintf(stderr, "evalmesh-mkmodel: unknown architecture '%s' (known: %s)\n", v,
                        em_architecture_names());
                return EM_EXIT_BAD_INPUT;
            }
        } else if (strcmp(a, "--head-dim") == 0)
            ok = parse_int(v, &s->head_dim);
        else if (strcmp(a, "--sliding-window") == 0)
            ok = parse_int(v, &s->sliding_window);
        else if (strcmp(a, "--query-scalar") == 0)
            ok = parse_int(v, &s->query_scalar);
        else if (strcmp(a, "--attn-softcap") == 0)
            ok = parse_float(v, &s->attn_softcap);
        else if (strcmp(a, "--final-softcap") == 0)
            ok = parse_float(v, &s->final_softcap);
        else if (strcmp(a, "--rope-freqs") == 0)
            s->rope_freqs = true;
        else if (strcmp(a, "--out") == 0)
            s->out = v;
        else if (strcmp(a, "--from") == 0)
            *from = v;
        else if (strcmp(a, "--tokenizer") == 0)
            s->tokenizer = strcmp(v, "byte") == 0 ? NULL : v;
        else if (strcmp(a, "--format") == 0) {
            ok = strcmp(v, "gguf") == 0 || strcmp(v, "safetensors") == 0;
            s->safetensors = strcmp(v, "safetensors") == 0;
        } else if (strcmp(a, "--vocab") == 0)
            ok = parse_int(v, &s->vocab);
        else if (strcmp(a, "--dim") == 0)
            ok = parse_int(v, &s->dim);
        else if (strcmp(a, "--layers") == 0)
            ok = parse_int(v, &s->layers);
        else if (strcmp(a, "--heads") == 0)
            ok = parse_int(v, &s->heads);
        else if (strcmp(a, "--kv-heads") == 0)
            ok = parse_int(v, &s->kv_heads);
        else if (strcmp(a, "--ffn") == 0)
            ok = parse_int(v, &s->ffn);
        else if (strcmp(a, "--ctx") == 0)
            ok = parse_int(v, &s->ctx);
        else if (strcmp(a, "--rope-orig-ctx") == 0)
            ok = parse_int(v, &s->rope_orig_ctx);
        else if (strcmp(a, "--rope-theta") == 0)
            ok = parse_float(v, &s->rope_theta);
        else if (strcmp(a, "--rms-eps") == 0)
            ok = parse_float(v, &s->rms_eps);
        else if (strcmp(a, "--rope-factor") == 0)
            ok = parse_float(v, &s->rope_factor);
        else if (strcmp(a, "--rope-low") == 0)
            ok = parse_float(v, &s->rope_low);
        else if (strcmp(a, "--rope-high") == 0)
            ok = parse_float(v, &s->rope_high);
        else if (strcmp(a, "--rope-beta-fast") == 0)
            ok = parse_float(v, &s->rope_beta_fast);
        else if (strcmp(a, "--rope-beta-slow") == 0)
            ok = parse_float(v, &s->rope_beta_slow);
        else if (strcmp(a, "--seed") == 0) {
            char *end;
            s->seed = strtoull(v, &end, 10);
            ok = *v && !*end;
        } else if (strcmp(a, "--gguf-version") == 0) {
            ok = strcmp(v, "2") == 0 || strcmp(v, "3") == 0;
            s->gguf_version = (uint32_t)atoi(v);
        } else if (strcmp(a, "--rope-scaling") == 0) {
            const em_rope_scaling_kind *kind = em_rope_scaling_find(v, strlen(v));
            ok = kind != NULL;
            if (ok) s->rope_scaling = kind->id;
        } else if (strcmp(a, "--type") == 0) {
            s->k_m_mix = strcmp(v, "q4_k_m") == 0 || strcmp(v, "q5_k_m") == 0;
            const em_ggml_type_info *info =
                em_ggml_type_by_name(s->k_m_mix ? (v[1] == '4' ? "Q4_K" : "Q5_K") : v);
            ok = info && quantizer_for(info->id);
            if (ok) s->type = (em_tensor_type)info->id;
        } else
            return fail("unknown option '%s' (see --help)", a);
        if (!ok) return fail("bad value for %s (see --help)", a);
    }
    return 0;
}

/* Fills defaults and checks the sizes against each other. */
static int check_spec(spec *s) {
    if (!s->out) return fail("%s", "--out PATH is required (see --help)");
    if (!s->kv_heads) s->kv_heads = s->heads;
    if (!s->ffn) s->ffn = (4 * s->dim + 31) / 32 * 32;
    if (s->rope_factor == 0)
        s->rope_factor = s->rope_scaling == EM_ROPE_SCALING_LLAMA3 ? 8
                         : s->rope_scaling == EM_ROPE_SCALING_YARN ? 4
                                                                   : 2;
    char msg[200];
    bool derived = !s->head_dim;
    if (derived) s->head_dim = s->dim / s->heads;
    if (s->arch->qkv_bias) s->qkv_bias = true;
    if ((derived && s->dim % s->heads) || s->head_dim % 2 || s->heads % s->kv_heads) {
        snprintf(msg, sizeof msg,
                 "--dim %d, --heads %d, --kv-heads %d: dim/heads must be even and "
                 "heads a multiple of kv-heads",
                 s->dim, s->heads, s->kv_heads);
        return fail("%s", msg);
    }
    if (s->query_scalar && (!s->safetensors || !s->arch->hf_query_scalar_key))
        return fail("%s", "--query-scalar goes with --format safetensors and gemma2 or gemma3");
    if (s->rope_freqs && s->rope_scaling != EM_ROPE_SCALING_LLAMA3)
        return fail("%s", "--rope-freqs goes with --rope-scaling llama3");
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)s->type);
    int block = s->k_m_mix ? em_ggml_type_by_name("Q6_K")->block_size : info->block_size;
    if (block > 1 && s->safetensors) return fail("%s", "safetensors holds f32, f16 and bf16 only");
    if (s->dim % block || s->ffn % block) {
        snprintf(msg, sizeof msg, "--type %s needs --dim and --ffn multiples of its block size %d",
                 info->name, block);
        return fail("%s", msg);
    }
    if (!s->tokenizer && s->vocab < BYTE_VOCAB_TOKENS) {
        snprintf(msg, sizeof msg, "the byte tokenizer has %d tokens; --vocab %d is too small",
                 BYTE_VOCAB_TOKENS, s->vocab);
        return fail("%s", msg);
    }
    if (s->tokenizer && !s->safetensors && !strstr(s->tokenizer, ".gguf"))
        return fail("%s: GGUF output takes its vocabulary from a .gguf file", s->tokenizer);
    if (s->tokenizer && s->safetensors && !strstr(s->tokenizer, ".json"))
        return fail("%s: safetensors output takes its vocabulary from a tokenizer.json",
                    s->tokenizer);
    return 0;
}

/* The vocabulary size of --tokenizer FILE when --vocab is not given. */
static em_status tokenizer_vocab(const char *path, int *vocab) {
    if (strstr(path, ".gguf")) {
        em_gguf *g;
        em_status err = em_gguf_open(path, &g);
        if (err) return err;
        const em_gguf_kv *kv = em_gguf_find(g, "tokenizer.ggml.tokens");
        if (kv && kv->value.type == EM_GGUF_ARRAY) *vocab = (int)kv->value.arr.count;
        em_gguf_close(g);
        if (!kv) return em_error_new(EM_EXIT_BAD_INPUT, "%s: no tokenizer.ggml.tokens", path);
        return NULL;
    }
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: give --vocab N with a tokenizer.json", path);
}

/* Takes the sizes of an existing model for an export. */
static void spec_from_model(spec *s, const em_model *m) {
    const em_llama_config *c = &m->config;
    s->vocab = c->n_vocab;
    s->dim = c->dim;
    s->layers = c->n_layers;
    s->heads = c->n_heads;
    s->kv_heads = c->n_kv_heads;
    s->ffn = c->ffn_dim;
    s->ctx = c->n_ctx_train;
    s->tied = c->tied_output;
    s->qkv_bias = c->has_qkv_bias;
    s->arch = em_architecture_find(c->architecture);
    s->head_dim = c->head_dim;
    s->rope_theta = c->rope_freq_base;
    s->rms_eps = c->rms_eps;
    s->rope_scaling = c->rope_scaling;
    bool llama3 = c->rope_scaling == EM_ROPE_SCALING_LLAMA3;
    s->rope_factor = llama3 ? c->rope_llama3_factor : 1.0f / c->rope_freq_scale;
    s->rope_low = c->rope_llama3_low_freq_factor;
    s->rope_high = c->rope_llama3_high_freq_factor;
    s->rope_orig_ctx = llama3 ? c->rope_llama3_original_ctx : c->rope_yarn_original_ctx;
    s->rope_beta_fast = c->rope_yarn_beta_fast;
    s->rope_beta_slow = c->rope_yarn_beta_slow;
    s->rope_attn_factor = c->rope_attn_factor;
    s->type = m->tensors[0].type;
    s->safetensors = true;
    s->from = m;
}

int main(int argc, char **argv) {
    spec s = {.dim = 64,
              .layers = 2,
              .heads = 4,
              .ctx = 2048,
              .type = EM_TENSOR_F32,
              .seed = 1,
              .rope_theta = 10000.0f,
              .rms_eps = 1e-5f,
              .rope_low = 1.0f,
              .rope_high = 4.0f,
              .rope_orig_ctx = 8192,
              .rope_beta_fast = 32.0f,
              .rope_beta_slow = 1.0f,
              .gguf_version = 3};
    const char *from = NULL;
    int rc = parse_args(argc, argv, &s, &from);
    if (rc) return rc;
    if (!s.arch) s.arch = em_architecture_find("llama");
    em_model *model = NULL;
    plan_tensor *plan = NULL;
    size_t n = 0;
    em_status err = NULL;
    if (from) {
        if (!s.out) return fail("%s", "--out DIR is required (see --help)");
        err = em_model_load(from, &model);
        if (!err) {
            spec_from_model(&s, model);
            if (model->config.head_dim * model->config.n_heads != model->config.dim)
                err = em_error_new(EM_EXIT_BAD_INPUT, "%s: head_dim * heads != dim", from);
        }
        if (!err) err = make_export_plan(model, &plan, &n);
        if (!err) err = write_safetensors(&s, plan, n);
    } else {
        if (s.tokenizer && !s.vocab) err = tokenizer_vocab(s.tokenizer, &s.vocab);
        if (!err && !s.tokenizer && !s.vocab) s.vocab = BYTE_VOCAB_TOKENS;
        if (!err && (rc = check_spec(&s)) != 0) return rc;
        if (!err) plan = make_plan(&s, &n);
        if (!err) err = s.safetensors ? write_safetensors(&s, plan, n) : write_gguf(&s, plan, n);
    }
    free(plan);
    em_model_free(model);
    if (err) {
        fprintf(stderr, "evalmesh-mkmodel: %s\n", err->message);
        rc = err->exit_code;
        em_error_free(err);
        return rc;
    }
    return 0;
}

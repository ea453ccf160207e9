/* Bad GGUF input: every case is one clear error with exit status 2, never a crash or a huge
 * allocation (this test runs under ASan in the sanitizer build). The files are a model written
 * by evalmesh-mkmodel, cut at every offset of its header and at many offsets of its data, or
 * patched in place (magic, version, counts, types, dimensions, offsets, names); plus files built
 * with the maker's GGUF writer for every metadata type, nested arrays and alignments.
 * argv[1] is the evalmesh-mkmodel binary. */
#include <stdint.h>

#include "stages/formats/gguf_writer.h"
#include "model_test_util.h"
#include "stages/formats/gguf.h"
#include "stages/model/loaded_model.h"
#include "test.h"

static uint8_t *base;
static size_t base_size;

static size_t find(const uint8_t *data, size_t size, const char *text) {
    const uint8_t *p = memmem(data, size, text, strlen(text));
    if (!p) {
        fprintf(stderr, "'%s' not found in the test file\n", text);
        exit(1);
    }
    return (size_t)(p - data);
}

/* Offsets of the parts of a tensor info, found by its name. */
typedef struct info_at {
    size_t n_dims, dims, type, offset;
} info_at;

static info_at tensor_info(const uint8_t *data, size_t size, const char *name) {
    size_t at = find(data, size, name) + strlen(name);
    uint32_t n_dims;
    memcpy(&n_dims, data + at, 4);
    info_at r = {at, at + 4, at + 4 + 8 * n_dims, at + 8 + 8 * n_dims};
    return r;
}

/* Parses a copy of data (so ASan sees reads past the end) and returns the error message ("" on
 * success, which the callers treat as a failure). Checks the exit status is 2. */
static char *parse_error(const uint8_t *data, size_t size) {
    uint8_t *copy = em_xmalloc(size);
    memcpy(copy, data, size);
    em_gguf *g = NULL;
    em_status err = em_gguf_parse(copy, size, "bad.gguf", &g);
    if (!err) em_gguf_close(g);
    char *msg = bad_input_message(err);
    free(copy);
    return msg;
}

static void expect_parse_error(const uint8_t *data, size_t size, const char *want) {
    char *msg = parse_error(data, size);
    CHECK_CONTAINS(msg, want);
    free(msg);
}

/* A patched copy of the base file: n bytes of value at offset. */
static void expect_patched(size_t offset, const void *value, size_t n, const char *want) {
    uint8_t *copy = em_xmalloc(base_size);
    memcpy(copy, base, base_size);
    memcpy(copy + offset, value, n);
    expect_parse_error(copy, base_size, want);
    free(copy);
}

/* Writes a patched copy of a file and checks em_model_load's error. */
static void expect_load_error(const char *dir, const uint8_t *data, size_t size, size_t offset,
                              const void *value, size_t n, const char *want) {
    char path[512];
    snprintf(path, sizeof path, "%s/patched.gguf", dir);
    uint8_t *copy = em_xmalloc(size);
    memcpy(copy, data, size);
    memcpy(copy + offset, value, n);
    write_file(path, copy, size);
    free(copy);
    em_model *m = NULL;
    em_status err = em_model_load(path, &m);
    CHECK(err != NULL);
    if (err) {
        CHECK_CONTAINS(err->message, want);
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        em_error_free(err);
    }
    em_model_free(m);
}

static void check_truncation(void) {
    em_gguf *g;
    em_status err = em_gguf_parse(base, base_size, "base.gguf", &g);
    CHECK(err == NULL);
    if (err) return;
    size_t data_offset = g->data_offset, infos = find(base, base_size, "token_embd.weight") - 8;
    em_gguf_close(g);
    /* the end of the tensor infos: after the last info's offset field */
    size_t infos_end = tensor_info(base, base_size, "blk.1.ffn_down.weight").offset + 8;
    int failures = 0;
    for (size_t len = 0; len < base_size; len += len < data_offset ? 1 : 97) {
        char *msg = parse_error(base, len);
        const char *want = len < 24            ? "truncated in header"
                           : len < infos       ? "truncated"
                           : len < infos_end   ? "truncated"
                           : len < data_offset ? "truncated before the tensor data"
                                               : "runs past the end of the file";
        if (!strstr(msg, want)) {
            if (failures++ < 5) fprintf(stderr, "cut at %zu: '%s' lacks '%s'\n", len, msg, want);
        }
        free(msg);
    }
    CHECK_INT_EQ(failures, 0);
    /* the exact messages at a few places */
    expect_parse_error(base, 0,
                       "bad.gguf: truncated in header (needs 4 bytes at offset 0, file "
                       "has 0)");
    expect_parse_error(base, 10,
                       "bad.gguf: truncated in header (needs 8 bytes at offset 8, file "
                       "has 10)");
    size_t key18 = find(base, base_size, "tokenizer.ggml.eos_token_id") + 27 + 4;
    char want[200];
    snprintf(
        want, sizeof want,
        "bad.gguf: truncated in metadata key 18 (tokenizer.ggml.eos_token_id) (needs 4 bytes at "
        "offset %zu, file has %zu)",
        key18, key18 + 2);
    expect_parse_error(base, key18 + 2, want);
    snprintf(want, sizeof want,
             "bad.gguf: truncated in tensor info 0 (needs 17 bytes at offset %zu, file has %zu)",
             infos + 8, infos + 13);
    expect_parse_error(base, infos + 13, want);
}

static void check_patches(void) {
    expect_patched(0, "GGUX", 4, "bad.gguf: not a GGUF file (wrong magic");
    uint32_t v1 = 1, v4 = 4;
    expect_patched(4, &v1, 4, "bad.gguf: unsupported GGUF version 1");
    expect_patched(4, &v4, 4, "bad.gguf: unsupported GGUF version 4");
    uint64_t huge = 1ull << 62;
    expect_patched(16, &huge, 8, "truncated or corrupt: 4611686018427387904 metadata entries");
    expect_patched(8, &huge, 8, "truncated or corrupt: 4611686018427387904 tensors");
    /* the tokens array: key, type ARRAY, element type STRING, count */
    size_t tokens =
        find(base, base_size, "tokenizer.ggml.tokens") + strlen("tokenizer.ggml.tokens");
    uint64_t count = 1ull << 60;
    expect_patched(tokens + 8, &count, 8, "an array of 1152921504606846976 string elements");
    uint32_t elem = 77;
    expect_patched(tokens + 4, &elem, 4, "unknown array element type 77");
    size_t block_count = find(base, base_size, "llama.block_count") + strlen("llama.block_count");
    uint32_t type = 99;
    expect_patched(block_count, &type, 4, "bad.gguf: metadata key 'llama.block_count' at offset");
    expect_patched(block_count, &type, 4, "has unknown value type 99");
    /* a fixed-size array longer than the file */
    size_t types =
        find(base, base_size, "tokenizer.ggml.token_type") + strlen("tokenizer.ggml.token_type");
    expect_patched(types + 8, &count, 8, "truncated in metadata key");
    expect_patched(find(base, base_size, "tokenizer.ggml.eos_token_id") + 15, "bos", 3,
                   "bad.gguf: duplicate metadata key 'tokenizer.ggml.bos_token_id'");
    expect_patched(find(base, base_size, "blk.0.attn_v.weight") + 11, "k", 1,
                   "bad.gguf: duplicate tensor name 'blk.0.attn_k.weight'");

    info_at q = tensor_info(base, base_size, "blk.0.attn_q.weight");
    uint32_t five = 5, zero = 0;
    expect_patched(q.n_dims, &five, 4, "tensor 'blk.0.attn_q.weight' has 5 dimensions (1 to 4)");
    expect_patched(q.n_dims, &zero, 4, "tensor 'blk.0.attn_q.weight' has 0 dimensions");
    uint64_t dim = 1ull << 62, dim0 = 0, big = 1ull << 56;
    expect_patched(q.dims + 8, &dim, 8,
                   "tensor 'blk.0.attn_q.weight' has an impossible dimension 1");
    expect_patched(q.dims, &dim0, 8, "tensor 'blk.0.attn_q.weight' has an impossible dimension 0");
    expect_patched(q.dims + 8, &big, 8, "tensor 'blk.0.attn_q.weight' is impossibly large");
    uint32_t unknown = 5, q4_0 = 2;
    expect_patched(q.type, &unknown, 4, "tensor 'blk.0.attn_q.weight' has unknown type id 5");
    uint64_t odd_dim = 48;
    uint8_t *copy = em_xmalloc(base_size);
    memcpy(copy, base, base_size);
    memcpy(copy + q.dims, &odd_dim, 8);
    memcpy(copy + q.type, &q4_0, 4);
    expect_parse_error(copy, base_size,
                       "tensor 'blk.0.attn_q.weight' of type Q4_0 has 48 values "
                       "per row, not a multiple of its block size 32");
    /* a K-quant needs rows of whole 256-value super-blocks */
    uint32_t q4_k = 12;
    expect_patched(q.type, &q4_k, 4,
                   "tensor 'blk.0.attn_q.weight' of type Q4_K has 64 values per row, not a "
                   "multiple of its block size 256");
    /* F64 doubles the tensor's size: it runs into the next tensor's bytes */
    uint32_t f64 = 28;
    memcpy(copy, base, base_size);
    memcpy(copy + q.type, &f64, 4);
    expect_parse_error(copy, base_size,
                       "tensor 'blk.0.attn_q.weight' of type F64 and shape {64, 64} needs 32768 "
                       "bytes at data offset");
    expect_parse_error(copy, base_size, "the type or shape disagrees with the tensor's size");
    free(copy);
    uint64_t offset;
    memcpy(&offset, base + q.offset, 8);
    uint64_t misaligned = offset + 8, past = (uint64_t)base_size;
    char want[160];
    snprintf(want, sizeof want,
             "tensor 'blk.0.attn_q.weight' data offset %llu is not a multiple of the alignment 32",
             (unsigned long long)misaligned);
    expect_patched(q.offset, &misaligned, 8, want);
    expect_patched(q.offset, &past, 8,
                   "tensor 'blk.0.attn_q.weight' data (16384 bytes at data "
                   "offset");
    expect_patched(q.offset, &past, 8, "runs past the end of the file");
}

static void check_model_errors(const char *mk, const char *dir) {
    info_at q = tensor_info(base, base_size, "blk.0.attn_q.weight");
    uint64_t narrow = 32;
    expect_load_error(dir, base, base_size, q.dims + 8, &narrow, 8,
                      "tensor blk.0.attn_q.weight has shape {64, 32} but the config needs {64, "
                      "64}");
    expect_load_error(dir, base, base_size, find(base, base_size, "blk.1.ffn_up.weight") + 10, "xx",
                      2, "missing tensor blk.1.ffn_up.weight");
    expect_load_error(dir, base, base_size, find(base, base_size, "output_norm.weight"), "outpux",
                      6, "missing tensor output_norm.weight");
    expect_load_error(dir, base, base_size, find(base, base_size, "llama.block_count") + 12, "x", 1,
                      "missing metadata key llama.block_count");
    expect_load_error(dir, base, base_size, find(base, base_size, "general.architecture") + 8, "x",
                      1, "missing metadata key general.architecture");
    uint32_t zero_heads = 0;
    size_t heads = find(base, base_size, "llama.attention.head_count_kv");
    expect_load_error(dir, base, base_size, heads + 29 + 4, &zero_heads, 4,
                      "metadata key llama.attention.head_count_kv is 0 (1 to 2^30 allowed)");
    uint32_t three = 3;
    expect_load_error(dir, base, base_size, heads + 29 + 4, &three, 4,
                      "head count 4 is not a multiple of the KV head count 3");
    /* Q8_K is sized and skipped by the parser, but a needed tensor of that type is refused */
    char path[512];
    snprintf(path, sizeof path, "%s/wide.gguf", dir);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --dim 256 --heads 4 --layers 1 --ffn 256", path), 0);
    size_t wide_size;
    uint8_t *wide = read_file(path, &wide_size);
    info_at wq = tensor_info(wide, wide_size, "blk.0.attn_q.weight");
    uint32_t q8_k = 15;
    expect_load_error(dir, wide, wide_size, wq.type, &q8_k, 4,
                      "unsupported tensor type Q8_K in tensor blk.0.attn_q.weight");
    free(wide);
}

/* Files from the GGUF writer: every metadata type, nested arrays, other alignments. */
static uint8_t *build(gguf_writer *w, const float *tensor, size_t tensor_bytes, size_t *size) {
    char path[] = "/tmp/em-gguf-built-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "wb");
    gguf_write_header(w, f);
    if (tensor) fwrite(tensor, 1, tensor_bytes, f);
    fclose(f);
    uint8_t *data = read_file(path, size);
    remove(path);
    return data;
}

static void check_metadata_types(void) {
    for (uint32_t version = 2; version <= 3; version++) {
        gguf_writer *w = gguf_writer_new(version);
        gguf_kv_string(w, "s", "hello");
        gguf_kv_u32(w, "u32", 4000000000u);
        gguf_kv_f32(w, "f32", 0.25f);
        gguf_kv_bool(w, "b", true);
        int32_t ints[3] = {-1, 0, 7};
        gguf_kv_i32_array(w, "ints", ints, 3);
        /* every scalar type through kv_copy, and an array of arrays of strings */
        em_gguf_type scalar_types[] = {EM_GGUF_UINT8, EM_GGUF_INT8,   EM_GGUF_UINT16,
                                       EM_GGUF_INT16, EM_GGUF_INT32,  EM_GGUF_UINT64,
                                       EM_GGUF_INT64, EM_GGUF_FLOAT64};
        for (size_t i = 0; i < sizeof scalar_types / sizeof scalar_types[0]; i++) {
            char key[16];
            snprintf(key, sizeof key, "t%d", (int)scalar_types[i]);
            em_gguf_kv kv = {key, {.type = scalar_types[i]}};
            if (scalar_types[i] == EM_GGUF_FLOAT64)
                kv.value.f64 = -2.5;
            else if (scalar_types[i] == EM_GGUF_INT8 || scalar_types[i] == EM_GGUF_INT16 ||
                     scalar_types[i] == EM_GGUF_INT32 || scalar_types[i] == EM_GGUF_INT64)
                kv.value.i64 = -100;
            else
                kv.value.u64 = 200;
            gguf_kv_copy(w, &kv);
        }
        em_gguf_string words[2] = {{1, "a"}, {2, "bc"}};
        em_gguf_value inner[2] = {
            {.type = EM_GGUF_ARRAY, .arr = {EM_GGUF_STRING, 2, NULL, words, NULL}},
            {.type = EM_GGUF_ARRAY, .arr = {EM_GGUF_STRING, 1, NULL, words + 1, NULL}},
        };
        em_gguf_kv nested = {"nested",
                             {.type = EM_GGUF_ARRAY, .arr = {EM_GGUF_ARRAY, 2, NULL, NULL, inner}}};
        gguf_kv_copy(w, &nested);
        int64_t shape[2] = {8, 2};
        float tensor[16];
        for (int i = 0; i < 16; i++) tensor[i] = (float)i;
        gguf_add_tensor(w, "t", EM_TENSOR_F32, 2, shape, sizeof tensor);
        size_t size;
        uint8_t *data = build(w, tensor, sizeof tensor, &size);
        gguf_writer_free(w);
        em_gguf *g;
        em_status err = em_gguf_parse(data, size, "types.gguf", &g);
        CHECK(err == NULL);
        if (err) {
            fprintf(stderr, "%s\n", err->message);
            em_error_free(err);
            free(data);
            continue;
        }
        CHECK_INT_EQ(g->version, version);
        bool found;
        uint64_t u;
        double d;
        em_gguf_string s;
        bool b;
        CHECK(em_gguf_get_string(g, "s", &s, &found) == NULL && found && s.len == 5 &&
              memcmp(s.data, "hello", 5) == 0);
        CHECK(em_gguf_get_u64(g, "u32", &u, &found) == NULL && u == 4000000000u);
        CHECK(em_gguf_get_f64(g, "f32", &d, &found) == NULL && d == 0.25);
        CHECK(em_gguf_get_bool(g, "b", &b, &found) == NULL && b);
        CHECK(em_gguf_get_u64(g, "t0", &u, &found) == NULL && u == 200);
        CHECK(em_gguf_get_u64(g, "t2", &u, &found) == NULL && u == 200);
        CHECK(em_gguf_get_u64(g, "t10", &u, &found) == NULL && u == 200);
        CHECK(em_gguf_get_f64(g, "t12", &d, &found) == NULL && d == -2.5);
        CHECK(em_gguf_find(g, "t1")->value.i64 == -100);
        CHECK(em_gguf_find(g, "t3")->value.i64 == -100);
        CHECK(em_gguf_find(g, "t5")->value.i64 == -100);
        CHECK(em_gguf_find(g, "t11")->value.i64 == -100);
        em_status neg = em_gguf_get_u64(g, "t5", &u, &found);
        CHECK(neg != NULL);
        if (neg) CHECK_CONTAINS(neg->message, "metadata key 't5' is negative (-100)");
        em_error_free(neg);
        const em_gguf_kv *arr = em_gguf_find(g, "ints");
        int32_t back[3];
        memcpy(back, arr->value.arr.data, sizeof back);
        CHECK(arr->value.arr.count == 3 && back[0] == -1 && back[2] == 7);
        const em_gguf_kv *n = em_gguf_find(g, "nested");
        CHECK(n && n->value.arr.elem_type == EM_GGUF_ARRAY && n->value.arr.count == 2);
        if (n && n->value.arr.arrays) {
            const em_gguf_value *second = &n->value.arr.arrays[1];
            CHECK(second->arr.count == 1 && second->arr.strings[0].len == 2 &&
                  memcmp(second->arr.strings[0].data, "bc", 2) == 0);
        }
        CHECK_INT_EQ(g->tensor_count, 1);
        CHECK(g->tensors[0].nbytes == sizeof tensor &&
              memcmp(g->tensors[0].data, tensor, sizeof tensor) == 0);
        em_gguf_close(g);
        free(data);
    }
}

static void check_alignment(void) {
    uint32_t alignments[] = {64, 48, 0};
    for (int i = 0; i < 3; i++) {
        gguf_writer *w = gguf_writer_new(3);
        gguf_kv_u32(w, "general.alignment", alignments[i]);
        int64_t shape[1] = {8};
        float tensor[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        gguf_add_tensor(w, "t", EM_TENSOR_F32, 1, shape, sizeof tensor);
        size_t size;
        uint8_t *data = build(w, NULL, 0, &size);
        gguf_writer_free(w);
        if (alignments[i] == 64) {
            /* the writer pads to 32: extend to the 64-byte boundary, then the tensor */
            size_t start = (size + 63) / 64 * 64;
            data = em_xrealloc(data, start + sizeof tensor);
            memset(data + size, 0, start - size);
            memcpy(data + start, tensor, sizeof tensor);
            em_gguf *g;
            em_status err = em_gguf_parse(data, start + sizeof tensor, "a64.gguf", &g);
            CHECK(err == NULL);
            if (!err) {
                CHECK_INT_EQ(g->alignment, 64);
                CHECK_INT_EQ(g->data_offset, start);
                CHECK(memcmp(g->tensors[0].data, tensor, sizeof tensor) == 0);
                em_gguf_close(g);
            }
            em_error_free(err);
        } else {
            char want[80];
            snprintf(want, sizeof want, "general.alignment is %u, which is not a power of two",
                     alignments[i]);
            expect_parse_error(data, size, want);
        }
        free(data);
    }
    /* alignment stored with a signed type */
    gguf_writer *w = gguf_writer_new(3);
    int32_t one = 32;
    gguf_kv_i32_array(w, "general.alignment", &one, 1);
    size_t size;
    uint8_t *data = build(w, NULL, 0, &size);
    gguf_writer_free(w);
    expect_parse_error(data, size,
                       "general.alignment has type array, expected an unsigned integer");
    free(data);
}

static void check_nesting_limit(void) {
    /* arrays nested 9 deep */
    em_gguf_value levels[9];
    em_gguf_string leaf = {1, "x"};
    levels[0] =
        (em_gguf_value){.type = EM_GGUF_ARRAY, .arr = {EM_GGUF_STRING, 1, NULL, &leaf, NULL}};
    for (int i = 1; i < 9; i++)
        levels[i] = (em_gguf_value){.type = EM_GGUF_ARRAY,
                                    .arr = {EM_GGUF_ARRAY, 1, NULL, NULL, &levels[i - 1]}};
    gguf_writer *w = gguf_writer_new(3);
    em_gguf_kv kv = {"deep", levels[8]};
    gguf_kv_copy(w, &kv);
    size_t size;
    uint8_t *data = build(w, NULL, 0, &size);
    gguf_writer_free(w);
    expect_parse_error(data, size, "metadata key 0 (deep): arrays nested deeper than 8 levels");
    free(data);
}

static void check_wrong_key_type(const char *dir) {
    gguf_writer *w = gguf_writer_new(3);
    gguf_kv_string(w, "general.architecture", "llama");
    gguf_kv_string(w, "llama.context_length", "long");
    size_t size;
    uint8_t *data = build(w, NULL, 0, &size);
    gguf_writer_free(w);
    char path[512];
    snprintf(path, sizeof path, "%s/keytype.gguf", dir);
    write_file(path, data, size);
    em_model *m = NULL;
    em_status err = em_model_load(path, &m);
    CHECK(err != NULL);
    if (err) {
        CHECK_CONTAINS(err->message,
                       "metadata key 'llama.context_length' has type string, expected an integer");
        em_error_free(err);
    }
    free(data);
    em_status missing = em_model_load("/nonexistent/model.gguf", &m);
    CHECK(missing != NULL);
    if (missing) {
        CHECK_CONTAINS(missing->message, "/nonexistent/model.gguf: cannot open model");
        CHECK_INT_EQ(missing->exit_code, EM_EXIT_BAD_INPUT);
    }
    em_error_free(missing);
    snprintf(path, sizeof path, "%s/empty.gguf", dir);
    write_file(path, "", 0);
    em_gguf *g;
    err = em_gguf_open(path, &g);
    CHECK(err != NULL);
    if (err) CHECK_CONTAINS(err->message, "empty.gguf: truncated in header (needs 4 bytes");
    em_error_free(err);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MKMODEL\n", argv[0]);
        return 2;
    }
    char *dir = scratch_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/base.gguf", dir);
    CHECK_INT_EQ(run_mkmodel(argv[1], "--out %s --layers 2 --dim 64 --heads 4 --kv-heads 4", path),
                 0);
    base = read_file(path, &base_size);
    check_truncation();
    check_patches();
    check_model_errors(argv[1], dir);
    check_metadata_types();
    check_alignment();
    check_nesting_limit();
    check_wrong_key_type(dir);
    free(base);
    scratch_remove(dir);
    return test_finish();
}

/* Writes small GGUF images in memory (metadata only, no tensors), so that tests and fuzz targets
 * can build tokenizers from hand-made vocabularies without files. */
#ifndef EVALMESH_TESTS_TOKENIZER_TINY_GGUF_H
#define EVALMESH_TESTS_TOKENIZER_TINY_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct tiny_gguf {
    uint8_t *data;
    size_t len, cap;
    uint64_t n_kv;
} tiny_gguf;

static inline void tg_put(tiny_gguf *g, const void *p, size_t n) {
    if (g->len + n > g->cap) {
        g->cap = 2 * (g->len + n) + 256;
        g->data = realloc(g->data, g->cap);
    }
    memcpy(g->data + g->len, p, n);
    g->len += n;
}
static inline void tg_u32(tiny_gguf *g, uint32_t v) {
    tg_put(g, &v, 4);
}
static inline void tg_u64(tiny_gguf *g, uint64_t v) {
    tg_put(g, &v, 8);
}
static inline void tg_str(tiny_gguf *g, const char *s) {
    tg_u64(g, strlen(s));
    tg_put(g, s, strlen(s));
}

/* Header: magic, version 3, no tensors, the kv count (patched by tg_kv_*). */
static inline tiny_gguf tg_begin(void) {
    tiny_gguf g = {0};
    tg_put(&g, "GGUF", 4);
    tg_u32(&g, 3);
    tg_u64(&g, 0);
    tg_u64(&g, 0);
    return g;
}
static inline void tg_key(tiny_gguf *g, const char *key, uint32_t type) {
    g->n_kv++;
    memcpy(g->data + 16, &g->n_kv, 8);
    tg_str(g, key);
    tg_u32(g, type);
}
static inline void tg_kv_string(tiny_gguf *g, const char *key, const char *value) {
    tg_key(g, key, 8);
    tg_str(g, value);
}
static inline void tg_kv_u32(tiny_gguf *g, const char *key, uint32_t value) {
    tg_key(g, key, 4);
    tg_u32(g, value);
}
static inline void tg_kv_bool(tiny_gguf *g, const char *key, bool value) {
    tg_key(g, key, 7);
    uint8_t b = value;
    tg_put(g, &b, 1);
}
static inline void tg_kv_strings(tiny_gguf *g, const char *key, const char *const *v, size_t n) {
    tg_key(g, key, 9);
    tg_u32(g, 8);
    tg_u64(g, n);
    for (size_t i = 0; i < n; i++) tg_str(g, v[i]);
}
static inline void tg_kv_f32s(tiny_gguf *g, const char *key, const float *v, size_t n) {
    tg_key(g, key, 9);
    tg_u32(g, 6);
    tg_u64(g, n);
    tg_put(g, v, 4 * n);
}
static inline void tg_kv_i32s(tiny_gguf *g, const char *key, const int32_t *v, size_t n) {
    tg_key(g, key, 9);
    tg_u32(g, 5);
    tg_u64(g, n);
    tg_put(g, v, 4 * n);
}

/* The 256 byte-level BPE tokens (GPT-2's byte-to-unicode characters) into tokens[0..256), with
 * their texts in texts. */
static inline void tg_byte_tokens(char texts[256][3], const char **tokens) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        unsigned c = printable ? (unsigned)b : 256u + (unsigned)n++;
        if (c < 0x80)
            texts[b][0] = (char)c;
        else
            texts[b][0] = (char)(0xC0 | c >> 6), texts[b][1] = (char)(0x80 | (c & 63));
        tokens[b] = texts[b];
    }
}

#endif

/* Writes GGUF files: metadata key/values are collected in memory (they are small), tensor infos
 * are declared up front (their offsets follow from their sizes), then the header is written and
 * the caller streams each tensor's bytes in declaration order, each followed by
 * gguf_write_padding. */
#ifndef EVALMESH_GGUF_WRITER_H
#define EVALMESH_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stages/formats/gguf.h"

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t version);
void gguf_writer_free(gguf_writer *w);

void gguf_kv_string(gguf_writer *w, const char *key, const char *value);
void gguf_kv_u32(gguf_writer *w, const char *key, uint32_t value);
void gguf_kv_f32(gguf_writer *w, const char *key, float value);
void gguf_kv_bool(gguf_writer *w, const char *key, bool value);
void gguf_kv_string_array(gguf_writer *w, const char *key, const char *const *values, size_t n);
void gguf_kv_i32_array(gguf_writer *w, const char *key, const int32_t *values, size_t n);
void gguf_kv_f32_array(gguf_writer *w, const char *key, const float *values, size_t n);
/* Copies a key/value read from another GGUF file (any type, nested arrays too). */
void gguf_kv_copy(gguf_writer *w, const em_gguf_kv *kv);

void gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                     const int64_t *shape, size_t nbytes);
/* Writes magic, counts, key/values, tensor infos and the padding before the data. */
bool gguf_write_header(gguf_writer *w, FILE *f);
/* Writes the zeros that follow a tensor of nbytes, up to the alignment. */
bool gguf_write_padding(FILE *f, uint64_t nbytes);

#endif

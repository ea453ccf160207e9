/* Tokenization throughput: encodes a text file with each tokenizer given and prints MB/s (best of
 * a few runs), the token count and the decode speed. Speeds are per second of this thread's CPU
 * time, which a busy shared machine disturbs less than wall-clock time; the wall-clock encode
 * speed is printed too. Usage:
 *   bench_tokenize TEXT_FILE TOKENIZER...   (GGUF files or tokenizer.json) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/tokenizer/tokenizer.h"
#include "util/clock.h"

#define RUNS 3

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    *len = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

static int fail(em_status err) {
    fprintf(stderr, "bench_tokenize: %s\n", err->message);
    return err->exit_code;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenize TEXT_FILE TOKENIZER...\n");
        return 2;
    }
    size_t len;
    char *text = read_file(argv[1], &len);
    if (!text) {
        fprintf(stderr, "bench_tokenize: cannot read %s\n", argv[1]);
        return 2;
    }
    double mb = (double)len / 1e6;
    printf("%s: %.2f MB\n", argv[1], mb);
    printf("%-28s %8s %10s %10s %10s %14s\n", "tokenizer", "load s", "tokens", "enc MB/s",
           "dec MB/s", "enc MB/s wall");
    for (int t = 2; t < argc; t++) {
        double t0 = em_clock_thread_cpu_seconds();
        em_tokenizer *tok;
        em_status err = em_tokenizer_load(argv[t], &tok);
        if (err) return fail(err);
        double load = em_clock_thread_cpu_seconds() - t0;
        em_encode_options options = em_tokenizer_default_options(tok);
        double best_enc = 1e30, best_dec = 1e30, best_wall = 1e30;
        size_t count = 0;
        for (int r = 0; r < RUNS; r++) {
            int32_t *ids;
            double wall0 = em_clock_seconds();
            t0 = em_clock_thread_cpu_seconds();
            if ((err = em_tokenizer_encode(tok, text, len, options, &ids, &count)))
                return fail(err);
            double enc = em_clock_thread_cpu_seconds() - t0;
            double wall = em_clock_seconds() - wall0;
            char *decoded;
            size_t decoded_len;
            t0 = em_clock_thread_cpu_seconds();
            if ((err = em_tokenizer_decode(tok, ids, count, false, &decoded, &decoded_len)))
                return fail(err);
            double dec = em_clock_thread_cpu_seconds() - t0;
            if (decoded_len != len || memcmp(decoded, text, len) != 0)
                printf("  (note: decode does not give back the exact text)\n");
            if (enc < best_enc) best_enc = enc;
            if (wall < best_wall) best_wall = wall;
            if (dec < best_dec) best_dec = dec;
            free(decoded);
            free(ids);
        }
        const char *name = strrchr(argv[t], '/') ? strrchr(argv[t], '/') + 1 : argv[t];
        printf("%-28s %8.3f %10zu %10.2f %10.1f %14.2f\n", name, load, count, mb / best_enc,
               mb / best_dec, mb / best_wall);
        em_tokenizer_free(tok);
    }
    free(text);
    return 0;
}

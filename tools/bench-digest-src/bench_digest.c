/* Speed of the content digest that identifies a model (util/content_digest.h: XXH3-128), with
 * SHA-256 (util/sha256.h) beside it for scale: seconds per GiB over a buffer in memory (what
 * hashing a model whose pages are already resident costs) and, given files, over each file
 * mapped as the model loaders map it (warm page cache after the first pass). Best of a few runs,
 * per second of this thread's CPU time (a busy shared machine disturbs that less than wall
 * time); the wall-clock figure is printed too. Usage:
 *   bench_digest [MiB] [FILE...]   (MiB of the in-memory buffer, default 1024) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/clock.h"
#include "util/content_digest.h"
#include "util/mapped_file.h"
#include "util/sha256.h"

#define RUNS 3

static void digest_xxh3(const void *data, size_t len) {
    char hex[EM_DIGEST_HEX];
    em_content_digest_hex(data, len, hex);
}

static void digest_sha256(const void *data, size_t len) {
    char hex[65];
    em_sha256_hex(data, len, hex);
}

/* Prints the best of RUNS passes of hash over data, in s/GiB and GB/s. */
static void measure(const char *what, const char *hash_name, void (*hash)(const void *, size_t),
                    const void *data, size_t len) {
    double best_cpu = 1e30, best_wall = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double wall = em_clock_seconds(), cpu = em_clock_thread_cpu_seconds();
        hash(data, len);
        cpu = em_clock_thread_cpu_seconds() - cpu;
        wall = em_clock_seconds() - wall;
        if (cpu < best_cpu) best_cpu = cpu;
        if (wall < best_wall) best_wall = wall;
    }
    double gib = (double)len / (1u << 30);
    printf("%-28s %-8s %8.3f s/GiB  %6.2f GB/s (CPU time)  %6.2f GB/s (wall)\n", what, hash_name,
           best_cpu / gib, (double)len / best_cpu / 1e9, (double)len / best_wall / 1e9);
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    if (mib == 0) {
        fprintf(stderr, "usage: bench_digest [MiB] [FILE...]\n");
        return 2;
    }
    size_t len = mib << 20;
    uint8_t *buf = malloc(len);
    if (!buf) {
        fprintf(stderr, "bench_digest: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    uint64_t x = 88172645463325252ull; /* xorshift64: bytes no hash can shortcut */
    for (size_t i = 0; i < len; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        for (size_t k = 0; k < 8 && i + k < len; k++) buf[i + k] = (uint8_t)(x >> (8 * k));
    }
    char what[64];
    snprintf(what, sizeof what, "%zu MiB in memory", mib);
    measure(what, "xxh3-128", digest_xxh3, buf, len);
    measure(what, "sha256", digest_sha256, buf, len);
    free(buf);
    for (int i = 2; i < argc; i++) {
        em_mapped_file file;
        em_status err = em_mapped_file_open(argv[i], "a file to hash", &file);
        if (err) {
            fprintf(stderr, "bench_digest: %s\n", err->message);
            int code = err->exit_code;
            em_error_free(err);
            return code;
        }
        measure(argv[i], "xxh3-128", digest_xxh3, file.data, file.size);
        em_mapped_file_close(&file);
    }
    return 0;
}

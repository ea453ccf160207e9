/* Per-token records of a compare stage (see pair_records.h). */
#include "stages/metrics/pair_records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct em_pair_writer {
    FILE *file;
    char *path;
};

static em_status io_error(const char *what, const char *path) {
    return em_error_new(EM_EXIT_RUNTIME, "cannot %s %s: %s", what, path, strerror(errno));
}

em_status em_pair_writer_open(const char *run_dir, const char *stage, const char *candidate,
                              int rank, const em_pair_key *key, em_pair_writer **out) {
    *out = NULL;
    char *dir = em_xasprintf("%s/records", run_dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        em_status err = io_error("create", dir);
        free(dir);
        return err;
    }
    char *path = em_xasprintf("%s/%s.%s.rank%d.tokens", dir, stage, candidate, rank);
    free(dir);
    FILE *f = fopen(path, "wb");
    if (!f) {
        em_status err = io_error("create", path);
        free(path);
        return err;
    }
    unsigned char header[EM_PAIR_HEADER_BYTES] = {0};
    memcpy(header, "EMPREC01", 8);
    const char *sums[3] = {key->reference_digest, key->candidate_digest, key->dataset_sha256};
    for (int i = 0; i < 3; i++) memcpy(header + 8 + 64 * i, sums[i], strnlen(sums[i], 64));
    uint32_t record = EM_PAIR_RECORD_BYTES;
    memcpy(header + 200, &record, 4);
    em_pair_writer *w = em_xcalloc(1, sizeof *w);
    w->file = f, w->path = path;
    *out = w;
    return fwrite(header, sizeof header, 1, f) == 1 ? NULL : io_error("write", path);
}

em_status em_pair_append(em_pair_writer *w, int64_t window, int32_t first, int32_t n,
                         const int32_t *target, const int32_t *argmax_ref,
                         const int32_t *argmax_cand, const double *nll_ref, const double *nll_cand,
                         const double *kld) {
    for (int32_t t = 0; t < n; t++) {
        unsigned char r[EM_PAIR_RECORD_BYTES];
        int32_t position = first + t;
        memcpy(r, &window, 8);
        memcpy(r + 8, &position, 4);
        memcpy(r + 12, &target[t], 4);
        memcpy(r + 16, &argmax_ref[t], 4);
        memcpy(r + 20, &argmax_cand[t], 4);
        memcpy(r + 24, &nll_ref[t], 8);
        memcpy(r + 32, &nll_cand[t], 8);
        memcpy(r + 40, &kld[t], 8);
        if (fwrite(r, sizeof r, 1, w->file) != 1) return io_error("write", w->path);
    }
    return NULL;
}

em_status em_pair_writer_close(em_pair_writer *w) {
    if (!w) return NULL;
    em_status err = fclose(w->file) == 0 ? NULL : io_error("write", w->path);
    free(w->path);
    free(w);
    return err;
}

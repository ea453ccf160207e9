/* Window records files: writing, and reading back with damage detection (see window_records.h). */
#include "stages/metrics/window_records.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/mapped_file.h"

#define FILE_MAGIC "EMWREC02"
#define OLD_MAGIC "EMWREC01" /* the format before the precision was in the key */
#define HEADER_BYTES 224
#define CRC_AT 216 /* the header's crc32 covers the bytes before it */
#define RECORD_MAGIC 0x52574d45u
#define RECORD_HEAD 12   /* magic, length, crc */
#define PAYLOAD_FIXED 40 /* window, n, 0, words, bytes, nll sum */

struct em_records_writer {
    int fd;
    char *path;
    double flush_s, last_sync;
};

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32). */

em_records_key em_records_key_of(const char *model_digest, const char *dataset_sha256,
                                 const char *recipe_sha256, const char *precision) {
    em_records_key key = {0};
    snprintf(key.model_digest, sizeof key.model_digest, "%s", model_digest ? model_digest : "");
    snprintf(key.dataset_sha256, sizeof key.dataset_sha256, "%s",
             dataset_sha256 ? dataset_sha256 : "");
    snprintf(key.recipe_sha256, sizeof key.recipe_sha256, "%s", recipe_sha256 ? recipe_sha256 : "");
    snprintf(key.precision, sizeof key.precision, "%s", precision ? precision : "exact");
    return key;
}

static uint32_t crc32(const void *data, size_t len) {
    static uint32_t table[256];
    if (!table[1]) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    }
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void make_header(const em_records_key *key, uint8_t h[HEADER_BYTES]) {
    memset(h, 0, HEADER_BYTES);
    memcpy(h, FILE_MAGIC, 8);
    memcpy(h + 8, key->model_digest, 64);
    memcpy(h + 72, key->dataset_sha256, 64);
    memcpy(h + 136, key->recipe_sha256, 64);
    memcpy(h + 200, key->precision, 16);
    uint32_t c = crc32(h, CRC_AT);
    memcpy(h + CRC_AT, &c, 4);
}

static em_status write_all(int fd, const void *data, size_t len, const char *path) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return em_error_new(EM_EXIT_RUNTIME, "writing window records %s: %s", path,
                                n < 0 ? strerror(errno) : "short write");
        p += n;
        len -= (size_t)n;
    }
    return NULL;
}

em_status em_records_writer_open(const char *run_dir, const char *stage, int rank,
                                 const em_records_key *key, double flush_s,
                                 em_records_writer **out) {
    *out = NULL;
    char *dir = em_xasprintf("%s/records", run_dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        em_status err = em_error_new(EM_EXIT_RUNTIME, "creating %s: %s", dir, strerror(errno));
        free(dir);
        return err;
    }
    int fd = -1;
    char *path = NULL;
    for (int n = 0; fd < 0 && n < 100000; n++) {
        free(path);
        path = em_xasprintf("%s/%s.rank%d.%d.bin", dir, stage, rank, n);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    free(dir);
    if (fd < 0) {
        em_status err = em_error_new(EM_EXIT_RUNTIME, "creating %s: %s", path, strerror(errno));
        free(path);
        return err;
    }
    uint8_t h[HEADER_BYTES];
    make_header(key, h);
    em_status err = write_all(fd, h, sizeof h, path);
    if (!err && fsync(fd) != 0)
        err = em_error_new(EM_EXIT_RUNTIME, "fsync %s: %s", path, strerror(errno));
    if (err) {
        close(fd);
        free(path);
        return err;
    }
    em_records_writer *w = em_xcalloc(1, sizeof *w);
    *w = (em_records_writer){fd, path, flush_s, em_clock_seconds()};
    *out = w;
    return NULL;
}

em_status em_records_append(em_records_writer *w, const em_window_record *r) {
    size_t n = (size_t)r->token_count;
    size_t payload = PAYLOAD_FIXED + 16 * n;
    uint8_t *buf = em_xmalloc(RECORD_HEAD + payload);
    uint8_t *p = buf + RECORD_HEAD;
    int32_t n32 = r->token_count, zero = 0;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += r->nll[i];
    memcpy(p, &r->window, 8);
    memcpy(p + 8, &n32, 4);
    memcpy(p + 12, &zero, 4);
    memcpy(p + 16, &r->words, 8);
    memcpy(p + 24, &r->bytes, 8);
    memcpy(p + 32, &sum, 8);
    memcpy(p + PAYLOAD_FIXED, r->target, 4 * n);
    memcpy(p + PAYLOAD_FIXED + 4 * n, r->argmax, 4 * n);
    memcpy(p + PAYLOAD_FIXED + 8 * n, r->nll, 8 * n);
    uint32_t head[3] = {RECORD_MAGIC, (uint32_t)payload, crc32(p, payload)};
    memcpy(buf, head, sizeof head);
    em_status err = write_all(w->fd, buf, RECORD_HEAD + payload, w->path);
    free(buf);
    double now = em_clock_seconds();
    if (!err && now - w->last_sync >= w->flush_s) {
        if (fsync(w->fd) != 0)
            err = em_error_new(EM_EXIT_RUNTIME, "fsync %s: %s", w->path, strerror(errno));
        w->last_sync = now;
    }
    return err;
}

em_status em_records_writer_close(em_records_writer *w) {
    if (!w) return NULL;
    em_status err = NULL;
    if (fsync(w->fd) != 0)
        err = em_error_new(EM_EXIT_RUNTIME, "fsync %s: %s", w->path, strerror(errno));
    close(w->fd);
    free(w->path);
    free(w);
    return err;
}

/* A key field of the file header: where it is and its width, what it names, what identifies it.
 */
typedef struct key_field {
    size_t offset, width;
    const char *what, *by;
} key_field;

/* The refusal for the first key field of header h that differs from key (exit 2, naming the file
 * and the value then and now), NULL when none does. The precision comes first: another precision
 * is also another resolved recipe, and the precision is the difference to name. */
static em_status header_mismatch(const uint8_t *h, const em_records_key *key, const char *path) {
    const key_field fields[] = {{200, 16, "the precision", "precision"},
                                {8, 64, "the model", "digest"},
                                {72, 64, "the dataset file", "sha256"},
                                {136, 64, "the resolved recipe", "sha256"}};
    const char *now[] = {key->precision, key->model_digest, key->dataset_sha256,
                         key->recipe_sha256};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const char *then = (const char *)h + fields[i].offset;
        int length = (int)strnlen(then, fields[i].width);
        if (length == (int)strlen(now[i]) && memcmp(then, now[i], (size_t)length) == 0) continue;
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "resume refused: %s changed since the run wrote %s (its %s then %.*s, "
                            "now %s); resume only with the same precision, model, dataset and "
                            "recipe, or start a new run",
                            fields[i].what, path, fields[i].by, length, then, now[i]);
    }
    return NULL;
}

/* The record at data[at..], when whole and intact: its payload length, else 0. */
static size_t intact_record(const uint8_t *data, size_t size, size_t at) {
    if (size - at < RECORD_HEAD) return 0;
    uint32_t head[3];
    memcpy(head, data + at, sizeof head);
    if (head[0] != RECORD_MAGIC || head[1] < PAYLOAD_FIXED || (head[1] - PAYLOAD_FIXED) % 16)
        return 0;
    if (head[1] > size - at - RECORD_HEAD) return 0;
    if (crc32(data + at + RECORD_HEAD, head[1]) != head[2]) return 0;
    int32_t n;
    memcpy(&n, data + at + RECORD_HEAD + 8, 4);
    return n >= 0 && (size_t)n * 16 + PAYLOAD_FIXED == head[1] ? head[1] : 0;
}

/* Where the records of a read go: copied whole (em_records_read) or only their places
 * (em_records_index_read). keep takes the record whose payload starts at p, at offset in file
 * number `file`, when its window is new and in range, and says whether it did. */
typedef struct records_sink {
    bool (*keep)(struct records_sink *sink, const uint8_t *p, int32_t file, uint64_t offset);
    em_records_found *found;
    em_records_index *index;
} records_sink;

static bool keep_copy(records_sink *sink, const uint8_t *p, int32_t file, uint64_t offset) {
    (void)file, (void)offset;
    em_records_found *f = sink->found;
    em_window_record r = {0};
    memcpy(&r.window, p, 8);
    memcpy(&r.token_count, p + 8, 4);
    memcpy(&r.words, p + 16, 8);
    memcpy(&r.bytes, p + 24, 8);
    if (r.window < 0 || (size_t)r.window >= f->window_limit || f->by_window[r.window]) return false;
    size_t n = (size_t)r.token_count;
    int32_t *target = em_xmalloc(n ? 8 * n : 1);
    double *nll = em_xmalloc(n ? 8 * n : 1);
    memcpy(target, p + PAYLOAD_FIXED, 8 * n); /* target then argmax */
    memcpy(nll, p + PAYLOAD_FIXED + 8 * n, 8 * n);
    r.target = target;
    r.argmax = target + n;
    r.nll = nll;
    em_window_record *copy = em_xmalloc(sizeof *copy);
    *copy = r;
    f->by_window[r.window] = copy;
    return true;
}

static bool keep_place(records_sink *sink, const uint8_t *p, int32_t file, uint64_t offset) {
    em_records_index *ix = sink->index;
    int64_t window;
    int32_t n;
    memcpy(&window, p, 8);
    memcpy(&n, p + 8, 4);
    if (window < 0 || (size_t)window >= ix->window_limit || ix->by_window[window].file >= 0)
        return false;
    ix->by_window[window] = (em_record_place){file, n, offset};
    return true;
}

/* Reads one records file (number `file` of this read) into sink; counts go to *records and
 * *damaged. The pages behind the scan are dropped as it goes, so a big file is not held. */
static em_status read_file(const char *path, const em_records_key *key, int32_t file,
                           records_sink *sink, size_t *records, size_t *damaged) {
    em_mapped_file mf = {0}, *m = &mf;
    em_status err = em_mapped_file_open(path, "a window records file", m);
    if (err) return err;
    const uint8_t *data = m->data;
    size_t size = m->size;
    uint32_t c = 0;
    if (size >= HEADER_BYTES) memcpy(&c, data + CRC_AT, 4);
    if (size >= 8 && memcmp(data, OLD_MAGIC, 8) == 0) {
        em_log_warn("window records %s: written by an older evalmesh (format %s, without the "
                    "precision); its windows are computed again",
                    path, OLD_MAGIC);
        (*damaged)++;
        em_mapped_file_close(m);
        return NULL;
    }
    if (size < HEADER_BYTES || memcmp(data, FILE_MAGIC, 8) != 0 || c != crc32(data, CRC_AT)) {
        em_log_warn("window records %s: no intact header; its windows are computed again", path);
        (*damaged)++;
        em_mapped_file_close(m);
        return NULL;
    }
    err = header_mismatch(data, key, path);
    if (err) {
        em_mapped_file_close(m);
        return err;
    }
    size_t at = HEADER_BYTES, dropped = 0;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), drop_every = (size_t)8 << 20;
    while (at < size) {
        if (m->mapping && at - dropped >= drop_every) { /* the pages before `at` are done */
            size_t upto = at / page * page;
            madvise((void *)(data + dropped), upto - dropped, MADV_DONTNEED);
            dropped = upto;
        }
        size_t payload = intact_record(data, size, at);
        if (payload) {
            *records += sink->keep(sink, data + at + RECORD_HEAD, file, at + RECORD_HEAD);
            at += RECORD_HEAD + payload;
            continue;
        }
        em_log_warn("window records %s: the record at byte %zu is torn or damaged; its window "
                    "is computed again",
                    path, at);
        (*damaged)++;
        /* look for the next intact record */
        for (at++; at < size && !intact_record(data, size, at); at++) {
        }
    }
    em_mapped_file_close(m);
    return NULL;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted paths of <run_dir>/records/<stage>.rank*.bin (so which copy of a window is used
 * does not depend on the directory's order); none without a records directory. */
static char **record_files(const char *run_dir, const char *stage, size_t *count) {
    *count = 0;
    char *dir = em_xasprintf("%s/records", run_dir);
    DIR *d = opendir(dir);
    if (!d) {
        free(dir);
        return NULL;
    }
    char *prefix = em_xasprintf("%s.rank", stage);
    size_t plen = strlen(prefix);
    struct dirent *e;
    char **names = NULL;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, plen) != 0 || len < 4 ||
            strcmp(e->d_name + len - 4, ".bin") != 0)
            continue;
        names = realloc(names, (*count + 1) * sizeof *names);
        if (!names) abort();
        names[(*count)++] = em_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, *count, sizeof *names, compare_names);
    for (size_t i = 0; i < *count; i++) {
        char *path = em_xasprintf("%s/%s", dir, names[i]);
        free(names[i]);
        names[i] = path;
    }
    free(prefix);
    free(dir);
    return names;
}

/* Reads every file of paths into sink, stopping at the first refusal. */
static em_status read_files(char **paths, size_t count, const em_records_key *key,
                            records_sink *sink, size_t *files, size_t *records, size_t *damaged) {
    em_status err = NULL;
    for (size_t i = 0; i < count && !err; i++) {
        err = read_file(paths[i], key, (int32_t)i, sink, records, damaged);
        (*files)++;
    }
    return err;
}

em_status em_records_read(const char *run_dir, const char *stage, const em_records_key *key,
                          size_t window_limit, em_records_found *out) {
    *out = (em_records_found){
        window_limit, em_xcalloc(window_limit ? window_limit : 1, sizeof *out->by_window), 0, 0, 0};
    size_t count;
    char **paths = record_files(run_dir, stage, &count);
    records_sink sink = {keep_copy, out, NULL};
    em_status err = read_files(paths, count, key, &sink, &out->files, &out->records, &out->damaged);
    for (size_t i = 0; i < count; i++) free(paths[i]);
    free(paths);
    return err;
}

em_status em_records_index_read(const char *run_dir, const char *stage, const em_records_key *key,
                                size_t window_limit, em_records_index *out) {
    *out = (em_records_index){.window_limit = window_limit};
    out->by_window = em_xmalloc((window_limit ? window_limit : 1) * sizeof *out->by_window);
    for (size_t w = 0; w < window_limit; w++) out->by_window[w] = (em_record_place){-1, 0, 0};
    size_t count, files = 0;
    out->files = record_files(run_dir, stage, &count);
    out->file_count = count;
    out->fds = em_xmalloc((count ? count : 1) * sizeof *out->fds);
    for (size_t i = 0; i < count; i++) out->fds[i] = open(out->files[i], O_RDONLY | O_CLOEXEC);
    records_sink sink = {keep_place, NULL, out};
    return read_files(out->files, count, key, &sink, &files, &out->records, &out->damaged);
}

em_status em_records_index_load(const em_records_index *ix, size_t window, em_window_record *r,
                                void **buf, size_t *cap) {
    const em_record_place *at = &ix->by_window[window];
    size_t n = (size_t)at->token_count, len = PAYLOAD_FIXED + 16 * n;
    if (*cap < len) {
        free(*buf);
        *buf = em_xmalloc(len);
        *cap = len;
    }
    const char *path = ix->files[at->file];
    int fd = ix->fds[at->file];
    ssize_t got = fd >= 0 ? pread(fd, *buf, len, (off_t)at->offset) : -1;
    int saved = errno;
    if (got != (ssize_t)len)
        return em_error_new(EM_EXIT_RUNTIME,
                            "window records %s: cannot read the record of window "
                            "%zu: %s",
                            path, window,
                            fd < 0    ? "it could not be opened"
                            : got < 0 ? strerror(saved)
                                      : "the file is shorter than when it was read");
    const uint8_t *p = *buf;
    *r = (em_window_record){0};
    memcpy(&r->window, p, 8);
    memcpy(&r->token_count, p + 8, 4);
    memcpy(&r->words, p + 16, 8);
    memcpy(&r->bytes, p + 24, 8);
    r->target = (const int32_t *)(p + PAYLOAD_FIXED);
    r->argmax = r->target + n;
    r->nll = (const double *)(p + PAYLOAD_FIXED + 8 * n);
    return NULL;
}

void em_records_index_free(em_records_index *ix) {
    for (size_t i = 0; i < ix->file_count; i++) {
        if (ix->fds[i] >= 0) close(ix->fds[i]);
        free(ix->files[i]);
    }
    free(ix->fds);
    free(ix->files);
    free(ix->by_window);
    *ix = (em_records_index){0};
}

void em_records_found_free(em_records_found *f) {
    for (size_t i = 0; f->by_window && i < f->window_limit; i++) {
        if (!f->by_window[i]) continue;
        free((void *)f->by_window[i]->target);
        free((void *)f->by_window[i]->nll);
        free(f->by_window[i]);
    }
    free(f->by_window);
    f->by_window = NULL;
}

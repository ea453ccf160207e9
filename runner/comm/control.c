/* The control plane over PMIx (see control.h). Under a launcher every call maps to one PMIx call:
 * put+commit publishes a byte object in the global scope, a fence with PMIX_COLLECT_DATA and
 * PMIX_TIMEOUT makes everyone's data visible, get reads one rank's copy. When the fence times
 * out, the ranks whose probe key cannot be read within a second each are the ones that never
 * reached it: they are named in the error (the first few, then a count). Without a launcher a
 * small list in this process holds rank 0's blobs. */
#include "runner/comm/control.h"

#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool pmix_up;
static pmix_proc_t self;
static int job_size = 1;

/* Blobs of the single rank when there is no launcher. */
typedef struct local_blob {
    char *key;
    void *data;
    size_t bytes;
    struct local_blob *next;
} local_blob;
static local_blob *local_blobs;

em_status em_control_init(bool launched, int *rank, int *size) {
    *rank = 0;
    *size = 1;
    if (!launched) return NULL;
    pmix_status_t rc = PMIx_Init(&self, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return em_error_new(EM_EXIT_DISTRIBUTED,
                            "PMIx_Init failed: %s (PMIX_NAMESPACE is set, so a launcher started "
                            "this process, but its PMIx server did not answer)",
                            PMIx_Error_string(rc));
    pmix_up = true;
    unsigned n = 0;
    if (!em_control_query_u32(PMIX_JOB_SIZE, true, &n) || n == 0) {
        em_control_finalize();
        return em_error_new(EM_EXIT_DISTRIBUTED, "PMIx did not give the job size (PMIX_JOB_SIZE)");
    }
    job_size = (int)n;
    *rank = (int)self.rank;
    *size = job_size;
    return NULL;
}

void em_control_abort(int status, const char *reason) {
    if (pmix_up) PMIx_Abort(status, reason, NULL, 0);
}

void em_control_finalize(void) {
    if (pmix_up) PMIx_Finalize(NULL, 0);
    pmix_up = false;
    while (local_blobs) {
        local_blob *next = local_blobs->next;
        free(local_blobs->key);
        free(local_blobs->data);
        free(local_blobs);
        local_blobs = next;
    }
}

bool em_control_query_u32(const char *pmix_key, bool job_level, unsigned *out) {
    if (!pmix_up) return false;
    pmix_proc_t proc = self;
    if (job_level) proc.rank = PMIX_RANK_WILDCARD;
    pmix_value_t *val = NULL;
    if (PMIx_Get(&proc, pmix_key, NULL, 0, &val) != PMIX_SUCCESS || !val) return false;
    pmix_status_t rc;
    unsigned n = 0;
    PMIX_VALUE_GET_NUMBER(rc, val, n, unsigned);
    PMIX_VALUE_RELEASE(val);
    if (rc != PMIX_SUCCESS) return false;
    *out = n;
    return true;
}

em_status em_control_put(const char *key, const void *data, size_t bytes) {
    if (!pmix_up) {
        local_blob *b = local_blobs;
        while (b && strcmp(b->key, key) != 0) b = b->next;
        if (!b) {
            b = em_xcalloc(1, sizeof *b);
            b->key = em_xstrdup(key);
            b->next = local_blobs;
            local_blobs = b;
        }
        free(b->data);
        b->data = em_xmalloc(bytes ? bytes : 1);
        memcpy(b->data, data, bytes);
        b->bytes = bytes;
        return NULL;
    }
    pmix_value_t val;
    pmix_byte_object_t bo = {.bytes = (char *)data, .size = bytes};
    PMIx_Value_load(&val, &bo, PMIX_BYTE_OBJECT);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    PMIx_Value_destruct(&val);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return em_error_new(EM_EXIT_DISTRIBUTED, "PMIx put of '%s' failed: %s", key,
                            PMIx_Error_string(rc));
    return NULL;
}

/* Reads rank's value of key into a new pmix_value_t, waiting at most timeout_s (0: no limit). */
static pmix_status_t get_value(int rank, const char *key, int timeout_s, pmix_value_t **val) {
    pmix_proc_t proc = self;
    proc.rank = (pmix_rank_t)rank;
    pmix_info_t info;
    PMIx_Info_load(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    pmix_status_t rc = PMIx_Get(&proc, key, timeout_s > 0 ? &info : NULL, timeout_s > 0, val);
    PMIX_INFO_DESTRUCT(&info);
    return rc;
}

em_status em_control_fence(double timeout_s, const char *probe_key) {
    if (!pmix_up) return NULL;
    int seconds = timeout_s < 1 ? 1 : (int)(timeout_s + 0.5);
    bool collect = true;
    pmix_info_t info[2];
    PMIx_Info_load(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIx_Info_load(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    pmix_proc_t all = self;
    all.rank = PMIX_RANK_WILDCARD;
    pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_SUCCESS) return NULL;
    if (rc != PMIX_ERR_TIMEOUT || !probe_key)
        return em_error_new(EM_EXIT_DISTRIBUTED, "PMIx fence failed: %s", PMIx_Error_string(rc));

    /* Which ranks never published their probe key? Stop after a few, they cost a second each. */
    char names[256] = "";
    size_t used = 0;
    int missing = 0, probed = 0;
    for (int r = 0; r < job_size && missing < 8; r++) {
        if (r == (int)self.rank) continue;
        pmix_value_t *val = NULL;
        probed++;
        if (get_value(r, probe_key, 1, &val) == PMIX_SUCCESS) {
            PMIX_VALUE_RELEASE(val);
            continue;
        }
        int n = snprintf(names + used, sizeof names - used, "%s%d", missing ? "," : "", r);
        if (n > 0 && (size_t)n < sizeof names - used) used += (size_t)n;
        missing++;
    }
    if (missing == 0)
        return em_error_new(EM_EXIT_DISTRIBUTED,
                            "PMIx fence did not complete within %d s (every other rank had "
                            "published its data: a rank left or the launcher stalled in the "
                            "fence)",
                            seconds);
    return em_error_new(EM_EXIT_DISTRIBUTED,
                        "PMIx fence did not complete within %d s: rank%s %s%s did not answer",
                        seconds, missing > 1 ? "s" : "", names,
                        probed < job_size - 1 ? " (and perhaps more: probing stopped there)" : "");
}

em_status em_control_get(int rank, const char *key, void *data, size_t bytes) {
    if (!pmix_up) {
        local_blob *b = local_blobs;
        while (b && strcmp(b->key, key) != 0) b = b->next;
        if (rank != 0 || !b)
            return em_error_new(EM_EXIT_FAILURE, "control plane: rank %d has no '%s'", rank, key);
        if (b->bytes != bytes)
            return em_error_new(EM_EXIT_FAILURE, "control plane: '%s' has %zu bytes, expected %zu",
                                key, b->bytes, bytes);
        memcpy(data, b->data, bytes);
        return NULL;
    }
    pmix_value_t *val = NULL;
    pmix_status_t rc = get_value(rank, key, 0, &val);
    if (rc != PMIX_SUCCESS)
        return em_error_new(EM_EXIT_DISTRIBUTED, "PMIx get of '%s' from rank %d failed: %s", key,
                            rank, PMIx_Error_string(rc));
    em_status err = NULL;
    if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != bytes)
        err = em_error_new(EM_EXIT_DISTRIBUTED, "PMIx value '%s' of rank %d is not a %zu-byte blob",
                           key, rank, bytes);
    else
        memcpy(data, val->data.bo.bytes, bytes);
    PMIX_VALUE_RELEASE(val);
    return err;
}

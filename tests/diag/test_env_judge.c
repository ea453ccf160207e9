/* Version requirements and the judging of environment facts against requirements, on made-up
 * facts so every verdict is known in advance. */
#include <string.h>

#include "runner/diag/env_probe.h"
#include "runner/diag/version_req.h"
#include "test.h"

static bool satisfies(const char *version, const char *req) {
    bool ok = false;
    em_status err = em_version_satisfies(version, req, &ok);
    CHECK(err == NULL);
    em_error_free(err);
    return ok;
}

static const em_env_check *find_check(const em_env_report *r, const char *name) {
    for (int i = 0; i < r->check_count; i++)
        if (strcmp(r->checks[i].name, name) == 0) return &r->checks[i];
    return NULL;
}

/* The reason text of a check ("" when the check is missing, which then fails the comparison). */
static const char *reason_of(const em_env_report *r, const char *name) {
    const em_env_check *c = find_check(r, name);
    return c ? c->reason : "(no such check)";
}

static int status_of(const em_env_report *r, const char *name) {
    const em_env_check *c = find_check(r, name);
    return c ? (int)c->status : -1;
}

static em_env_facts sample_facts(void) {
    em_env_facts f;
    memset(&f, 0, sizeof f);
    strcpy(f.hostname, "node7");
    strcpy(f.os, "Debian GNU/Linux 12 (bookworm)");
    strcpy(f.kernel, "6.1.0-18-amd64");
    strcpy(f.cpu_model, "Test CPU");
    f.cores_online = f.cores_usable = 8;
    f.memory_total_gb = 64;
    f.memory_available_gb = 50;
    strcpy(f.openblas_config, "OpenBLAS 0.3.21");
    f.openblas_threads = 8;
    f.omp_threads = 8;
    strcpy(f.pmix, "OpenPMIx 4.2.2");
    strcpy(f.mpi_library, "Open MPI v4.1.4");
    return f;
}

int main(void) {
    CHECK_INT_EQ(em_version_compare("2.14", "2.14.0"), 0);
    CHECK_INT_EQ(em_version_compare("2.9.1", "2.14"), -1);
    CHECK_INT_EQ(em_version_compare("6.1.0-18-amd64", "4.15"), 1);
    CHECK(satisfies("2.18.3", ">=2.14"));
    CHECK(!satisfies("2.12.10", ">=2.14"));
    CHECK(satisfies("4.15", "4.15"));
    CHECK(satisfies("4.2.2", "==4.2.2"));
    CHECK(!satisfies("4.2.2", "<4.2"));
    CHECK(satisfies("3.9", "<4"));
    bool ok;
    em_status err = em_version_satisfies("1.0", ">=two", &ok);
    CHECK(err != NULL);
    if (err) CHECK_CONTAINS(err->message, "version requirement '>=two' is not OPERATOR VERSION");
    if (err) CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    em_error_free(err);

    /* Defaults: a modern kernel passes, no NCCL is only information. */
    em_env_facts f = sample_facts();
    em_env_requirements req = em_env_default_requirements();
    em_env_report r;
    CHECK(em_env_judge(&f, &req, &r) == NULL);
    CHECK_INT_EQ(r.failures, 0);
    CHECK_INT_EQ(status_of(&r, "kernel"), EM_CHECK_PASS);
    CHECK_STR_EQ(reason_of(&r, "kernel"), "6.1.0-18-amd64 satisfies >=4.15");
    CHECK_INT_EQ(status_of(&r, "nccl"), EM_CHECK_INFO);

    /* An old kernel, an old NCCL, too little memory, too few GPUs: four failures. */
    strcpy(f.kernel, "4.10.0");
    strcpy(f.nccl, "2.12.10");
    strcpy(f.cuda_driver, "12.4");
    f.gpu_count = 1;
    req.min_memory_gb = 100;
    req.gpus_per_rank = 1;
    req.local_size = 2;
    CHECK(em_env_judge(&f, &req, &r) == NULL);
    CHECK_INT_EQ(r.failures, 4);
    CHECK_STR_EQ(reason_of(&r, "kernel"), "4.10.0 does not satisfy >=4.15");
    CHECK_STR_EQ(reason_of(&r, "nccl"), "2.12.10 does not satisfy >=2.14");
    CHECK_STR_EQ(reason_of(&r, "memory"), "50.0 GiB available, 100.0 GiB required");
    CHECK_STR_EQ(reason_of(&r, "gpus"), "2 ranks on this node x 1 GPUs per rank = 2 needed");

    /* require: {gpus: 2} on a node without a driver fails and says why; with 2 GPUs it passes,
     * and the topology is reported as information. */
    em_env_facts n = sample_facts();
    em_env_requirements need_gpus = em_env_default_requirements();
    need_gpus.gpus = 2;
    CHECK(em_env_judge(&n, &need_gpus, &r) == NULL);
    CHECK_INT_EQ(status_of(&r, "gpus"), EM_CHECK_FAIL);
    CHECK_STR_EQ(reason_of(&r, "gpus"),
                 "2 required (require: {gpus: 2}); no CUDA driver on this node");
    strcpy(n.cuda_driver, "12.4");
    n.gpu_count = 2;
    strcpy(n.gpu_topology, "GPU0-GPU1 NV18");
    CHECK(em_env_judge(&n, &need_gpus, &r) == NULL);
    CHECK_INT_EQ(status_of(&r, "gpus"), EM_CHECK_PASS);
    CHECK_INT_EQ(status_of(&r, "topology"), EM_CHECK_INFO);

    /* A required NCCL that is absent fails; the fingerprint follows the NCCL version. */
    em_env_facts g = sample_facts();
    em_env_requirements need_nccl = em_env_default_requirements();
    need_nccl.nccl = ">=2.14";
    CHECK(em_env_judge(&g, &need_nccl, &r) == NULL);
    CHECK_INT_EQ(status_of(&r, "nccl"), EM_CHECK_FAIL);
    em_env_facts h = g;
    CHECK(em_env_fingerprint(&g) == em_env_fingerprint(&h));
    strcpy(h.nccl, "2.18.1");
    CHECK(em_env_fingerprint(&g) != em_env_fingerprint(&h));

    /* The real machine: collecting never fails and finds at least one core. */
    em_env_facts real;
    em_env_collect(&real);
    CHECK(real.cores_online >= 1);
    CHECK(real.memory_total_gb > 0);
    CHECK(strlen(real.kernel) > 0);
    return test_finish();
}

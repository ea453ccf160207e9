/* What this machine offers an evaluation: OS, kernel, CPU, the CPU forward's kernels for each
 * precision, memory, OpenMP threads (and OpenBLAS's when built with it), CUDA driver and GPUs,
 * NCCL, PMIx, MPI, network interfaces. Collected without initialising anything that could hang
 * (CUDA and NCCL are looked up with dlopen, so a CPU-only machine is fine), then judged line by
 * line (pass/warn/fail with the reason) against requirements. Used by `evalmesh check-env` and the
 * env_check stage. */
#ifndef EVALMESH_ENV_PROBE_H
#define EVALMESH_ENV_PROBE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

#define EM_ENV_MAX_GPUS 16
#define EM_ENV_MAX_IFACES 16
#define EM_ENV_MAX_CHECKS 48

typedef struct em_env_iface {
    char name[32];
    char address[64];
    int speed_mbps; /* -1 when the link speed is unknown (virtual interfaces) */
    bool up;
} em_env_iface;

typedef struct em_env_facts {
    char hostname[64];
    char os[128];
    char kernel[64];
    char cpu_model[128];
    int cores_online;
    int cores_usable; /* in this process's affinity mask */
    double memory_total_gb;
    double memory_available_gb;
    char openblas_config[160]; /* "" when built without OpenBLAS */
    int openblas_threads;
    int omp_threads;
    char omp_waits[64]; /* how libgomp's threads wait: the variables it read */
    /* the CPU forward's kernels: "exact: gemm avx2; ggml: avx2 (types)", or why
     * EVALMESH_CPU_KERNEL cannot be used (cpu_kernels_error) */
    char cpu_kernels[200];
    bool cpu_kernels_error;
    char cuda_driver[32];  /* "" when no driver */
    char cuda_runtime[32]; /* "" when no runtime library */
    int gpu_count;
    char gpu_names[EM_ENV_MAX_GPUS][96];
    double gpu_memory_gb[EM_ENV_MAX_GPUS];
    char gpu_topology[200]; /* GPU pairs and their link from `nvidia-smi topo -m`, "" without */
    char nccl[32];          /* "" when not found */
    char pmix[64];
    bool pmix_launched; /* started by a PMIx launcher (a server is there) */
    char mpi_library[160];
    em_env_iface ifaces[EM_ENV_MAX_IFACES];
    int iface_count;
} em_env_facts;

typedef enum em_check_status {
    EM_CHECK_INFO,
    EM_CHECK_PASS,
    EM_CHECK_WARN,
    EM_CHECK_FAIL,
} em_check_status;

typedef struct em_env_check {
    char name[24];
    char value[200];
    em_check_status status;
    char reason[200];
} em_env_check;

/* Thresholds; NULL / 0 / negative means "no requirement" (defaults of check-env are in
 * em_env_default_requirements). */
typedef struct em_env_requirements {
    const char *kernel;      /* e.g. ">=4.15" */
    const char *nccl;        /* e.g. ">=2.14"; when set NCCL must be present */
    const char *cuda_driver; /* e.g. ">=12.0" */
    const char *pmix;        /* e.g. ">=4" */
    double min_memory_gb;    /* available memory */
    int gpus_per_rank;       /* GPUs this rank needs: node GPUs >= gpus_per_rank * local_size */
    int gpus;                /* GPUs this node must have (require: {gpus: N}) */
    int local_size;          /* ranks on this node */
} em_env_requirements;

typedef struct em_env_report {
    em_env_facts facts;
    em_env_check checks[EM_ENV_MAX_CHECKS];
    int check_count;
    int failures;
    int warnings;
} em_env_report;

void em_env_collect(em_env_facts *facts);
em_env_requirements em_env_default_requirements(void);
/* Judges facts against req into report (copies facts). A malformed requirement is an error. */
em_status em_env_judge(const em_env_facts *facts, const em_env_requirements *req,
                       em_env_report *report);
/* A 64-bit fingerprint of what must match across ranks for results to be comparable: OS,
 * kernel, CPU model, BLAS configuration, CUDA driver, NCCL, PMIx and MPI versions. */
uint64_t em_env_fingerprint(const em_env_facts *facts);

const char *em_check_status_name(em_check_status status);
void em_env_print_text(const em_env_report *report, FILE *out);
/* The report as a JSON object (host, failures, warnings, fingerprint, checks); the caller
 * deletes it. */
cJSON *em_env_report_json(const em_env_report *report);

#endif

/* Collecting and judging the facts of the environment (see env_probe.h). */
#include "runner/diag/env_probe.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netdb.h>
#include <omp.h>
#include <pmix.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "build_info.h"
#include "runner/diag/version_req.h"
#include "stages/kernels/cpu/bf16_dot.h"
#include "stages/kernels/cpu/gemm_microkernel.h"
#include "stages/kernels/cpu/ggml_dot.h"

/* The first line of `path` that starts with `key`, the part after the first ':' or '=' trimmed
 * (and unquoted) into out. */
static bool read_keyed_line(const char *path, const char *key, char *out, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) != 0) continue;
        char *v = strpbrk(line, ":=");
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t' || *v == '"') v++;
        size_t n = strcspn(v, "\"\n");
        v[n] = 0;
        snprintf(out, size, "%s", v);
        found = true;
        break;
    }
    fclose(f);
    return found;
}

static double meminfo_gb(const char *key) {
    char value[64];
    if (!read_keyed_line("/proc/meminfo", key, value, sizeof value)) return 0;
    return strtod(value, NULL) / (1024.0 * 1024.0); /* kB -> GiB */
}

static void *open_first(const char *const *names) {
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

/* OpenBLAS through dlopen, when installed: evalmesh computes nothing with it, and linking it
 * started its thread pool in every process, spinning on a core beside the forward's threads
 * through the first tenth of a second. */
static void collect_openblas(em_env_facts *f) {
    const char *libs[] = {"libopenblas.so.0", "libopenblas.so", NULL};
    void *blas = open_first(libs);
    if (!blas) return;
    char *(*config)(void) = (char *(*)(void))dlsym(blas, "openblas_get_config");
    int (*threads)(void) = (int (*)(void))dlsym(blas, "openblas_get_num_threads");
    if (config && threads) {
        snprintf(f->openblas_config, sizeof f->openblas_config, "%s", config());
        f->openblas_threads = threads();
    }
    dlclose(blas);
}

/* CUDA driver API through dlopen: a CPU-only machine has no libcuda and that is fine. */
static void collect_cuda(em_env_facts *f) {
    const char *driver_libs[] = {"libcuda.so.1", "libcuda.so", NULL};
    void *cuda = open_first(driver_libs);
    if (cuda) {
        int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
        int (*cu_version)(int *) = (int (*)(int *))dlsym(cuda, "cuDriverGetVersion");
        int (*cu_count)(int *) = (int (*)(int *))dlsym(cuda, "cuDeviceGetCount");
        int (*cu_get)(int *, int) = (int (*)(int *, int))dlsym(cuda, "cuDeviceGet");
        int (*cu_name)(char *, int, int) =
            (int (*)(char *, int, int))dlsym(cuda, "cuDeviceGetName");
        int (*cu_mem)(size_t *, int) = (int (*)(size_t *, int))dlsym(cuda, "cuDeviceTotalMem_v2");
        int version = 0;
        if (cu_version && cu_version(&version) == 0 && version > 0)
            snprintf(f->cuda_driver, sizeof f->cuda_driver, "%d.%d", version / 1000,
                     (version % 1000) / 10);
        int count = 0;
        if (cu_init && cu_count && cu_init(0) == 0 && cu_count(&count) == 0) {
            f->gpu_count = count;
            for (int i = 0; i < count && i < EM_ENV_MAX_GPUS; i++) {
                int dev = 0;
                if (!cu_get || cu_get(&dev, i) != 0) continue;
                if (cu_name) cu_name(f->gpu_names[i], (int)sizeof f->gpu_names[i], dev);
                size_t bytes = 0;
                if (cu_mem && cu_mem(&bytes, dev) == 0)
                    f->gpu_memory_gb[i] = (double)bytes / (1024.0 * 1024.0 * 1024.0);
            }
        }
        dlclose(cuda);
    }
    const char *runtime_libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                  "/usr/local/cuda/lib64/libcudart.so", NULL};
    void *rt = open_first(runtime_libs);
    if (rt) {
        int (*rt_version)(int *) = (int (*)(int *))dlsym(rt, "cudaRuntimeGetVersion");
        int version = 0;
        if (rt_version && rt_version(&version) == 0 && version > 0)
            snprintf(f->cuda_runtime, sizeof f->cuda_runtime, "%d.%d", version / 1000,
                     (version % 1000) / 10);
        dlclose(rt);
    }
    const char *nccl_libs[] = {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2",
                               NULL};
    void *nccl = open_first(nccl_libs);
    if (nccl) {
        int (*get_version)(int *) = (int (*)(int *))dlsym(nccl, "ncclGetVersion");
        int code = 0;
        if (get_version && get_version(&code) == 0 && code > 0) {
            /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch, older major*1000 + minor*100 */
            int major = code >= 10000 ? code / 10000 : code / 1000;
            int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
            snprintf(f->nccl, sizeof f->nccl, "%d.%d.%d", major, minor, code % 100);
        }
        dlclose(nccl);
    }
}

/* The links between GPU pairs from `nvidia-smi topo -m` (NV# NVLink, PIX/PXB/PHB/NODE/SYS PCIe
 * paths), as "GPU0-GPU1 NV18, GPU0-GPU2 NV18, ..." (truncated to fit); "" when nvidia-smi is
 * absent or lists no GPU. Bounded by timeout(1), so a wedged driver cannot hang the check. */
static void collect_topology(em_env_facts *f) {
    FILE *p = popen("timeout 10 nvidia-smi topo -m 2>/dev/null", "r");
    if (!p) return;
    char line[1024];
    int gpus = 0, used = 0;
    size_t room = sizeof f->gpu_topology;
    while (fgets(line, sizeof line, p)) {
        /* the header names the columns GPU0 GPU1 ...; rows start with their GPU */
        if (gpus == 0 && strstr(line, "GPU0")) {
            for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"))
                gpus += strncmp(t, "GPU", 3) == 0;
            continue;
        }
        int row;
        if (gpus == 0 || sscanf(line, "GPU%d", &row) != 1) continue;
        strtok(line, " \t\n");
        for (int col = 0; col < gpus; col++) {
            char *link = strtok(NULL, " \t\n");
            if (!link) break;
            if (col <= row || used >= (int)room - 1) continue;
            used += snprintf(f->gpu_topology + used, room - (size_t)used, "%sGPU%d-GPU%d %s",
                             used ? ", " : "", row, col, link);
        }
    }
    pclose(p);
    if (gpus == 1) snprintf(f->gpu_topology, room, "one GPU (no peer links)");
}

static void collect_network(em_env_facts *f) {
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0) return;
    for (struct ifaddrs *ifa = list; ifa && f->iface_count < EM_ENV_MAX_IFACES;
         ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
        em_env_iface *it = &f->ifaces[f->iface_count++];
        snprintf(it->name, sizeof it->name, "%s", ifa->ifa_name);
        getnameinfo(ifa->ifa_addr, sizeof(struct sockaddr_storage), it->address, sizeof it->address,
                    NULL, 0, NI_NUMERICHOST);
        char path[128], value[32];
        snprintf(path, sizeof path, "/sys/class/net/%s/speed", it->name);
        it->speed_mbps = -1;
        FILE *sf = fopen(path, "r");
        if (sf) {
            if (fgets(value, sizeof value, sf)) it->speed_mbps = atoi(value);
            fclose(sf);
            if (it->speed_mbps <= 0) it->speed_mbps = -1;
        }
        snprintf(path, sizeof path, "/sys/class/net/%s/operstate", it->name);
        it->up = true;
        sf = fopen(path, "r");
        if (sf) {
            if (fgets(value, sizeof value, sf)) it->up = strncmp(value, "down", 4) != 0;
            fclose(sf);
        }
    }
    freeifaddrs(list);
}

/* The kernels each precision of the CPU forward chooses here (gemm_microkernel.h, ggml_dot.h,
 * bf16_dot.h). */
static void collect_cpu_kernels(em_env_facts *f) {
    em_gemm_microkernel *gemm;
    const char *gemm_name;
    const em_ggml_kernel *ggml;
    const em_bf16_kernel *bf16;
    em_status err = em_gemm_microkernel_select(&gemm, &gemm_name);
    if (!err) err = em_ggml_kernel_select(&ggml);
    if (!err) err = em_bf16_kernel_select(&bf16);
    if (err) {
        snprintf(f->cpu_kernels, sizeof f->cpu_kernels, "%s", err->message);
        f->cpu_kernels_error = true;
        em_error_free(err);
        return;
    }
    snprintf(f->cpu_kernels, sizeof f->cpu_kernels, "exact: gemm %s; ggml: %s (%s); bf16: %s",
             gemm_name, ggml->name, em_ggml_dot_type_names(), bf16->name);
}

void em_env_collect(em_env_facts *f) {
    memset(f, 0, sizeof *f);
    gethostname(f->hostname, sizeof f->hostname - 1);
    if (!read_keyed_line("/etc/os-release", "PRETTY_NAME", f->os, sizeof f->os))
        snprintf(f->os, sizeof f->os, "unknown");
    struct utsname u;
    if (uname(&u) == 0) snprintf(f->kernel, sizeof f->kernel, "%s", u.release);
    if (!read_keyed_line("/proc/cpuinfo", "model name", f->cpu_model, sizeof f->cpu_model))
        snprintf(f->cpu_model, sizeof f->cpu_model, "unknown");
    f->cores_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    f->cores_usable =
        sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : f->cores_online;
    f->memory_total_gb = meminfo_gb("MemTotal");
    f->memory_available_gb = meminfo_gb("MemAvailable");
    collect_openblas(f);
    f->omp_threads = omp_get_max_threads();
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    snprintf(f->omp_waits, sizeof f->omp_waits, "%s%s%s%s%s", policy ? "OMP_WAIT_POLICY=" : "",
             policy ? policy : "", policy && spin ? " " : "", spin ? "GOMP_SPINCOUNT=" : "",
             spin ? spin : "");
    if (!policy && !spin) snprintf(f->omp_waits, sizeof f->omp_waits, "libgomp's default");
    collect_cpu_kernels(f);
    collect_cuda(f);
    if (f->gpu_count > 0) collect_topology(f);
    snprintf(f->pmix, sizeof f->pmix, "%s", PMIx_Get_version());
    f->pmix[strcspn(f->pmix, "(")] = 0; /* "OpenPMIx 4.2.2rc2 (PMIx Standard: ...)" */
    size_t len = strlen(f->pmix);
    while (len > 0 && f->pmix[len - 1] == ' ') f->pmix[--len] = 0;
    f->pmix_launched = getenv("PMIX_NAMESPACE") != NULL || getenv("PMIX_RANK") != NULL;
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int mpi_len = 0;
    MPI_Get_library_version(mpi, &mpi_len);
    mpi[strcspn(mpi, ",\n")] = 0;
    snprintf(f->mpi_library, sizeof f->mpi_library, "%s", mpi);
    collect_network(f);
}

em_env_requirements em_env_default_requirements(void) {
    em_env_requirements req = {0};
    req.kernel = ">=4.15";
    req.local_size = 1;
    return req;
}

static em_env_check *add_check(em_env_report *r, const char *name, em_check_status status,
                               const char *value, const char *reason_fmt, ...)
    __attribute__((format(printf, 5, 6)));

static em_env_check *add_check(em_env_report *r, const char *name, em_check_status status,
                               const char *value, const char *reason_fmt, ...) {
    if (r->check_count >= EM_ENV_MAX_CHECKS) return NULL;
    em_env_check *c = &r->checks[r->check_count++];
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->value, sizeof c->value, "%s", value);
    c->status = status;
    va_list ap;
    va_start(ap, reason_fmt);
    vsnprintf(c->reason, sizeof c->reason, reason_fmt, ap);
    va_end(ap);
    if (status == EM_CHECK_FAIL) r->failures++;
    if (status == EM_CHECK_WARN) r->warnings++;
    return c;
}

/* A version check: pass/fail against requirement, or info when there is none. */
static em_status check_version(em_env_report *r, const char *name, const char *version,
                               const char *requirement) {
    if (!requirement) {
        add_check(r, name, EM_CHECK_INFO, version, "%s", "");
        return NULL;
    }
    bool ok = false;
    em_status err = em_version_satisfies(version, requirement, &ok);
    if (err) return em_error_prefix(err, "require.%s", name);
    add_check(r, name, ok ? EM_CHECK_PASS : EM_CHECK_FAIL, version, "%s %s %s", version,
              ok ? "satisfies" : "does not satisfy", requirement);
    return NULL;
}

em_status em_env_judge(const em_env_facts *f, const em_env_requirements *req, em_env_report *r) {
    memset(r, 0, sizeof *r);
    r->facts = *f;
    char value[200];
    em_status err;

    add_check(r, "host", EM_CHECK_INFO, f->hostname, "%s", "");
    add_check(r, "os", EM_CHECK_INFO, f->os, "%s", "");
    if ((err = check_version(r, "kernel", f->kernel, req->kernel))) return err;
    snprintf(value, sizeof value, "%s, %d cores online, %d usable", f->cpu_model, f->cores_online,
             f->cores_usable);
    add_check(r, "cpu", EM_CHECK_INFO, value, "%s", "");
    add_check(r, "cpu kernels", f->cpu_kernels_error ? EM_CHECK_FAIL : EM_CHECK_INFO,
              f->cpu_kernels, "%s",
              f->cpu_kernels_error ? "set EVALMESH_CPU_KERNEL right or unset it" : "");

    snprintf(value, sizeof value, "%.1f GiB total, %.1f GiB available", f->memory_total_gb,
             f->memory_available_gb);
    if (req->min_memory_gb > 0)
        add_check(r, "memory",
                  f->memory_available_gb >= req->min_memory_gb ? EM_CHECK_PASS : EM_CHECK_FAIL,
                  value, "%.1f GiB available, %.1f GiB required", f->memory_available_gb,
                  req->min_memory_gb);
    else if (f->memory_available_gb < 1.0)
        add_check(r, "memory", EM_CHECK_WARN, value, "less than 1 GiB available");
    else
        add_check(r, "memory", EM_CHECK_PASS, value, "%s", "");

    int per_node_threads =
        f->openblas_threads > f->omp_threads ? f->openblas_threads : f->omp_threads;
    int local = req->local_size > 0 ? req->local_size : 1;
    if (f->openblas_config[0])
        snprintf(value, sizeof value, "OpenBLAS %d threads (%s); OpenMP %d threads, waits %s",
                 f->openblas_threads, f->openblas_config, f->omp_threads, f->omp_waits);
    else
        snprintf(value, sizeof value, "OpenMP %d threads, waits %s", f->omp_threads, f->omp_waits);
    if (per_node_threads * local > f->cores_usable * 2)
        add_check(r, "threads", EM_CHECK_WARN, value,
                  "%d ranks x %d threads oversubscribe %d cores: set OMP_NUM_THREADS or threads:",
                  local, per_node_threads, f->cores_usable);
    else
        add_check(r, "threads", EM_CHECK_PASS, value, "%s", "");

    if (f->cuda_driver[0]) {
        snprintf(value, sizeof value, "driver %s, runtime %s", f->cuda_driver,
                 f->cuda_runtime[0] ? f->cuda_runtime : "not found");
        if ((err = check_version(r, "cuda", f->cuda_driver, req->cuda_driver))) return err;
        snprintf(r->checks[r->check_count - 1].value, sizeof r->checks[0].value, "%s", value);
    } else if (req->cuda_driver) {
        add_check(r, "cuda", EM_CHECK_FAIL, "no CUDA driver", "CUDA driver %s required",
                  req->cuda_driver);
    } else {
        add_check(r, "cuda", EM_CHECK_INFO, "no CUDA driver", "CPU only (runtime %s)",
                  f->cuda_runtime[0] ? f->cuda_runtime : "not found");
    }
    for (int i = 0; i < f->gpu_count && i < EM_ENV_MAX_GPUS; i++) {
        snprintf(value, sizeof value, "%d: %s, %.0f GiB", i, f->gpu_names[i], f->gpu_memory_gb[i]);
        add_check(r, "gpu", EM_CHECK_INFO, value, "%s", "");
    }
    if (f->gpu_topology[0]) add_check(r, "topology", EM_CHECK_INFO, f->gpu_topology, "%s", "");
    if (req->gpus > 0) {
        snprintf(value, sizeof value, "%d GPUs on this node", f->gpu_count);
        add_check(r, "gpus", f->gpu_count >= req->gpus ? EM_CHECK_PASS : EM_CHECK_FAIL, value,
                  "%d required (require: {gpus: %d})%s", req->gpus, req->gpus,
                  f->gpu_count >= req->gpus ? ""
                  : f->cuda_driver[0]       ? ""
                                            : "; no CUDA driver on this node");
    }
    if (req->gpus_per_rank > 0) {
        int needed = req->gpus_per_rank * local;
        snprintf(value, sizeof value, "%d GPUs on this node", f->gpu_count);
        add_check(r, "gpus", f->gpu_count >= needed ? EM_CHECK_PASS : EM_CHECK_FAIL, value,
                  "%d ranks on this node x %d GPUs per rank = %d needed", local, req->gpus_per_rank,
                  needed);
    }

    if (f->nccl[0]) {
        if ((err = check_version(r, "nccl", f->nccl, req->nccl ? req->nccl : ">=2.14"))) return err;
    } else if (req->nccl) {
        add_check(r, "nccl", EM_CHECK_FAIL, "not found", "NCCL %s required (libnccl.so.2)",
                  req->nccl);
    } else {
        add_check(r, "nccl", EM_CHECK_INFO, "not found", "the nccl backend is unavailable");
    }

    if ((err = check_version(r, "pmix", f->pmix, req->pmix))) return err;
    snprintf(value, sizeof value, "%s",
             f->pmix_launched ? "reachable (started by a launcher)"
                              : "none (not started by a launcher)");
    add_check(r, "pmix_server", f->pmix_launched ? EM_CHECK_PASS : EM_CHECK_INFO, value, "%s",
              f->pmix_launched ? "" : "runs as a single rank");
    add_check(r, "mpi", EM_CHECK_PASS, f->mpi_library, "%s", "");
    for (int i = 0; i < f->iface_count; i++) {
        const em_env_iface *it = &f->ifaces[i];
        char speed[32];
        if (it->speed_mbps > 0)
            snprintf(speed, sizeof speed, "%d Mb/s", it->speed_mbps);
        else
            snprintf(speed, sizeof speed, "speed unknown");
        snprintf(value, sizeof value, "%s %s %s, %s", it->name, it->address, it->up ? "up" : "down",
                 speed);
        add_check(r, "network", it->up ? EM_CHECK_INFO : EM_CHECK_WARN, value, "%s",
                  it->up ? "" : "interface is down");
    }
    snprintf(value, sizeof value, "%s (commit %s), backends %s", EVALMESH_VERSION,
             EVALMESH_GIT_COMMIT, EVALMESH_BACKENDS);
    add_check(r, "evalmesh", EM_CHECK_INFO, value, "%s", "");
    return NULL;
}

uint64_t em_env_fingerprint(const em_env_facts *f) {
    const char *parts[] = {f->os,          f->kernel, f->cpu_model, f->openblas_config,
                           f->cuda_driver, f->nccl,   f->pmix,      f->mpi_library};
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        for (const char *p = parts[i]; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ull;
        }
        h ^= 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

const char *em_check_status_name(em_check_status status) {
    switch (status) {
    case EM_CHECK_PASS:
        return "pass";
    case EM_CHECK_WARN:
        return "warn";
    case EM_CHECK_FAIL:
        return "FAIL";
    default:
        return "info";
    }
}

void em_env_print_text(const em_env_report *r, FILE *out) {
    for (int i = 0; i < r->check_count; i++) {
        const em_env_check *c = &r->checks[i];
        fprintf(out, "%-4s  %-12s %s%s%s\n", em_check_status_name(c->status), c->name, c->value,
                c->reason[0] ? "  -- " : "", c->reason);
    }
    fprintf(out, "%d failed, %d warnings\n", r->failures, r->warnings);
}

cJSON *em_env_report_json(const em_env_report *r) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "host", r->facts.hostname);
    cJSON_AddNumberToObject(doc, "failures", r->failures);
    cJSON_AddNumberToObject(doc, "warnings", r->warnings);
    char fingerprint[17];
    snprintf(fingerprint, sizeof fingerprint, "%016llx",
             (unsigned long long)em_env_fingerprint(&r->facts));
    cJSON_AddStringToObject(doc, "fingerprint", fingerprint);
    cJSON *checks = cJSON_AddArrayToObject(doc, "checks");
    for (int i = 0; i < r->check_count; i++) {
        const em_env_check *c = &r->checks[i];
        cJSON *check = cJSON_CreateObject();
        cJSON_AddStringToObject(check, "name", c->name);
        cJSON_AddStringToObject(
            check, "status", c->status == EM_CHECK_FAIL ? "fail" : em_check_status_name(c->status));
        cJSON_AddStringToObject(check, "value", c->value);
        cJSON_AddStringToObject(check, "reason", c->reason);
        cJSON_AddItemToArray(checks, check);
    }
    return doc;
}

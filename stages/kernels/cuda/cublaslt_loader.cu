/* cuBLASLt loaded when the cuda backend first calls it, not when evalmesh starts. Linked
 * directly, libcublasLt costs every process ~94 MiB of private memory (its relocated data) and
 * ~0.2 s of start-up, GPU or not: 256 CPU ranks on one machine would need 24 GiB for it alone.
 * These definitions stand in for the cuBLASLt functions gemm.cu calls (the header's inline *Init
 * functions call the *_internal ones); each resolves the real one from EM_CUBLASLT_SONAME once.
 * Without the library, calls return CUBLAS_STATUS_NOT_INITIALIZED and cublasLtGetStatusString
 * says why the library could not be loaded. */
#include <cublasLt.h>
#include <dlfcn.h>
#include <stdio.h>

static char load_error[512];

static void *library(void) {
    static void *handle = [] {
        void *h = dlopen(EM_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            snprintf(load_error, sizeof load_error, "%s could not be loaded: %s",
                     EM_CUBLASLT_SONAME, dlerror());
        return h;
    }();
    return handle;
}

static void *symbol(const char *name) {
    void *h = library();
    void *fn = h ? dlsym(h, name) : nullptr;
    if (h && !fn) snprintf(load_error, sizeof load_error, "%s has no %s", EM_CUBLASLT_SONAME, name);
    return fn;
}

/* The real function `name` as `real`, or CUBLAS_STATUS_NOT_INITIALIZED when it cannot be had. */
#define REAL(name)                                                                                 \
    static const auto real = reinterpret_cast<decltype(&name)>(symbol(#name));                     \
    if (!real) return CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *handle) {
    REAL(cublasLtCreate);
    return real(handle);
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
    REAL(cublasLtDestroy);
    return real(handle);
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
    static const auto real =
        reinterpret_cast<decltype(&cublasLtGetStatusString)>(symbol("cublasLtGetStatusString"));
    return real ? real(status) : load_error;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                           const void *alpha, const void *A,
                                           cublasLtMatrixLayout_t Adesc, const void *B,
                                           cublasLtMatrixLayout_t Bdesc, const void *beta,
                                           const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                           cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t *algo, void *workspace,
                                           size_t workspace_bytes, cudaStream_t stream) {
    REAL(cublasLtMatmul);
    return real(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                workspace_bytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulHeuristicResult_t *result) {
    REAL(cublasLtMatmulAlgoCheck);
    return real(handle, desc, Adesc, Bdesc, Cdesc, Ddesc, algo, result);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
    size_t bytes, size_t *written) {
    REAL(cublasLtMatmulAlgoConfigGetAttribute);
    return real(algo, attr, buf, bytes, written);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(
    cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void *buf,
    size_t bytes) {
    REAL(cublasLtMatmulAlgoConfigSetAttribute);
    return real(algo, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned) {
    REAL(cublasLtMatmulAlgoGetHeuristic);
    return real(handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference, requested, results, returned);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size,
                                                            cublasComputeType_t compute_type,
                                                            cudaDataType_t scale_type) {
    REAL(cublasLtMatmulDescInit_internal);
    return real(desc, size, compute_type, scale_type);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void *buf, size_t bytes) {
    REAL(cublasLtMatmulDescSetAttribute);
    return real(desc, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref,
                                                                  size_t size) {
    REAL(cublasLtMatmulPreferenceInit_internal);
    return real(pref, size);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t bytes) {
    REAL(cublasLtMatmulPreferenceSetAttribute);
    return real(pref, attr, buf, bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout,
                                                              size_t size, cudaDataType type,
                                                              uint64_t rows, uint64_t cols,
                                                              int64_t ld) {
    REAL(cublasLtMatrixLayoutInit_internal);
    return real(layout, size, type, rows, cols, ld);
}

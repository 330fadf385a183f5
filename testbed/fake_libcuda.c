/* A stand-in libcuda.so.1 for machines without a GPU (tests only).
 *
 * Why: the probe's cuInit(0) check runs real ctypes code inside the serving Python; this library gives
 * that code the driver's answers recorded in a GPU fixture (CONTRACTS C1 "cuinit", "cuda_version"), so
 * error 804 (forward-compat libs on a consumer GPU) and friends are exercised end to end.
 * Build: gcc -shared -fPIC -DFAKE_CUINIT=804 -DFAKE_CUDA_VERSION=13000 -o libcuda.so.1 fake_libcuda.c
 */
#ifndef FAKE_CUINIT
#define FAKE_CUINIT 0
#endif
#ifndef FAKE_CUDA_VERSION
#define FAKE_CUDA_VERSION 13000
#endif

int cuInit(unsigned int flags) {
    (void)flags;
    return FAKE_CUINIT;
}

int cuDriverGetVersion(int *version) {
    if (version == 0) {
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
    *version = FAKE_CUDA_VERSION;
    return 0;
}

/* A stand-in for libcuda.so.1 for tests on machines without a GPU: the driver API calls autosched makes,
 * with host memory as "device" memory and launches recorded instead of run, so a test can observe what the
 * host side asks the driver for (the PTX it loads, the kernels it looks up, grid, block and parameters of
 * every launch, the copies). Kernels do not run: results still come from the CPU or a real GPU.
 *
 * Built by tests/test_gpu_host.py (gcc -shared -fPIC) and loaded through $AUTOSCHED_LIBCUDA.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, INVALID_DEVICE = 101, INVALID_PTX = 218, NOT_FOUND = 500 };

#define MAX_LAUNCHES 4096
#define MAX_PARAMS 64
#define NAME_LEN 256

struct module { char *image; };
struct function { char name[NAME_LEN]; int nparams; };
struct launch {
    char name[NAME_LEN];
    unsigned grid[3], block[3], shared;
    int nparams;
    uint64_t params[MAX_PARAMS];
};

static struct launch launches[MAX_LAUNCHES];
static int nlaunches;
static long counters[5]; /* modules loaded, host-to-device copies, device-to-host copies, allocations, frees */
static char *last_image;

CUresult cuInit(unsigned flags) { (void)flags; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *dev, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *dev = 0; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    *v = attr == 75 ? 9 : 0; /* compute capability 9.0 */
    return OK;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    strncpy(name, "autosched driver stub", (size_t)len);
    name[len - 1] = 0;
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { static int c; (void)dev; *ctx = &c; return OK; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }

CUresult cuModuleLoadData(void **out, const void *image) {
    const char *text = (const char *)image;
    if (!strstr(text, ".entry")) return INVALID_PTX;
    struct module *m = malloc(sizeof *m);
    m->image = strdup(text);
    free(last_image);
    last_image = strdup(text);
    counters[0]++;
    *out = m;
    return OK;
}

CUresult cuModuleUnload(void *mod) {
    struct module *m = mod;
    free(m->image);
    free(m);
    return OK;
}

/* The kernel ".entry NAME(" of the module, with its parameter count (each ".param" of its list). */
CUresult cuModuleGetFunction(void **out, void *mod, const char *name) {
    struct module *m = mod;
    size_t n = strlen(name);
    for (const char *p = strstr(m->image, ".entry "); p; p = strstr(p + 1, ".entry ")) {
        const char *q = p + 7;
        while (*q == ' ') q++;
        if (strncmp(q, name, n) != 0 || (q[n] != '(' && q[n] != ' ' && q[n] != '\n')) continue;
        const char *end = strchr(q, ')');
        struct function *f = calloc(1, sizeof *f);
        strncpy(f->name, name, NAME_LEN - 1);
        for (const char *r = strstr(q, ".param"); r && r < end; r = strstr(r + 1, ".param")) f->nparams++;
        *out = f;
        return OK;
    }
    return NOT_FOUND;
}

CUresult cuMemAlloc_v2(uint64_t *ptr, size_t n) {
    void *p = calloc(1, n);
    if (!p) return INVALID_VALUE;
    counters[3]++;
    *ptr = (uint64_t)(uintptr_t)p;
    return OK;
}
CUresult cuMemFree_v2(uint64_t ptr) { counters[4]++; free((void *)(uintptr_t)ptr); return OK; }
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) {
    counters[1]++;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) {
    counters[2]++;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuLaunchKernel(void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    struct function *f = func;
    (void)stream;
    (void)extra;
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long)bx * by * bz > 1024) return INVALID_VALUE;
    if (nlaunches == MAX_LAUNCHES) return INVALID_VALUE;
    struct launch *l = &launches[nlaunches++];
    strncpy(l->name, f->name, NAME_LEN - 1);
    l->grid[0] = gx; l->grid[1] = gy; l->grid[2] = gz;
    l->block[0] = bx; l->block[1] = by; l->block[2] = bz;
    l->shared = shared;
    l->nparams = f->nparams < MAX_PARAMS ? f->nparams : MAX_PARAMS;
    for (int k = 0; k < l->nparams; k++) memcpy(&l->params[k], params[k], 8); /* autosched's are all 8 bytes */
    return OK;
}

CUresult cuGetErrorName(int rc, const char **name) {
    *name = rc == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : rc == INVALID_PTX ? "CUDA_ERROR_INVALID_PTX"
          : rc == NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : rc == INVALID_DEVICE ? "CUDA_ERROR_INVALID_DEVICE"
          : "CUDA_ERROR_UNKNOWN";
    return OK;
}

/* What the tests read. */
int stub_launch_count(void) { return nlaunches; }
const struct launch *stub_launch(int k) { return k >= 0 && k < nlaunches ? &launches[k] : 0; }
long stub_counter(int k) { return k >= 0 && k < 5 ? counters[k] : -1; }
const char *stub_last_image(void) { return last_image ? last_image : ""; }
void stub_reset(void) { nlaunches = 0; memset(counters, 0, sizeof counters); }

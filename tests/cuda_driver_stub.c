/* A stand-in for libcuda.so.1 for tests on machines without a GPU: the driver API calls autosched makes,
 * with host memory as "device" memory and launches recorded instead of run, so a test can observe what the
 * host side asks the driver for (the PTX it loads, the kernels it looks up, grid, block and parameters of
 * every launch, the copies). Kernels do not run: results still come from the CPU or a real GPU.
 *
 * Events time from the host's clock, and each launch adds LAUNCH_NS of "GPU time" to it, so a batch of n
 * launches between two events takes at least n x LAUNCH_NS. Launches, event records and waits and memsets
 * are also logged in order, as text (stub_ops()): "R<event>" a record, "L" a launch, "S<event>" a wait for an
 * event, "M<bytes>" a memset.
 *
 * The device it reports: compute capability $AUTOSCHED_STUB_CC ("86" is sm_86; 9.0 when unset), an L2 cache
 * of $AUTOSCHED_STUB_L2 bytes (4 MiB when unset), PCI bus id 0000:65:00.0. The same library is a stand-in for
 * NVML too (loaded through $AUTOSCHED_LIBNVML): SM clock 1755 MHz, memory clock 2619 MHz, P-state P0.
 *
 * Built by tests/test_gpu_host.py (gcc -shared -fPIC) and loaded through $AUTOSCHED_LIBCUDA.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, INVALID_DEVICE = 101, INVALID_PTX = 218, INVALID_HANDLE = 400, NOT_FOUND = 500 };

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

#define LAUNCH_NS 2000 /* "GPU time" each launch adds to the events' clock */
#define OPS_LEN (1 << 20)
static char ops[OPS_LEN];
static size_t ops_len;
static long long gpu_ns; /* launch time accumulated: the events' clock runs ahead of the host's by this */
static int next_event;

static void op(const char *fmt, long value) {
    if (ops_len + 32 < OPS_LEN) ops_len += (size_t)snprintf(ops + ops_len, 32, fmt, value);
}

static long env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, 0, 10) : fallback;
}

CUresult cuInit(unsigned flags) { (void)flags; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *dev, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *dev = 0; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    long cc = env_long("AUTOSCHED_STUB_CC", 90);
    if (dev != 0) return INVALID_DEVICE;
    *v = attr == 75 ? (int)(cc / 10) : attr == 76 ? (int)(cc % 10)
       : attr == 38 ? (int)env_long("AUTOSCHED_STUB_L2", 4 << 20) : 0;
    return OK;
}
CUresult cuDeviceGetPCIBusId(char *bus, int len, int dev) {
    if (dev != 0 || len < 13) return INVALID_VALUE;
    strncpy(bus, "0000:65:00.0", (size_t)len);
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
    gpu_ns += LAUNCH_NS;
    op("L ", 0);
    return OK;
}

/* Events: the time of their last record, on the host's monotonic clock plus the launches' GPU time. */
struct event { int id, recorded; long long ns; };

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec + gpu_ns;
}

CUresult cuEventCreate(void **out, unsigned flags) {
    if (flags & 2) return INVALID_VALUE; /* CU_EVENT_DISABLE_TIMING: autosched times with its events */
    struct event *e = calloc(1, sizeof *e);
    e->id = next_event++;
    *out = e;
    return OK;
}
CUresult cuEventRecord(void *ev, void *stream) {
    struct event *e = ev;
    if (!e || stream) return INVALID_HANDLE; /* autosched launches and records on the default stream */
    e->recorded = 1;
    e->ns = now_ns();
    op("R%ld ", e->id);
    return OK;
}
CUresult cuEventSynchronize(void *ev) {
    struct event *e = ev;
    if (!e || !e->recorded) return INVALID_HANDLE;
    op("S%ld ", e->id);
    return OK;
}
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) {
    struct event *s = start, *e = end;
    if (!s || !e || !s->recorded || !e->recorded) return INVALID_HANDLE;
    *ms = (float)((double)(e->ns - s->ns) / 1e6);
    return OK;
}
CUresult cuEventElapsedTime(float *ms, void *start, void *end) { return cuEventElapsedTime_v2(ms, start, end); }
CUresult cuEventDestroy_v2(void *ev) { free(ev); return OK; }

CUresult cuMemsetD8_v2(uint64_t dst, unsigned char value, size_t n) {
    memset((void *)(uintptr_t)dst, value, n);
    op("M%ld ", (long)n);
    return OK;
}

/* NVML, for the clock state a measurement records. */
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned k, void **h) { static int d; if (k) return 2; *h = &d; return 0; }
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **h) {
    static int d;
    if (strcmp(bus, "0000:65:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
    *h = &d;
    return 0;
}
int nvmlDeviceGetClockInfo(void *h, int type, unsigned *mhz) {
    if (!h || (type != 1 && type != 2)) return 2; /* NVML_CLOCK_SM, NVML_CLOCK_MEM */
    *mhz = type == 1 ? 1755 : 2619;
    return 0;
}
int nvmlDeviceGetPerformanceState(void *h, int *p) { if (!h) return 2; *p = 0; return 0; }

CUresult cuGetErrorName(int rc, const char **name) {
    *name = rc == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : rc == INVALID_PTX ? "CUDA_ERROR_INVALID_PTX"
          : rc == NOT_FOUND ? "CUDA_ERROR_NOT_FOUND" : rc == INVALID_DEVICE ? "CUDA_ERROR_INVALID_DEVICE"
          : rc == INVALID_HANDLE ? "CUDA_ERROR_INVALID_HANDLE" : "CUDA_ERROR_UNKNOWN";
    return OK;
}

/* What the tests read. */
int stub_launch_count(void) { return nlaunches; }
const struct launch *stub_launch(int k) { return k >= 0 && k < nlaunches ? &launches[k] : 0; }
long stub_counter(int k) { return k >= 0 && k < 5 ? counters[k] : -1; }
const char *stub_last_image(void) { return last_image ? last_image : ""; }
const char *stub_ops(void) { return ops; }
void stub_reset(void) { nlaunches = 0; memset(counters, 0, sizeof counters); ops_len = 0; ops[0] = 0; }

/* The drivers of peaks.h: threads that start together, the peaks' samples and the read-bandwidth probe. */
#include "peaks.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "gm/cpu.h"

/* One thread's share of a sample: a peak loop or a read of its part. */
typedef struct worker {
    pthread_barrier_t *start;
    peak_kind kind;
    long iters;
    const uint8_t *p;       /* NULL: a peak loop */
    size_t n, ahead;
    int wide, streams;      /* read with 64-byte loads; in how many runs */
    double t0, t1, flops;
    float fsink;
    uint32_t sink;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    w->t0 = now();
    if (w->p) {
        w->sink = w->wide ? read_avx512(w->p, w->n, w->ahead, w->streams) : read_avx2(w->p, w->n, w->ahead, w->streams);
    } else {
        switch (w->kind) {
        case PEAK_AVX2_FMA: w->flops = peak_avx2_fma(w->iters, &w->fsink); break;
        case PEAK_AVX512_FMA: w->flops = peak_avx512_fma(w->iters, &w->fsink); break;
        case PEAK_AVX512_BF16: w->flops = peak_avx512_bf16(w->iters, &w->fsink); break;
        case PEAK_AMX_BF16: w->flops = peak_amx_bf16(w->iters, &w->fsink); break;
        default: break;
        }
    }
    w->t1 = now();
    return NULL;
}

enum { MAX_THREADS = 256 };

/* Run w[0..n) on n threads released together; the seconds from the first start to the last end. */
static double run(worker *w, int n)
{
    pthread_t th[MAX_THREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        w[i].start = &bar;
        if (pthread_create(&th[i], NULL, work, &w[i]) != 0) {
            perror("bench_runner: pthread_create");
            exit(1);
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    double t0 = w[0].t0, t1 = w[0].t1;
    for (int i = 1; i < n; i++) {
        t0 = w[i].t0 < t0 ? w[i].t0 : t0;
        t1 = w[i].t1 > t1 ? w[i].t1 : t1;
    }
    return t1 - t0;
}

static int clamp_threads(int n) { return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n; }

static const struct {
    const char *name, *how;
    unsigned needs;
    long iters; /* about 0.05 s a sample at 3 GHz */
} peaks[PEAK_KINDS] = {
    [PEAK_AVX2_FMA] = {"AVX2 FMA", "12 independent chains of 8-wide vfmadd, 16 flops each",
                       GM_CPU_AVX2 | GM_CPU_FMA, 25000000},
    [PEAK_AVX512_FMA] = {"AVX-512 FMA", "16 independent chains of 16-wide zmm vfmadd, 32 flops each",
                         GM_CPU_AVX512, 12000000},
    [PEAK_AVX512_BF16] = {"AVX-512 BF16", "16 independent chains of zmm vdpbf16ps, 64 flops each",
                          GM_CPU_AVX512 | GM_CPU_AVX512_BF16, 10000000},
    [PEAK_AMX_BF16] = {"AMX BF16", "tdpbf16ps on 4 independent 16x16 f32 tiles, 16384 flops each",
                       GM_CPU_AMX_BF16, 2500000},
};

const char *peak_name(peak_kind k) { return peaks[k].name; }
const char *peak_how(peak_kind k) { return peaks[k].how; }
int peak_available(peak_kind k) { return (gm_cpu_features() & peaks[k].needs) == peaks[k].needs; }

double peak_sample(peak_kind k, int threads)
{
    if (!peak_available(k))
        return 0;
    const int n = clamp_threads(threads);
    worker w[MAX_THREADS];
    memset(w, 0, sizeof(worker) * (size_t)n);
    for (int i = 0; i < n; i++)
        w[i].kind = k, w[i].iters = peaks[k].iters;
    const double dt = run(w, n);
    double flops = 0;
    for (int i = 0; i < n; i++)
        flops += w[i].flops;
    return flops / dt / 1e9;
}

/* ---------------------------------------------------------------------- */
/* the read bandwidth */

static const struct {
    const char *name;
    int wide, streams;
    size_t ahead;
} configs[BW_CONFIGS] = {
    {"ymm loads", 0, 1, 0},
    {"ymm, prefetch 1 KB ahead", 0, 1, 1024},
    {"ymm, prefetch 4 KB ahead", 0, 1, 4096},
    {"ymm, 4 runs", 0, 4, 0},
    {"ymm, 4 runs, prefetch 1 KB ahead", 0, 4, 1024},
    {"zmm loads", 1, 1, 0},
    {"zmm, prefetch 1 KB ahead", 1, 1, 1024},
    {"zmm, prefetch 4 KB ahead", 1, 1, 4096},
    {"zmm, 4 runs", 1, 4, 0},
    {"zmm, 4 runs, prefetch 1 KB ahead", 1, 4, 1024},
};

const char *bw_config_name(int c) { return configs[c].name; }
int bw_config_available(int c)
{
    return configs[c].wide ? (gm_cpu_features() & GM_CPU_AVX512) != 0 : (gm_cpu_features() & GM_CPU_AVX2) != 0;
}

/*
** At least 1 GiB, 4x the last-level cache and 64 MiB a thread, so nothing
** read stays in cache and each thread streams a long run; at most an eighth
** of the memory; whole 2 MiB pages; not inherited by children.
*/
void bw_new(bw_probe *b, int max_threads)
{
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t size = (size_t)1 << 30;
    if (l3 > 0 && 4 * (size_t)l3 > size)
        size = 4 * (size_t)l3;
    if ((size_t)clamp_threads(max_threads) * (64u << 20) > size)
        size = (size_t)clamp_threads(max_threads) * (64u << 20);
    if (pages > 0 && page > 0 && size > (size_t)pages * (size_t)page / 8 && (size_t)pages * (size_t)page / 8 >= (256u << 20))
        size = (size_t)pages * (size_t)page / 8;
    size = (size + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    b->buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->buf == MAP_FAILED) {
        perror("bench_runner: mmap");
        exit(1);
    }
    madvise(b->buf, size, MADV_HUGEPAGE);
    madvise(b->buf, size, MADV_DONTFORK); /* not in the loading children: their peak RSS is the loader's alone */
    memset(b->buf, 1, size);
    b->size = size;
}

void bw_free(bw_probe *b) { munmap(b->buf, b->size); }

double bw_sample(const bw_probe *b, int threads, int config)
{
    const int n = clamp_threads(threads);
    worker w[MAX_THREADS];
    memset(w, 0, sizeof(worker) * (size_t)n);
    const size_t part = b->size / (size_t)n / 4096 * 4096; /* whole 256-byte steps of 4 runs */
    for (int i = 0; i < n; i++) {
        w[i].p = b->buf + part * (size_t)i;
        w[i].n = part;
        w[i].ahead = configs[config].ahead;
        w[i].wide = configs[config].wide;
        w[i].streams = configs[config].streams;
    }
    const double dt = run(w, n);
    return (double)part * n / dt / 1e9;
}

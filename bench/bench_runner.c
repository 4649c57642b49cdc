/*
** bench_runner: the baseline runner on a random-weight model with the real
** Qwen2-1.5B shapes (models/qwen2_1_5b), written to a temporary folder as
** safetensors. Everything is measured in this run, each figure the median
** of several repeats, side by side with what the machine can do:
**   - the FMA peak (1 and 2 threads) and the memory read bandwidth;
**   - load (open, validate, transpose into fresh memory) against the least
**     any copying loader spends: the file's bytes read once into fresh
**     memory; and the loader's peak resident memory against the model size;
**   - a 32-token prefill (lite mode) on 1 and 2 threads: seconds, GFLOP/s,
**     % of the FMA peak, and the scaling;
**   - greedy decode with the KV cache: tokens/s and the weight bytes read
**     per second as a % of the measured bandwidth;
**   - the blocked kernels against the plain reference kernel.
**   bench_runner [--tokens N] [--keep DIR] [--only load|run]
**   --keep DIR reuses (or makes) the model there; --only measures the loading
**   figures, or the prefill, decode and kernel ones.
*/
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <pthread.h>
#include <immintrin.h>

#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/pool.h"
#include "gm/registry.h"
#include "gm/runner.h"
#include "gm/safetensors.h"

#define MODEL "qwen2_1_5b"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Write config.json and a model.safetensors with the checked-in header and random bf16 data. */
static void make_model(const char *dir)
{
    char path[4096], *cfg = NULL;
    size_t len = 0;
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/models/%s/snapshot/config.json", GM_SOURCE_DIR, MODEL);
    if (gm_read_file(path, 1 << 20, &cfg, &len, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    gm_write_file(path, cfg, len, &st);
    free(cfg);

    uint8_t *head = NULL;
    size_t head_len = 0;
    st_header h;
    snprintf(path, sizeof path, "%s/models/%s/snapshot/model.safetensors.head", GM_SOURCE_DIR, MODEL);
    if (st_read_header_bytes(path, &head, &head_len, &st) || st_header_parse(&h, head, head_len, 0, path, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(head, 1, head_len, f) != head_len) {
        fprintf(stderr, "bench_runner: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    /* tensors in file order: sort by offset */
    const st_tensor **order = malloc(h.n_tensors * sizeof *order);
    for (size_t i = 0; i < h.n_tensors; i++)
        order[i] = &h.tensors[i];
    for (size_t i = 1; i < h.n_tensors; i++)
        for (size_t j = i; j > 0 && order[j]->begin < order[j - 1]->begin; j--) {
            const st_tensor *t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    static gm_bf16 buf[1 << 20];
    for (size_t i = 0; i < h.n_tensors; i++) {
        const st_tensor *t = order[i];
        const size_t n = (size_t)(t->end - t->begin) / 2;
        const int is_bias = strstr(t->name, ".bias") != NULL, is_norm = t->rank == 1 && !is_bias;
        const float scale = t->rank == 2 ? 1.7320508f / sqrtf((float)t->shape[1]) : 0.2f;
        for (size_t done = 0; done < n;) {
            const size_t k = n - done < (1 << 20) ? n - done : (1 << 20);
            for (size_t j = 0; j < k; j++) {
                const float u = (float)(next() >> 8) / 8388608.0f - 1.0f; /* uniform in [-1, 1) */
                buf[j] = gm_f32_to_bf16(is_norm ? 1.0f + 0.1f * u : scale * u);
            }
            if (fwrite(buf, 2, k, f) != k) {
                fprintf(stderr, "bench_runner: %s: %s\n", path, strerror(errno));
                exit(1);
            }
            done += k;
        }
    }
    fclose(f);
    free(order);
    st_header_free(&h);
    free(head);
}

/* ---------------------------------------------------------------------- */
/* what the machine can do */

__attribute__((target("avx2,fma"))) static void *fma_loop(void *arg)
{
    const long iters = *(const long *)arg;
    const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
    /* 12 independent chains in named registers (an array would live on the stack) */
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
    __m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
    __m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
    for (long it = 0; it < iters; it++) {
        a0 = _mm256_fmadd_ps(a0, b, c), a1 = _mm256_fmadd_ps(a1, b, c), a2 = _mm256_fmadd_ps(a2, b, c);
        a3 = _mm256_fmadd_ps(a3, b, c), a4 = _mm256_fmadd_ps(a4, b, c), a5 = _mm256_fmadd_ps(a5, b, c);
        a6 = _mm256_fmadd_ps(a6, b, c), a7 = _mm256_fmadd_ps(a7, b, c), a8 = _mm256_fmadd_ps(a8, b, c);
        a9 = _mm256_fmadd_ps(a9, b, c), a10 = _mm256_fmadd_ps(a10, b, c), a11 = _mm256_fmadd_ps(a11, b, c);
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                                 _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
    return _mm256_cvtss_f32(s) == 12345.0f ? arg : NULL; /* keeps the work */
}

/* GFLOP/s of independent 8-wide FMAs on n threads: one sample, about 0.1 s. */
static double fma_sample(int n)
{
    long iters = 25000000;
    pthread_t th[16];
    const double t0 = now();
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, fma_loop, &iters);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return n * iters * 12.0 * 16.0 / (now() - t0) / 1e9;
}

typedef struct span { const uint8_t *p; size_t n; } span;

__attribute__((target("avx2"))) static void *read_span(void *arg)
{
    const span *s = arg;
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i + 128 <= s->n; i += 128) {
        acc = _mm256_add_epi32(acc, _mm256_load_si256((const __m256i *)(const void *)(s->p + i)));
        acc = _mm256_add_epi32(acc, _mm256_load_si256((const __m256i *)(const void *)(s->p + i + 32)));
        acc = _mm256_add_epi32(acc, _mm256_load_si256((const __m256i *)(const void *)(s->p + i + 64)));
        acc = _mm256_add_epi32(acc, _mm256_load_si256((const __m256i *)(const void *)(s->p + i + 96)));
    }
    return _mm256_extract_epi32(acc, 0) == 123456789 ? arg : NULL;
}

/*
** A buffer for reading memory as the weights are read: 1 GiB, huge pages
** as the weight arena has, touched once.
*/
enum { BW_SIZE = 1 << 30 };

static uint8_t *bw_buffer(void)
{
    uint8_t *buf = mmap(NULL, BW_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("bench_runner: mmap");
        exit(1);
    }
    madvise(buf, BW_SIZE, MADV_HUGEPAGE);
    memset(buf, 1, BW_SIZE);
    return buf;
}

/* GB/s reading buf, split in n contiguous parts, on n threads: one sample. */
static double bw_sample(const uint8_t *buf, int n)
{
    pthread_t th[16];
    span sp[16];
    const double t0 = now();
    for (int i = 0; i < n; i++) {
        sp[i] = (span){buf + BW_SIZE / (size_t)n * (size_t)i, BW_SIZE / (size_t)n};
        pthread_create(&th[i], NULL, read_span, &sp[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return (double)BW_SIZE / (now() - t0) / 1e9;
}

/* ---------------------------------------------------------------------- */
/* loading, each in a child process: its own time and peak memory */

typedef struct copy_arg { int fd; uint8_t *dst; size_t off, n; } copy_arg;

static void *copy_part(void *arg)
{
    const copy_arg *c = arg;
    for (size_t got = 0; got < c->n;) {
        ssize_t k = pread(c->fd, c->dst + c->off + got, c->n - got, (off_t)(c->off + got));
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return NULL;
}

/* The least a copying loader spends: the file read once into fresh (huge-page) memory, on n threads. */
static void copy_once(const char *path, int n)
{
    int fd = open(path, O_RDONLY);
    const size_t size = (size_t)lseek(fd, 0, SEEK_END);
    uint8_t *dst = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(dst, size, MADV_HUGEPAGE);
    pthread_t th[16];
    copy_arg a[16];
    for (int i = 0; i < n; i++) {
        const size_t part = (size / (size_t)n + 4095) / 4096 * 4096, off = part * (size_t)i;
        a[i] = (copy_arg){fd, dst, off, off >= size ? 0 : (off + part > size ? size - off : part)};
        pthread_create(&th[i], NULL, copy_part, &a[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    close(fd);
}

/* Run fn in a child; the time fn took in *seconds (measured in the child) and its peak RSS in bytes (returned). */
static double in_child(void (*fn)(const void *), const void *arg, double *seconds)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        const double t0 = now();
        fn(arg);
        const double dt = now() - t0;
        if (write(fds[1], &dt, sizeof dt) != (ssize_t)sizeof dt)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    *seconds = -1;
    if (read(fds[0], seconds, sizeof *seconds) != (ssize_t)sizeof *seconds)
        *seconds = -1;
    close(fds[0]);
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    return (double)ru.ru_maxrss * 1024.0;
}

static const gm_model_entry *bench_model;
static const char *bench_dir;

static void child_copy(const void *path) { copy_once(path, gm_default_threads()); }

static void child_load(const void *unused)
{
    (void)unused;
    gm_status st = {0};
    void *w = calloc(1, bench_model->weights_size);
    if (bench_model->load(w, bench_dir, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        _exit(1);
    }
}

/* The temporary model, unless it was asked to be kept. */
static void remove_model(const char *keep, const char *dir, char *path)
{
    if (keep)
        return;
    unlink(path);
    snprintf(path, 4200, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    int T = 32, reps = 7;
    const char *keep = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
            keep = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_runner [--tokens N] [--keep DIR] [--only load|run]\n");
            return 2;
        }
    }
    const gm_model_entry *e = gm_registry_find(gm_models, MODEL);
    if (!e) {
        fprintf(stderr, "bench_runner: models/%s is not built in\n", MODEL);
        return 1;
    }
    char dir[4096];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
    } else {
        snprintf(dir, sizeof dir, "%s/gm-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    double t0 = now();
    if (access(path, R_OK) != 0)
        make_model(dir);
    const int cores = gm_default_threads();
    printf("model: random weights with the shapes of %s in %s (made in %.1f s)\n", e->repo, dir, now() - t0);
    printf("kernels: %s; threads: 1 and %d; every figure the median of its repeats\n", gm_kernels_name(), cores);

    /*
    ** The machine is shared and its speed drifts within seconds, so every
    ** figure is measured in turns with what it is compared to (a sample of
    ** the FMA peak before each prefill, of the read bandwidth before each
    ** decode step, a plain copy before each load), and each percentage is
    ** the median of those side-by-side ratios.
    */
    if (!only || strcmp(only, "run") != 0) {
        /* loading: the file read once into fresh memory, then our loader; each in a fresh child process */
        bench_model = e;
        bench_dir = dir;
        double copy[5], load[5], rss[5], lratio[5], file_size;
        {
            int fd = open(path, O_RDONLY);
            file_size = (double)lseek(fd, 0, SEEK_END);
            close(fd);
        }
        for (int r = 0; r < 5; r++) {
            if (r % 2) { /* in turns, which goes first: neither always meets the memory the other just freed */
                rss[r] = in_child(child_load, NULL, &load[r]);
                in_child(child_copy, path, &copy[r]);
            } else {
                in_child(child_copy, path, &copy[r]);
                rss[r] = in_child(child_load, NULL, &load[r]);
            }
            lratio[r] = load[r] / copy[r];
        }
        printf("load: %.3f s; the file's %.2f GB read once into fresh memory: %.3f s; ratio %.2f (target <= 1.5)\n",
               median(load, 5), file_size / 1e9, median(copy, 5), median(lratio, 5));
        const double peak_rss = median(rss, 5);
        printf("load peak RSS: %.2f GB, %.2fx the model file (target <= 1.25)\n", peak_rss / 1e9, peak_rss / file_size);
    }
    if (only && strcmp(only, "load") == 0) {
        remove_model(keep, dir, path);
        return 0;
    }

    gm_status st = {0};
    void *w = calloc(1, e->weights_size);
    if (e->load(w, dir, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        return 1;
    }
    rt_layer *layers = calloc((size_t)e->n_layers, sizeof *layers);
    rt_model m;
    e->view(w, layers, &m);
    const gm_config *cf = &m.cfg;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)(T + 64));
    for (int i = 0; i < T; i++)
        tokens[i] = (int32_t)(next() % (uint32_t)cf->vocab_size);
    const double H = cf->emb_dim, F = cf->hidden_dim, qw = (double)cf->n_heads * cf->head_dim,
                 kvw = (double)cf->n_kv_heads * cf->head_dim;
    const double linear = H * (qw + 2 * kvw) + qw * H + 3 * H * F;
    const double flops = 2.0 * T * linear * cf->n_layers + 2.0 * cf->vocab_size * H /* lm_head, last position */
                         + 2.0 * 2.0 * cf->n_heads * cf->head_dim * (T * (T + 1) / 2.0) * cf->n_layers;

    /*
    ** Prefill on 1 thread and on every core, in turns, each run after a
    ** sample of the FMA peak on as many threads; the scaling is the median
    ** of the neighbouring runs' ratios.
    */
    rt_session *sess[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        const rt_options o = {RT_BF16, 0, k == 0 ? 1 : cores};
        if (rt_session_new(&sess[k], &m, &o, T + 64, &st)) {
            fprintf(stderr, "bench_runner: %s\n", st.msg);
            return 1;
        }
    }
    double pre[2][9], pk[2][9], ratio[2][9], scale[9], peak[2];
    rt_result res;
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            pk[k][r] = fma_sample(k == 0 ? 1 : cores);
            t0 = now();
            rt_prefill(sess[k], tokens, T, &res, &st);
            pre[k][r] = now() - t0;
            ratio[k][r] = flops / pre[k][r] / 1e9 / pk[k][r];
            rt_result_free(&res);
        }
        scale[r] = pre[0][r] / pre[1][r];
    }
    for (int k = 0; k < 2; k++) {
        const double sec = median(pre[k], reps);
        peak[k] = median(pk[k], reps);
        printf("prefill %d tokens (lite), %d thread%s: %.3f s, %.1f GFLOP/s, %.0f%% of the FMA peak%s\n", T,
               k == 0 ? 1 : cores, k == 0 ? "" : "s", sec, flops / sec / 1e9, 100.0 * median(ratio[k], reps),
               k == 0 ? " (target >= 70%)" : "");
    }
    printf("prefill scaling, %d threads over 1: %.2fx (target >= 1.8)\n", cores, median(scale, reps));

    /* greedy decode with the KV cache on every core, each step after a sample of the read bandwidth */
    enum { STEPS = 16 };
    double step[STEPS], bws[STEPS], bratio[STEPS];
    /* every weight byte is read once a token: the projections, the norms, and the LM head */
    const double bytes = 2.0 * (cf->n_layers * (linear + 2 * H + qw + 2 * kvw) + H + (double)cf->vocab_size * H);
    uint8_t *buf = bw_buffer();
    rt_prefill(sess[1], tokens, T, &res, &st);
    int32_t tok = res.top1;
    rt_result_free(&res);
    for (int i = 0; i < STEPS; i++) {
        bws[i] = bw_sample(buf, cores);
        t0 = now();
        rt_decode_step(sess[1], tok, &res, &st);
        step[i] = now() - t0;
        bratio[i] = bytes / step[i] / 1e9 / bws[i];
        tok = res.top1;
        rt_result_free(&res);
    }
    munmap(buf, BW_SIZE);
    const double ds = median(step, STEPS), bw = median(bws, STEPS);
    printf("decode: %.2f tokens/s (%.1f ms/token, median of %d steps); %.1f GB/s of weights, %.0f%% of the read "
           "bandwidth (target >= 90%%)\n", 1.0 / ds, ds * 1e3, STEPS, bytes / ds / 1e9, 100.0 * median(bratio, STEPS));
    rt_session_free(sess[0]);
    rt_session_free(sess[1]);

    /* the blocked kernels against the plain reference, on layer 0's projections at T rows */
    const rt_layer *l0 = &m.layers[0];
    float *X = malloc(sizeof(float) * (size_t)T * (size_t)F), *Y = malloc(sizeof(float) * (size_t)T * (size_t)F);
    for (size_t i = 0; i < (size_t)T * (size_t)F; i++)
        X[i] = (float)((int)(next() % 200) - 100) / 100.0f;
    struct { const gm_bf16 *w; int k, n; } mats[] = {
        {l0->wq, cf->emb_dim, (int)qw}, {l0->wk, cf->emb_dim, (int)kvw}, {l0->wv, cf->emb_dim, (int)kvw},
        {l0->wo, (int)qw, cf->emb_dim}, {l0->w_gate, cf->emb_dim, cf->hidden_dim}, {l0->w_up, cf->emb_dim, cf->hidden_dim},
        {l0->w_down, cf->hidden_dim, cf->emb_dim}};
    gm_pool *pool = gm_pool_new(1);
    double fast[5], ref[1];
    for (int r = 0; r < 5; r++) {
        t0 = now();
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            gm_matmul(pool, Y, X, mats[i].w, NULL, T, mats[i].k, mats[i].n, 1);
        fast[r] = now() - t0;
    }
    t0 = now();
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
        gm_matmul_reference(Y, X, mats[i].w, NULL, T, mats[i].k, mats[i].n, 1);
    ref[0] = now() - t0;
    const double lf = 2.0 * T * linear;
    printf("kernels, one layer's projections at %d rows, 1 thread: blocked %.1f GFLOP/s, plain reference %.1f GFLOP/s: "
           "%.1fx\n", T, lf / median(fast, 5) / 1e9, lf / ref[0] / 1e9, ref[0] / median(fast, 5));
    printf("machine, sampled beside the figures above: FMA peak %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads); "
           "memory read %.1f GB/s (%d threads)\n", peak[0], peak[1], cores, bw, cores);
    gm_pool_free(pool);
    free(X);
    free(Y);
    free(tokens);
    free(layers);
    e->free(w);
    free(w);
    remove_model(keep, dir, path);
    return 0;
}

/*
** bench_runner: the baseline runner on a random-weight model with the real
** Qwen2-1.5B shapes (models/qwen2_1_5b), written to a temporary folder as
** safetensors. Prints, each the median of several runs measured in this
** run: load (open, validate, transpose), 32-token prefill in lite mode with
** its GFLOP/s, and the blocked kernels against the plain reference kernel on
** one layer's projections.
**   bench_runner [--tokens N] [--threads N] [--keep DIR]
*/
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
    int T = 32, threads = 0, reps = 3;
    const char *keep = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
            keep = argv[++i];
        else {
            fprintf(stderr, "usage: bench_runner [--tokens N] [--threads N] [--keep DIR]\n");
            return 2;
        }
    }
    const gm_model_entry *e = NULL;
    for (const gm_model_entry *x = gm_models; x->id; x++)
        if (!strcmp(x->id, MODEL))
            e = x;
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
    printf("model: random weights with the shapes of %s in %s (made in %.1f s)\n", e->repo, dir, now() - t0);
    printf("kernels: %s, threads: %d\n", gm_kernels_name(), threads > 0 ? threads : gm_default_threads());

    gm_status st = {0};
    void *w = calloc(1, e->weights_size);
    double load[3];
    for (int r = 0; r < reps; r++) {
        t0 = now();
        if (e->load(w, dir, &st)) {
            fprintf(stderr, "bench_runner: %s\n", st.msg);
            return 1;
        }
        load[r] = now() - t0;
        if (r + 1 < reps)
            e->free(w);
    }
    printf("load (open, validate, transpose into fresh memory): %.3f s (median of %d)\n", median(load, reps), reps);

    rt_layer *layers = calloc((size_t)e->n_layers, sizeof *layers);
    rt_model m;
    e->view(w, layers, &m);
    const gm_config *c = &m.cfg;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)T);
    for (int i = 0; i < T; i++)
        tokens[i] = (int32_t)(next() % (uint32_t)c->vocab_size);
    const double H = c->emb_dim, F = c->hidden_dim, qw = (double)c->n_heads * c->head_dim,
                 kvw = (double)c->n_kv_heads * c->head_dim;
    const double linear = H * (qw + 2 * kvw) + qw * H + 3 * H * F;
    const double flops = 2.0 * T * linear * c->n_layers + 2.0 * c->vocab_size * H /* lm_head, last position */
                         + 2.0 * 2.0 * c->n_heads * c->head_dim * (T * (T + 1) / 2.0) * c->n_layers;

    rt_options o = {RT_BF16, 0, threads};
    rt_session *s = NULL;
    if (rt_session_new(&s, &m, &o, T, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        return 1;
    }
    double pre[5];
    rt_result res;
    for (int r = 0; r < 5; r++) {
        t0 = now();
        rt_prefill(s, tokens, T, &res, &st);
        pre[r] = now() - t0;
        rt_result_free(&res);
    }
    const double p = median(pre, 5);
    printf("prefill %d tokens (lite): %.3f s, %.1f GFLOP/s (median of 5; %.1f GFLOP)\n", T, p, flops / p / 1e9,
           flops / 1e9);
    rt_session_free(s);

    /* the blocked kernels against the plain reference, on layer 0's projections at T rows */
    const rt_layer *l0 = &m.layers[0];
    float *X = malloc(sizeof(float) * (size_t)T * (size_t)F), *Y = malloc(sizeof(float) * (size_t)T * (size_t)F);
    for (size_t i = 0; i < (size_t)T * (size_t)F; i++)
        X[i] = (float)((int)(next() % 200) - 100) / 100.0f;
    struct { const gm_bf16 *w; int k, n; } mats[] = {
        {l0->wq, c->emb_dim, (int)qw}, {l0->wk, c->emb_dim, (int)kvw}, {l0->wv, c->emb_dim, (int)kvw},
        {l0->wo, (int)qw, c->emb_dim}, {l0->w_gate, c->emb_dim, c->hidden_dim}, {l0->w_up, c->emb_dim, c->hidden_dim},
        {l0->w_down, c->hidden_dim, c->emb_dim}};
    gm_pool *pool = gm_pool_new(threads);
    double fast[3], ref[3];
    for (int r = 0; r < 3; r++) {
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
    printf("one layer's projections, %d rows: blocked %.4f s (%.1f GFLOP/s), plain reference %.3f s (%.1f GFLOP/s): "
           "%.1fx\n", T, median(fast, 3), lf / median(fast, 3) / 1e9, ref[0], lf / ref[0] / 1e9, ref[0] / median(fast, 3));
    gm_pool_free(pool);
    free(X);
    free(Y);
    free(tokens);
    free(layers);
    e->free(w);
    free(w);
    if (!keep) {
        unlink(path);
        snprintf(path, sizeof path, "%s/config.json", dir);
        unlink(path);
        rmdir(dir);
    }
    return 0;
}

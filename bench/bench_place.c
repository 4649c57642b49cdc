/*
** Where W lies, measured: a product reading W as a safetensors file holds
** it, from the file's mapping (the page cache's 4 KB pages, the tensor at
** the file's offset: 8 past a cache line here, as bench_runner's model
** has it), against the same bytes copied into fresh memory in 2 MB pages,
** each matrix on a 64-byte line (the loader's arena, gm_place). Pairs in
** turns, in one run, on the running tier or every tier the CPU has
** (--tiers); on 1 thread and on every core.
**
**   bench_place [--tiers] [--reps N] [--dir DIR]
**
** The shapes are Qwen2-1.5B's gate (1536 in, 8960 out) and down (8960 in,
** 1536 out) as (out, in), at 1 and 32 rows of X, and its LM head (151936
** rows of 1536) at 1 row. Each figure reads about 1 GB of W (copies of the
** matrix one after another, so that W comes from memory, not cache): GB/s
** of W, the median of the repeats, and the time in the mapping over the
** time in huge pages, the median of the pairs' ratios. The FMA tiers read
** the projections in panels of their own (the loader transposes them), so
** only their LM head reads the file's layout; the tile tiers read both.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "gm/cli.h"
#include "gm/kernels.h"
#include "gm/pool.h"

enum { MAX_REPS = 64, OFFSET = 8 }; /* bytes past a line where the tensor starts in the file */

static const size_t SPAN = 1u << 30; /* the bytes of W a figure reads */

typedef struct shape {
    const char *name;
    int K, N, T, nt; /* nt: W's rows are the outputs of gm_matmul_nt (the LM head) */
} shape;

/* One pass over every copy of W at base (count matrices of K x N bf16), the seconds it took */
static double pass(gm_pool *p, const shape *s, const char *base, size_t count, const float *X, float *Y)
{
    const size_t bytes = (size_t)s->K * s->N * 2;
    const double t0 = now();
    for (size_t c = 0; c < count; c++) {
        const gm_bf16 *W = (const gm_bf16 *)(const void *)(base + c * bytes);
        if (s->nt) {
            gm_matmul_nt(p, Y, X, W, s->T, s->K, s->N, 1);
        } else {
            const gm_out o = {.Y = Y, .W = W, .N = s->N, .form = GM_W_NK};
            gm_matmul_outs(p, X, s->T, s->K, &o, 1, 1);
        }
    }
    return now() - t0;
}

/* A file of `size` bytes of bf16 values, mapped and read in; the mapping (its first byte), or NULL */
static char *make_file(const char *path, size_t size)
{
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return NULL;
    enum { CHUNK = 1 << 20 };
    uint16_t *buf = malloc(CHUNK);
    uint32_t x = 12345;
    int ok = buf != NULL;
    for (size_t done = 0; ok && done < size; done += CHUNK) {
        for (size_t i = 0; i < CHUNK / 2; i++) { /* normal bf16 values of both signs, |v| in [2^-8, 2^0) */
            x = x * 1664525u + 1013904223u;
            buf[i] = (uint16_t)((x >> 16 & 0x8000) | (0x3B80 + (x >> 8 & 0x3FF)));
        }
        const size_t n = size - done < CHUNK ? size - done : CHUNK;
        ok = write(fd, buf, n) == (ssize_t)n;
    }
    free(buf);
    char *m = ok ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
#ifdef MADV_POPULATE_READ
    madvise(m, size, MADV_POPULATE_READ);
#endif
    return m;
}

int main(int argc, char **argv)
{
    int all = 0, reps = 5;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tiers"))
            all = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && (reps = (int)gm_cli_count(argv[i + 1], 1, MAX_REPS)) > 0)
            i++;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else {
            const int help = !strcmp(argv[i], "--help"); /* asked for: stdout, exit 0 */
            fprintf(help ? stdout : stderr, "usage: bench_place [--tiers] [--reps N (1 to %d)] [--dir DIR]\n"
                    "  a product reading W from a file's mapping against the same bytes in huge pages\n", MAX_REPS);
            return help ? 0 : 2;
        }
    }
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    const shape shapes[] = {
        {"gate (8960 x 1536), 1 row", 1536, 8960, 1, 0},   {"down (1536 x 8960), 1 row", 8960, 1536, 1, 0},
        {"gate (8960 x 1536), 32 rows", 1536, 8960, 32, 0}, {"down (1536 x 8960), 32 rows", 8960, 1536, 32, 0},
        {"LM head (151936 x 1536), 1 row", 1536, 151936, 1, 1},
    };
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);

    char path[4096];
    snprintf(path, sizeof path, "%s/bench_place.%d.bin", dir, (int)getpid());
    const size_t file_size = SPAN + 4096;
    char *map = make_file(path, file_size);
    unlink(path); /* the mapping keeps it while it runs */
    if (!map) {
        fprintf(stderr, "bench_place: %s: cannot write and map %zu bytes: %s\n", path, file_size, strerror(errno));
        return 1;
    }
    char *huge = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (huge == MAP_FAILED) {
        fprintf(stderr, "bench_place: cannot allocate %zu bytes: %s\n", SPAN, strerror(errno));
        return 1;
    }
#ifdef MADV_HUGEPAGE
    madvise(huge, SPAN, MADV_HUGEPAGE);
#endif
    memcpy(huge, map + OFFSET, SPAN);
    const char *mapped = map + OFFSET;

    float *X = malloc(sizeof(float) * 32 * 8960), *Y = malloc(sizeof(float) * 32 * 151936);
    for (int i = 0; i < 32 * 8960; i++) /* bf16 values, as the runner's bf16 mode gives the tile tiers */
        X[i] = gm_bf16_to_f32(gm_f32_to_bf16((float)(i % 17 - 8) * 0.0625f));
    const int cores = gm_default_threads();
    gm_pool *pools[2] = {gm_pool_new(1), cores > 1 ? gm_pool_new(cores) : NULL};

    const char *const *tiers = gm_kernels_tiers();
    const char *mine[2] = {gm_kernels_name(), NULL};
    if (!all)
        tiers = mine;
    printf("W as the file holds it (out, in), from the mapping (4 KB pages, %d bytes past a line) against huge "
           "pages (a copy, on a line); about %.2f GB of W a figure, median of %d, in turns\n",
           OFFSET, (double)SPAN / 1e9, reps);
    for (int ti = 0; tiers[ti]; ti++) {
        if (gm_kernels_info(tiers[ti])->model || gm_kernels_select(tiers[ti]) != 0)
            continue; /* a software model, or a tier this CPU lacks */
        const int tile_tier = gm_kernels_info(tiers[ti])->wform == GM_W_NK;
        for (int si = 0; si < n_shapes; si++) {
            const shape *s = &shapes[si];
            if (!tile_tier && !s->nt)
                continue;
            const size_t count = SPAN / ((size_t)s->K * s->N * 2);
            const double gb = (double)count * s->K * s->N * 2 / 1e9;
            for (int k = 0; k < 2 && pools[k]; k++) {
                double tm[MAX_REPS], th[MAX_REPS], ratio[MAX_REPS];
                pass(pools[k], s, huge, 1, X, Y); /* a warm-up */
                for (int r = 0; r < reps; r++) {
                    if (r % 2) { /* in turns, which goes first */
                        th[r] = pass(pools[k], s, huge, count, X, Y);
                        tm[r] = pass(pools[k], s, mapped, count, X, Y);
                    } else {
                        tm[r] = pass(pools[k], s, mapped, count, X, Y);
                        th[r] = pass(pools[k], s, huge, count, X, Y);
                    }
                    ratio[r] = tm[r] / th[r];
                }
                const double r_med = median(ratio, reps), m_med = median(tm, reps), h_med = median(th, reps);
                printf("%s, %s, %d thread%s: mapped %.1f GB/s, huge pages %.1f GB/s; the mapping takes %.2fx the "
                       "time (%.2f-%.2f)\n",
                       tiers[ti], s->name, k ? cores : 1, k && cores > 1 ? "s" : "", gb / m_med, gb / h_med, r_med,
                       ratio[0], ratio[reps - 1]);
            }
        }
    }
    gm_kernels_select(NULL);
    for (int k = 0; k < 2; k++)
        if (pools[k])
            gm_pool_free(pools[k]);
    free(X);
    free(Y);
    munmap(huge, SPAN);
    munmap(map, file_size);
    return 0;
}

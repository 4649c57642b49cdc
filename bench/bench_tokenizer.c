/*
** bench_tokenizer: for each tokenizer of ../shared/tokenizers, the time to
** load tokenizer.json (best of 3), the memory the loaded tables hold, and encode throughput in MB/s on
** a mixed text of at least 1 MB (the 93 golden inputs repeated, one per line),
** single-threaded and with 2 threads (gm_tokenizer_encode_mt). When node and
** bench/ref/node_modules/tokenizers are present, the same figures for the
** reference library are measured in the same run (bench_tokenizers_ref.js).
**
** Usage: bench_tokenizer [NAME...]     (default: all six)
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gm/tokenizer.h"

static const char *const all_names[] = {"qwen3", "qwen2_5", "llama3", "llama3_1", "llama3_2", "mistral7b_spm"};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *p;
    long n;
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 1);
    if (p == NULL || fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        fclose(f);
        return NULL;
    }
    fclose(f);
    p[n] = 0;
    *len = (size_t)n;
    return p;
}

/* The inputs' texts, one per line, repeated until at least min bytes. */
static char *mixed_text(size_t min, size_t *len)
{
    char path[1024];
    size_t n, cap = min + (1 << 16), used = 0;
    snprintf(path, sizeof path, "%s/tokenizers/inputs.json", GM_SHARED_DIR);
    char *json = read_all(path, &n);
    if (json == NULL)
        return NULL;
    cJSON *in = cJSON_ParseWithLength(json, n), *e;
    char *out = malloc(cap);
    if (in == NULL || out == NULL) {
        free(out);
        out = NULL;
        goto done;
    }
    while (used < min) {
        cJSON_ArrayForEach(e, in)
        {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "text");
            size_t k = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
            if (used + k + 1 >= cap)
                break;
            memcpy(out + used, t->valuestring, k);
            used += k;
            out[used++] = '\n';
        }
    }
    *len = used;
done:
    cJSON_Delete(in);
    free(json);
    return out;
}

int main(int argc, char **argv)
{
    const char *const *names = all_names;
    int n_names = (int)(sizeof all_names / sizeof *all_names);
    size_t len;
    char text_path[] = "/tmp/bench_tokenizer_XXXXXX";
    int rc = 0;

    if (argc > 1 && (!strcmp(argv[1], "--help") || argv[1][0] == '-')) {
        const int help = !strcmp(argv[1], "--help");
        fprintf(help ? stdout : stderr, "usage: bench_tokenizer [NAME...]   (NAME a folder of ../shared/tokenizers: "
                "qwen3 qwen2_5 llama3 ...; default all six)\n");
        return help ? 0 : 2;
    }
    if (argc > 1) {
        names = (const char *const *)argv + 1;
        n_names = argc - 1;
    }
    char *text = mixed_text(1 << 20, &len);
    if (text == NULL) {
        fprintf(stderr, "bench_tokenizer: cannot build the text from %s/tokenizers/inputs.json\n", GM_SHARED_DIR);
        return 1;
    }
    printf("text: %zu bytes (the 93 inputs of inputs.json, one per line, repeated)\n", len);
    printf("%-14s %10s %9s %12s %12s %9s\n", "tokenizer", "load ms", "mem MB", "encode MB/s", "2 thr MB/s", "ids");
    for (int i = 0; i < n_names; i++) {
        char path[1024];
        gm_tokenizer *t = NULL;
        gm_status st = {0};
        double best = 1e30;
        snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", GM_SHARED_DIR, names[i]);
        for (int r = 0; r < 3; r++) {
            double t0 = now_ms();
            if (gm_tokenizer_load(&t, path, &st) != 0) {
                fprintf(stderr, "bench_tokenizer: %s\n", st.msg);
                return 1;
            }
            double dt = now_ms() - t0;
            best = dt < best ? dt : best;
            if (r < 2)
                gm_tokenizer_free(t);
        }
        double enc = 1e30, enc2 = 1e30;
        size_t n_ids = 0, n_ids2 = 0;
        for (int r = 0; r < 3; r++) {
            int32_t *ids = NULL;
            double t0 = now_ms();
            if (gm_tokenizer_encode(t, text, len, 1, 1, &ids, &n_ids, &st) != 0) {
                fprintf(stderr, "bench_tokenizer: %s\n", st.msg);
                return 1;
            }
            double dt = now_ms() - t0;
            enc = dt < enc ? dt : enc;
            free(ids);
            t0 = now_ms();
            if (gm_tokenizer_encode_mt(t, text, len, 1, 1, 2, &ids, &n_ids2, &st) != 0) {
                fprintf(stderr, "bench_tokenizer: %s\n", st.msg);
                return 1;
            }
            dt = now_ms() - t0;
            enc2 = dt < enc2 ? dt : enc2;
            free(ids);
        }
        if (n_ids2 != n_ids) {
            fprintf(stderr, "bench_tokenizer: %s: %zu ids with 2 threads, %zu with one\n", names[i], n_ids2, n_ids);
            rc = 1;
        }
        printf("%-14s %10.1f %9.1f %12.2f %12.2f %9zu\n", names[i], best, (double)gm_tokenizer_memory(t) / 1e6,
               (double)len / 1e6 / (enc / 1e3), (double)len / 1e6 / (enc2 / 1e3), n_ids);
        fflush(stdout);
        gm_tokenizer_free(t);
    }

    // the reference, in the same run
    char script[1024], mod[1024];
    snprintf(script, sizeof script, "%s/bench_tokenizers_ref.js", GM_BENCH_DIR);
    snprintf(mod, sizeof mod, "%s/ref/node_modules/tokenizers/package.json", GM_BENCH_DIR);
    if (access(mod, R_OK) != 0 || system("node --version >/dev/null 2>&1") != 0) {
        printf("reference: skipped (needs node and: npm install --prefix %s/ref tokenizers@0.23.2)\n", GM_BENCH_DIR);
        free(text);
        return rc;
    }
    int fd = mkstemp(text_path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "bench_tokenizer: cannot write %s\n", text_path);
        free(text);
        return 1;
    }
    char cmd[8192];
    int k = snprintf(cmd, sizeof cmd, "RAYON_NUM_THREADS=2 node '%s' '%s/tokenizers' '%s'", script, GM_SHARED_DIR,
                     text_path);
    for (int i = 0; i < n_names && k > 0 && (size_t)k < sizeof cmd; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " '%s'", names[i]);
    printf("reference: tokenizers@0.23.2 (node); encode = one encode() call, batch = encodeBatch() of 64 KB chunks on 2 threads\n");
    fflush(stdout);
    if (system(cmd) != 0)
        rc = 1;
    unlink(text_path);
    free(text);
    return rc;
}

/*
** bench_runner: the baseline runner on a random-weight model with the real
** Qwen2-1.5B shapes (models/qwen2_1_5b), written to a temporary folder as
** safetensors. Everything is measured in this run, each figure the median
** of several repeats, side by side with what the machine can do:
**   - the peak of every tier the CPU has (peaks*.c: AVX2 FMA, AVX-512 FMA,
**     VDPBF16PS, AMX TDPBF16PS) on 1 thread and on every core, and the
**     memory read bandwidth (the best of several ways of reading);
**   - load (open, validate, transpose into fresh memory) against the least
**     any copying loader spends: the file's bytes read once into fresh
**     memory; and the loader's peak resident memory against the model size;
**   - prefills (lite mode) of 32, 512 and 2048 tokens on 1 thread and on
**     every core: seconds, the ratio to the time the weights take to read
**     once, GFLOP/s, % of the running tier's peak, and the scaling;
**   - greedy decode with the KV cache: tokens/s and the weight bytes read
**     per second as a % of the measured bandwidth;
**   - beside each, PyTorch's bf16 forward pass of the same shapes
**     (torch_qwen2.py in a child), when /usr/bin/python3 can import torch;
**   - the blocked kernels against the plain reference kernel.
** The targets printed are the running tier's (bench/README.md).
**   bench_runner [--keep DIR] [--only load|run] [--tokens N,N,..] [--reps R,R,..]
**                [--steps N] [--quick] [--no-torch] [--torch-budget S] [--python PATH] [--quant awq]
**   --keep DIR reuses (or makes) the model there; --quant awq measures an AWQ
**   checkpoint of the same shapes instead (Qwen/Qwen2-1.5B-Instruct-AWQ's
**   header, tests/data/hub, random packed weights), its load, which
**   dequantizes every projection to bf16, against the bf16 file of the same
**   shapes read once (the bytes it makes) and its own file read once; --only measures the loading
**   figures, or the prefill, decode and kernel ones; --tokens and --reps the
**   prompt lengths and their repeats (32,512,2048 and 7,3,1; --quick: 32,512
**   and 3,1, 8 decode steps, 3 load turns); --torch-budget the seconds one
**   PyTorch run may take to be measured (120; the repeats are as many as fit).
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
#include <signal.h>
#include <stdarg.h>

#include "gm/cli.h"
#include "gm/cpu.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/pool.h"
#include "gm/registry.h"
#include "gm/runner.h"
#include "gm/safetensors.h"
#include "bench_util.h"
#include "peaks.h"
#include "qwen2_1_5b_instruct_awq/qwen2_1_5b_instruct_awq_weights.h" /* --quant awq: its arena's dequantization time */

#define MODEL "qwen2_1_5b"

extern const gm_model_entry *const gm_bench_quant_models[]; /* bench/CMakeLists.txt: the AWQ model of --quant awq */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* An f32 of the normal f16 range as f16 bits, truncated (random weights need no rounding). */
static uint16_t f16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    const int e = (int)((u >> 23) & 0xFF) - 127 + 15;
    return (uint16_t)(((u >> 16) & 0x8000) | (e <= 0 ? 0 : e >= 31 ? 0x7C00 : (uint32_t)e << 10 | ((u >> 13) & 0x3FF)));
}

/*
** Write config.json and the weights file `file` with the header of snapshot folder `snap` and random
** data: bf16 or f16 values (norms near 1, weights of a unit-variance layer, AWQ's scales of 4-bit
** steps of such weights), random words for packed 4-bit tensors (I32).
*/
static void make_model(const char *dir, const char *snap, const char *file)
{
    char path[4096], *cfg = NULL;
    size_t len = 0;
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/config.json", snap);
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
    snprintf(path, sizeof path, "%s/%s.head", snap, file);
    if (st_read_header_bytes(path, &head, &head_len, &st) || st_header_parse(&h, head, head_len, 0, path, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        exit(1);
    }
    /* written under a temporary name and renamed: an interrupted run leaves no half file for --keep to reuse */
    char final[4096];
    snprintf(final, sizeof final, "%s/%s", dir, file);
    snprintf(path, sizeof path, "%s/%s.tmp", dir, file);
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
    static uint16_t buf[1 << 20];
    for (size_t i = 0; i < h.n_tensors; i++) {
        const st_tensor *t = order[i];
        const size_t n = (size_t)(t->end - t->begin) / 2; /* 16-bit words: an I32 is two */
        const int is_bias = strstr(t->name, ".bias") != NULL, is_norm = t->rank == 1 && !is_bias;
        const int is_scales = strstr(t->name, ".scales") != NULL, packed = t->dtype == ST_I32;
        const float scale = is_scales ? 2.0f * 1.7320508f / sqrtf(1536.0f) / 15.0f /* a 4-bit step of a weight */
                          : t->rank == 2 ? 1.7320508f / sqrtf((float)t->shape[1]) : 0.2f;
        for (size_t done = 0; done < n;) {
            const size_t k = n - done < (1 << 20) ? n - done : (1 << 20);
            for (size_t j = 0; j < k; j++) {
                const float u = (float)(next() >> 8) / 8388608.0f - 1.0f; /* uniform in [-1, 1) */
                const float v = is_norm ? 1.0f + 0.1f * u : is_scales ? scale * (1.0f + 0.1f * u) : scale * u;
                buf[j] = packed ? (uint16_t)next() : t->dtype == ST_F16 ? f16_bits(v) : gm_f32_to_bf16(v);
            }
            if (fwrite(buf, 2, k, f) != k) {
                fprintf(stderr, "bench_runner: %s: %s\n", path, strerror(errno));
                exit(1);
            }
            done += k;
        }
    }
    if (fclose(f) != 0 || rename(path, final) != 0) {
        fprintf(stderr, "bench_runner: %s: %s\n", final, strerror(errno));
        exit(1);
    }
    free(order);
    st_header_free(&h);
    free(head);
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
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || *seconds < 0) { /* no figure from a failed run */
        fprintf(stderr, "bench_runner: the measured child failed (%s %d); no figure is printed for it\n",
                WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        exit(1);
    }
    return (double)ru.ru_maxrss * 1024.0;
}

static const gm_model_entry *bench_model;
static const char *bench_dir;
static double *bench_dequant; /* shared with the children: the last --quant awq load's dequantization pass, seconds */

static void child_copy(const void *path) { copy_once(path, gm_default_threads()); }

/* The loader in the form tier `name` reads, on that tier's kernels (its transposes) */
static void child_load(const void *name)
{
    gm_status st = {0};
    void *w = calloc(1, bench_model->weights_size);
    gm_kernels_select(name);
    if (bench_model->load(w, bench_dir, &st)) {
        fprintf(stderr, "bench_runner: %s\n", st.msg);
        _exit(1);
    }
    if (bench_dequant)
        *bench_dequant = ((qwen2_1_5b_instruct_awq_Weights *)w)->arena.dequant_seconds;
}

/* How a form holds W, for the lines that name it */
static const char *form_text(char *buf, size_t size, gm_wform f)
{
    if (gm_wform_panel(f))
        snprintf(buf, size, "(in, out) in panels of %d columns", gm_wform_panel(f));
    else
        snprintf(buf, size, "%s",
                 f == GM_W_NK ? (gm_weights_place_arena(GM_PLACE_AUTO, NULL) ? "(out, in), copied into huge pages"
                                                                          : "(out, in), in place")
                              : "(in, out), transposed");
    return buf;
}

/* The temporary model (and the AWQ one beside it), unless it was asked to be kept. */
static void remove_model(const char *keep, const char *dir, char *path)
{
    static const char *const files[] = {"model.safetensors", "model.safetensors.tmp", "config.json",
                                        "awq/model.safetensors", "awq/model.safetensors.tmp", "awq/config.json"};
    if (keep)
        return;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, 4200, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, 4200, "%s/awq", dir);
    rmdir(path);
    rmdir(dir);
}

/*
** The temporary model's folder (none with --keep) and the process that made
** it: removed however the run ends, an error's exit or Ctrl-C (SIGINT,
** SIGTERM, SIGHUP; the signal then ends the process as it would have), not
** only at the end of a whole run. A 3 GB model was left in TMPDIR.
*/
static char made_dir[4096];
static pid_t made_by;

static void remove_made(void)
{
    char path[4200];
    if (made_dir[0] && getpid() == made_by)
        remove_model(NULL, made_dir, path);
}

static void on_stop(int sig)
{
    remove_made();
    signal(sig, SIG_DFL);
    raise(sig);
}


/* ---------------------------------------------------------------------- */
/* PyTorch beside us: bench/torch_qwen2.py --serve in a child, one command a line */

typedef struct torch_proc {
    pid_t pid; /* 0: not running */
    FILE *to, *from;
    char version[64];
} torch_proc;

static void torch_stop(torch_proc *tp)
{
    if (!tp->pid)
        return;
    fputs("quit\n", tp->to);
    fclose(tp->to);
    fclose(tp->from);
    waitpid(tp->pid, NULL, 0);
    tp->pid = 0;
}

/* Start the child and wait for its weights; 0, or -1 with the reason in why. */
static int torch_start(torch_proc *tp, const char *python, const char *config, char *why, size_t why_len)
{
    int in[2], out[2];
    memset(tp, 0, sizeof *tp);
    if (pipe(in) != 0 || pipe(out) != 0) {
        snprintf(why, why_len, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(python, python, GM_SOURCE_DIR "/bench/torch_qwen2.py", "--serve", "--config", config, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    tp->pid = pid;
    tp->to = fdopen(in[1], "w");
    tp->from = fdopen(out[0], "r");
    char line[512];
    if (fgets(line, sizeof line, tp->from) && !strncmp(line, "ready ", 6)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(tp->version, sizeof tp->version, "%s", line + 6);
        return 0;
    }
    int status = 0;
    if (!feof(tp->from) && !strncmp(line, "error: ", 7)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(why, why_len, "%s", line + 7);
    }
    fclose(tp->to);
    fclose(tp->from);
    waitpid(pid, &status, 0);
    tp->pid = 0;
    if (!*why)
        snprintf(why, why_len, "%s %s", python,
                 WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "could not be run" : "exited before it was ready");
    return -1;
}

/* Send one command; the number it answers (seconds, or 0 for "ok"), or -1 when the child failed (then it is stopped). */
static double torch_ask(torch_proc *tp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static double torch_ask(torch_proc *tp, const char *fmt, ...)
{
    if (!tp->pid)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(tp->to, fmt, ap);
    va_end(ap);
    fputc('\n', tp->to);
    fflush(tp->to);
    char line[512];
    char *end = NULL;
    double v = -1;
    if (fgets(line, sizeof line, tp->from)) {
        if (!strncmp(line, "ok", 2))
            return 0;
        v = strtod(line, &end);
    }
    if (!end || end == line || v < 0) {
        fprintf(stderr, "bench_runner: PyTorch's side stopped answering (%s); the comparison ends here\n",
                end ? "a bad line" : "no answer");
        torch_stop(tp);
        return -1;
    }
    usleep(20000); /* its OpenMP threads spin a little after a parallel region */
    return v;
}

/* ---------------------------------------------------------------------- */

typedef enum tier_id { TIER_AMX, TIER_AVX512_BF16, TIER_AVX512, TIER_AVX2, TIER_PORTABLE } tier_id;

/* Which hardware tier a tier's kernels are (a software model stands for the one it models) */
static tier_id tier_of(const char *name)
{
    const char *hw = gm_kernels_info(name)->stands_for;
    return !strcmp(hw, "amx")           ? TIER_AMX
           : !strcmp(hw, "avx512-bf16") ? TIER_AVX512_BF16
           : !strcmp(hw, "avx512")      ? TIER_AVX512
           : !strcmp(hw, "avx2")        ? TIER_AVX2
                                        : TIER_PORTABLE;
}

/* The peak a tier's products are measured against: the portable tier's against AVX2's */
static peak_kind peak_of(tier_id t)
{
    return t == TIER_AMX           ? PEAK_AMX_BF16
           : t == TIER_AVX512_BF16 ? PEAK_AVX512_BF16
           : t == TIER_AVX512      ? PEAK_AVX512_FMA
                                   : PEAK_AVX2_FMA;
}

enum { MAX_LENS = 8, MAX_REPS = 64, MAX_STEPS = 256, MAX_SAMPLES = 1024 };

/* What a run added to the runner's profile: its own parts (after less before) */
static rt_profile profile_delta(const rt_profile *after, const rt_profile *before)
{
    return (rt_profile){after->projections - before->projections, after->attention - before->attention,
                        after->elementwise - before->elementwise, after->lm_head - before->lm_head,
                        after->conversions - before->conversions};
}

/*
** Where the time of one prefill (or decode step) went: each part the median
** over its runs (steps), its share of the median run (so that a cold first run, whose page faults
** land in the projections, moves none of them).
*/
static void print_profile(const rt_profile *runs, int n, double seconds)
{
    const char *name[] = {"projections", "attention", "element-wise steps", "LM head", "conversions"};
    double sum = 0;
    printf("  where the time went (median of %d each): ", n);
    for (int i = 0; i < 5; i++) {
        double v[MAX_STEPS]; /* a prefill's runs or a decode's steps */
        for (int r = 0; r < n; r++) {
            const rt_profile *p = &runs[r];
            const double part[] = {p->projections, p->attention, p->elementwise, p->lm_head, p->conversions};
            v[r] = part[i];
        }
        const double m = median(v, n);
        sum += m;
        printf("%s%s %.3f s (%.0f%%)", i ? ", " : "", name[i], m, 100.0 * m / seconds);
    }
    printf("; the rest %.3f s\n", seconds - sum);
}

/* A comma-separated list of positive numbers into v[0..max); how many. */
static int parse_list(const char *s, int *v, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        const long x = strtol(p, &end, 10);
        if (end == p || x <= 0 || x > 1000000)
            return 0;
        v[n++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return 0;
    }
    return n;
}

/* The usage line: on stdout and exit 0 when asked for (--help), else on stderr and exit 2. */
static void usage_to(FILE *f, int code)
{
    fprintf(f, "usage: bench_runner [--keep DIR] [--only load|run] [--tokens N,N,..] [--reps R,R,..] [--steps N]\n"
               "                    [--tiers] [--quick] [--no-torch] [--torch-budget SECONDS] [--python PATH] "
               "[--quant awq]\n"
               "bench/README.md says what each figure is and how it is measured.\n");
    exit(code);
}

static void usage(void)
{
    usage_to(stderr, 2);
}

/* A positive whole number no larger than max, or the usage line: "abc" or "0" is no count to run with. */
static int count_arg(const char *s, int max)
{
    const long x = gm_cli_count(s, 1, max);
    if (x < 0)
        usage();
    return (int)x;
}

int main(int argc, char **argv)
{
    int lens[MAX_LENS] = {32, 512, 2048}, reps[MAX_LENS] = {7, 3, 1}, n_lens = 3, n_reps = 3, steps = 16, turns = 5;
    int use_torch = 1, all_tiers = 0, quant = 0;
    double budget = 120;
    const char *keep = NULL, *only = NULL, *python = "/usr/bin/python3";
    for (int i = 1; i < argc; i++) /* --quick first: the options given beside it override its choices */
        if (!strcmp(argv[i], "--quick")) {
            n_lens = 2, n_reps = 2, reps[0] = 3, reps[1] = 1, steps = 8, turns = 3;
        }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            continue;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            if (!(n_lens = parse_list(argv[++i], lens, MAX_LENS)))
                usage();
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (!(n_reps = parse_list(argv[++i], reps, MAX_LENS)))
                usage();
        } else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = count_arg(argv[++i], MAX_STEPS);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
            keep = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--no-torch"))
            use_torch = 0;
        else if (!strcmp(argv[i], "--tiers"))
            all_tiers = 1;
        else if (!strcmp(argv[i], "--torch-budget") && i + 1 < argc)
            budget = count_arg(argv[++i], 86400);
        else if (!strcmp(argv[i], "--python") && i + 1 < argc)
            python = argv[++i];
        else if (!strcmp(argv[i], "--quant") && i + 1 < argc && !strcmp(argv[i + 1], "awq"))
            quant = 1, i++;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            usage_to(stdout, 0);
        else
            usage();
    }
    if (only && strcmp(only, "load") && strcmp(only, "run"))
        usage();
    for (int j = n_reps; j < n_lens; j++) /* a shorter --reps list: its last count for the rest */
        reps[j] = reps[n_reps - 1];
    for (int j = 0; j < n_lens; j++)
        reps[j] = reps[j] > MAX_REPS ? MAX_REPS : reps[j];
    steps = steps < 1 ? 1 : steps > MAX_STEPS ? MAX_STEPS : steps;
    signal(SIGPIPE, SIG_IGN); /* a PyTorch child that dies is an error to report, not our end */

    const double t_start = now();
    /* GM_ISA picks the tier that runs; the peaks are the CPU's (gm_cpu_features) all the same */
    {
        gm_status ist = {0};
        if (gm_kernels_check(&ist)) {
            fprintf(stderr, "bench_runner: %s\n", ist.msg);
            return 2;
        }
    }
    const char *isa = getenv("GM_ISA") ? getenv("GM_ISA") : "";
    const gm_model_entry *e = quant ? gm_registry_find(gm_bench_quant_models, GM_AWQ_ID)
                                    : gm_registry_find(gm_models, MODEL);
    if (!e) {
        fprintf(stderr, "bench_runner: models/%s is not built in\n", quant ? GM_AWQ_ID : MODEL);
        return 1;
    }
    char dir[4096];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        gm_status kst = {0};
        if (gm_mkdir_p(dir, &kst)) {
            fprintf(stderr, "bench_runner: --keep %s: %s\n", dir, kst.msg);
            return 1;
        }
    } else {
        snprintf(dir, sizeof dir, "%s/gm-bench-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(made_dir, sizeof made_dir, "%s", dir);
        made_by = getpid();
        atexit(remove_made);
        signal(SIGINT, on_stop);
        signal(SIGTERM, on_stop);
        signal(SIGHUP, on_stop);
    }
    char path[4200], model_dir[4200], awq_path[4300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    double t0 = now();
    if (access(path, R_OK) != 0)
        make_model(dir, GM_SOURCE_DIR "/models/" MODEL "/snapshot", "model.safetensors");
    snprintf(model_dir, sizeof model_dir, "%s%s", dir, quant ? "/awq" : ""); /* the model measured */
    snprintf(awq_path, sizeof awq_path, "%s/model.safetensors", model_dir);
    if (quant && access(awq_path, R_OK) != 0) {
        gm_status qst = {0};
        if (gm_mkdir_p(model_dir, &qst)) {
            fprintf(stderr, "bench_runner: %s\n", qst.msg);
            return 1;
        }
        make_model(model_dir, GM_AWQ_SNAPSHOT, "model.safetensors");
    }
    const int cores = gm_default_threads();
    const int K = cores > 1 ? 2 : 1, nthr[2] = {1, cores};
    const unsigned feats = gm_cpu_features();
    /* the tiers measured: the running one, or with --tiers every one this CPU has, widest first */
    enum { MAX_TIERS = 8 };
    const char *tn[MAX_TIERS];
    int n_tiers = 0;
    if (all_tiers) {
        for (const char *const *t = gm_kernels_tiers(); *t && n_tiers < MAX_TIERS; t++)
            if (!gm_kernels_info(*t)->model && gm_kernels_select(*t) == 0)
                tn[n_tiers++] = *t;
        gm_kernels_select(NULL);
    } else {
        tn[n_tiers++] = gm_kernels_name();
    }
    char tier_list[256] = "";
    for (int i = 0; i < n_tiers; i++)
        snprintf(tier_list + strlen(tier_list), sizeof tier_list - strlen(tier_list), "%s%s", i ? ", " : "", tn[i]);
    printf("model: random weights with the shapes of %s in %s (made in %.1f s)\n", e->repo, model_dir, now() - t0);
    printf("kernels: the %s tier%s (CPU: %s%s%s%s%s%s%s%s); threads: 1 and %d; every figure the median of its repeats, "
           "measured in turns with what it is compared to\n",
           tier_list, n_tiers > 1 ? "s, in turns" : "", feats & GM_CPU_AVX2 ? "avx2" : "", feats & GM_CPU_FMA ? " fma" : "",
           feats & GM_CPU_AVX512 ? " avx512" : "", feats & GM_CPU_AVX512_BF16 ? " avx512-bf16" : "",
           feats & GM_CPU_AMX_BF16 ? " amx-bf16" : "", feats ? "" : "no vector extensions",
           *isa ? "; GM_ISA=" : "", isa, cores);

    /* the peak of every tier this CPU has, on 1 thread and on every core: the median of 5 samples, in turns */
    double peak[PEAK_KINDS][2] = {{0}};
    for (int k = 0; k < PEAK_KINDS; k++) {
        if (!peak_available((peak_kind)k)) {
            printf("peak %s: not on this CPU\n", peak_name((peak_kind)k));
            continue;
        }
        double s[2][5];
        for (int r = 0; r < 5; r++)
            for (int t = 0; t < K; t++)
                s[t][r] = peak_sample((peak_kind)k, nthr[t]);
        for (int t = 0; t < K; t++)
            peak[k][t] = median(s[t], 5);
        printf("peak %s (%s): %.1f GFLOP/s on 1 thread, %.1f on %d threads\n", peak_name((peak_kind)k),
               peak_how((peak_kind)k), peak[k][0], peak[k][K - 1], cores);
    }

    /* the read bandwidth: every way of reading, 3 samples each in turns, on 1 thread and every core; the best then serves */
    bw_probe bwp;
    bw_new(&bwp, cores);
    int best[2] = {0, 0};
    double bw_best[2] = {0, 0};
    for (int t = 0; t < K; t++) {
        double s[BW_CONFIGS][3];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < BW_CONFIGS; c++)
                s[c][r] = bw_config_available(c) ? bw_sample(&bwp, nthr[t], c) : 0;
        char list[1024] = "";
        for (int c = 0; c < BW_CONFIGS; c++) {
            if (!bw_config_available(c))
                continue;
            const double m = median(s[c], 3);
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s %.1f", *list ? ", " : "",
                     bw_config_name(c), m);
            if (m > bw_best[t])
                bw_best[t] = m, best[t] = c;
        }
        printf("read bandwidth, %d thread%s: %.1f GB/s, %s (median of 3 of each way, in turns: %s; GB/s)\n", nthr[t],
               t ? "s" : "", bw_best[t], bw_config_name(best[t]), list);
    }
    printf("  (the probe: a %.2f GiB huge-page buffer, touched once; each thread reads its own contiguous part, "
           "8 independent accumulators; the best way of reading serves every sample below)\n",
           (double)bwp.size / (1 << 30));

    if (!only || strcmp(only, "run") != 0) {
        /* loading, per tier (its form of W): the file read once into fresh memory, then our loader; each in a fresh
           child process */
        bench_model = e;
        bench_dir = model_dir;
        if (quant) {
            bench_dequant = mmap(NULL, sizeof *bench_dequant, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            if (bench_dequant == MAP_FAILED) {
                perror("mmap");
                return 1;
            }
        }
        double file_size, awq_size = 0;
        {
            int fd = open(path, O_RDONLY);
            file_size = (double)lseek(fd, 0, SEEK_END);
            close(fd);
            if (quant) {
                fd = open(awq_path, O_RDONLY);
                awq_size = (double)lseek(fd, 0, SEEK_END);
                close(fd);
            }
        }
        for (int ti = 0; ti < n_tiers; ti++) {
            double copy[5], load[5], rss[5], lratio[5], qcopy[5], deq[5], dratio[5];
            for (int r = 0; r < turns; r++) {
                if (r % 2) { /* in turns, which goes first: neither always meets the memory the other just freed */
                    rss[r] = in_child(child_load, tn[ti], &load[r]);
                    in_child(child_copy, path, &copy[r]);
                } else {
                    in_child(child_copy, path, &copy[r]);
                    rss[r] = in_child(child_load, tn[ti], &load[r]);
                }
                if (quant) { /* and the AWQ file itself read once */
                    deq[r] = *bench_dequant;
                    in_child(child_copy, awq_path, &qcopy[r]);
                    dratio[r] = deq[r] / qcopy[r];
                }
                lratio[r] = load[r] / copy[r];
            }
            const gm_wform wf = gm_kernels_info(tn[ti])->wform;
            char form[64];
            if (quant) {
                /*
                ** the whole load against the bf16 file of the same shapes read once: both put the same bf16 bytes
                ** in fresh memory, from 1.15 GB here; and the dequantization pass against the AWQ file read once
                ** (it writes 2.3x the bytes that file has into fresh memory: a floor, not a target)
                */
                printf("load (AWQ), %s tier (W %s): %.3f s; the bf16 file of the same shapes, %.2f GB, read once into "
                       "fresh memory: %.3f s; ratio %.2f (target <= 1.0); of the load, dequantizing every projection "
                       "%.3f s, %.2fx the AWQ file's %.2f GB read once (%.3f s)\n", tn[ti],
                       wf == GM_W_NK ? "(out, in)" : wf == GM_W_KN ? "(in, out)" : form_text(form, sizeof form, wf),
                       median(load, turns), file_size / 1e9, median(copy, turns), median(lratio, turns), median(deq, turns),
                       median(dratio, turns), awq_size / 1e9, median(qcopy, turns));
                printf("load peak RSS (AWQ), %s tier: %.2f GB, %.2fx the bf16 weights it makes, %.2fx the AWQ file "
                       "(it keeps the packed tensors, used in place)\n", tn[ti], median(rss, turns) / 1e9,
                       median(rss, turns) / file_size, median(rss, turns) / awq_size);
                continue;
            }
            printf("load, %s tier (W %s): %.3f s; the file's %.2f GB read once into fresh memory: %.3f s; ratio %.2f "
                   "(target <= %s)\n", tn[ti], form_text(form, sizeof form, wf), median(load, turns), file_size / 1e9,
                   median(copy, turns), median(lratio, turns), wf == GM_W_NK ? "1.0" : "1.3");
            const double peak_rss = median(rss, turns);
            printf("load peak RSS, %s tier: %.2f GB, %.2fx the model file (target <= 1.05)\n", tn[ti], peak_rss / 1e9,
                   peak_rss / file_size);
        }
    }
    if (only && strcmp(only, "load") == 0) {
        bw_free(&bwp);
        remove_model(keep, dir, path);
        printf("whole run: %.0f s\n", now() - t_start);
        return 0;
    }

    /* each tier's weights, in its form (loaded once a form), and its sessions on 1 thread and on every core */
    gm_status st = {0};
    void *wts[GM_W_FORMS] = {NULL}; /* by form */
    rt_layer *lays[GM_W_FORMS] = {NULL};
    rt_model models[GM_W_FORMS];
    int max_len = 0;
    for (int j = 0; j < n_lens; j++)
        max_len = lens[j] > max_len ? lens[j] : max_len;
    const int cap = max_len + steps + 64;
    static rt_session *sess[MAX_TIERS][2];
    static rt_profile prof[MAX_TIERS][2]; /* each session's, emptied before each prompt length */
    static rt_profile run_prof[MAX_TIERS][2][MAX_REPS]; /* what each run added to it */
    for (int ti = 0; ti < n_tiers; ti++) {
        const gm_wform f = gm_kernels_info(tn[ti])->wform;
        gm_kernels_select(tn[ti]);
        if (!wts[f]) {
            wts[f] = calloc(1, e->weights_size);
            lays[f] = calloc((size_t)e->n_layers, sizeof *lays[f]);
            if (e->load_form(wts[f], model_dir, f, &st)) {
                fprintf(stderr, "bench_runner: %s\n", st.msg);
                return 1;
            }
            e->view(wts[f], lays[f], &models[f]);
        }
        for (int k = 0; k < K; k++) {
            const rt_options o = {.precision = RT_BF16, .diagnosis = 0, .threads = nthr[k], .profile = &prof[ti][k]};
            if (rt_session_new(&sess[ti][k], &models[f], &o, cap, &st)) {
                fprintf(stderr, "bench_runner: %s\n", st.msg);
                return 1;
            }
        }
    }
    gm_kernels_select(NULL);
    const rt_model *m0 = &models[gm_kernels_info(tn[0])->wform];
    const gm_config *cf = &m0->cfg;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)cap);
    for (int i = 0; i < cap; i++)
        tokens[i] = (int32_t)(next() % (uint32_t)cf->vocab_size);
    const double H = cf->emb_dim, F = cf->hidden_dim, qw = (double)cf->n_heads * cf->head_dim,
                 kvw = (double)cf->n_kv_heads * cf->head_dim;
    const double linear = H * (qw + 2 * kvw) + qw * H + 3 * H * F;
    const double head = (double)cf->vocab_size * H, pair = 2.0 * 2.0 * cf->n_heads * cf->head_dim;
    double flops[MAX_LENS];
    char fl[512] = "";
    for (int j = 0; j < n_lens; j++) {
        const double T = lens[j];
        flops[j] = 2.0 * T * linear * cf->n_layers + 2.0 * head + pair * (T * (T + 1) / 2.0) * cf->n_layers;
        snprintf(fl + strlen(fl), sizeof fl - strlen(fl), "%s%d tokens %.1f", j ? ", " : "", lens[j], flops[j] / 1e9);
    }
    /* every weight byte is read once a token: the projections, the norms, and the LM head */
    const double bytes = 2.0 * (cf->n_layers * (linear + 2 * H + qw + 2 * kvw) + H + head);
    printf("prefill FLOPs: 2 x %.4g projection weights a token, + %.0f a (query, key) pair a layer over the causal "
           "triangle (2 x 2 x %d heads x %d), + 2 x %.4g for the LM head at the last position: %s GFLOP; "
           "weight-read floor: %.2f GB at the read bandwidth\n",
           linear * cf->n_layers, pair, cf->n_heads, cf->head_dim, head, fl, bytes / 1e9);

    /* PyTorch beside us (beside the first tier), when /usr/bin/python3 can import torch */
    torch_proc tp = {0};
    if (!use_torch) {
        printf("PyTorch comparison: skipped (--no-torch)\n");
    } else {
        char why[512] = "", config[4200];
        snprintf(config, sizeof config, "%s/config.json", dir);
        t0 = now();
        if (torch_start(&tp, python, config, why, sizeof why) != 0)
            printf("PyTorch comparison: skipped: %s\n", why);
        else
            printf("PyTorch: torch %s in %s, bench/torch_qwen2.py (Hugging Face Qwen2's eager ops in bf16, random "
                   "weights of these shapes, made in %.1f s); a figure is measured when one run fits in %.0f s "
                   "(--torch-budget), with as many runs as fit, in turns with the %s tier's\n",
                   tp.version, python, now() - t0, budget, tn[0]);
    }

    static double pk_all[MAX_TIERS][2][MAX_SAMPLES], bw_all[2][MAX_SAMPLES];
    int n_pk[MAX_TIERS][2] = {{0}}, n_bw[2] = {0, 0};
    double torch_first[2] = {0, 0}; /* PyTorch's median at the first length, for projecting the others */
    static double first_sec[MAX_TIERS][2]; /* each tier's median at the first length, for the side-by-side line */
    rt_result res;

    for (int j = 0; j < n_lens; j++) {
        const int T = lens[j], R = reps[j];
        static double sec[MAX_TIERS][2][MAX_REPS], pr[MAX_TIERS][2][MAX_REPS], fr[MAX_TIERS][2][MAX_REPS];
        static double scale[MAX_TIERS][MAX_REPS], bwk[MAX_TIERS][2][MAX_REPS];
        double tsec[2][MAX_REPS];
        int tcount[2] = {0, 0}, treps[2] = {R, R}, tmeasure[2] = {0, 0};
        double projected[2] = {0, 0};
        memset(prof, 0, sizeof prof);
        for (int k = 0; k < K; k++) {
            projected[k] = j == 0 ? 0 : torch_first[k] * flops[j] / flops[0];
            tmeasure[k] = tp.pid && (j == 0 || (torch_first[k] > 0 && projected[k] <= budget));
        }
        /*
        ** Each repeat: every tier in turn, on 1 thread, then every core: before
        ** each of our runs a sample of the tier's peak and of the read
        ** bandwidth on as many threads, after it a second sample of the peak,
        ** and after the first tier's PyTorch's run on as many (its first a
        ** warm-up).
        */
        for (int r = 0; r < R; r++) {
            for (int ti = 0; ti < n_tiers; ti++) {
                gm_kernels_select(tn[ti]);
                const peak_kind pk_kind = peak_of(tier_of(tn[ti]));
                const int have_peak = peak_available(pk_kind);
                for (int k = 0; k < K; k++) {
                    double pk = have_peak ? peak_sample(pk_kind, nthr[k]) : 0;
                    const double bw = bw_sample(&bwp, nthr[k], best[k]);
                    if (n_bw[k] < MAX_SAMPLES)
                        bw_all[k][n_bw[k]++] = bw;
                    const rt_profile before = prof[ti][k];
                    t0 = now();
                    if (rt_prefill(sess[ti][k], tokens, T, &res, &st)) {
                        fprintf(stderr, "bench_runner: %s\n", st.msg);
                        return 1;
                    }
                    sec[ti][k][r] = now() - t0;
                    run_prof[ti][k][r] = profile_delta(&prof[ti][k], &before);
                    rt_result_free(&res);
                    /* and one after: a neighbour's burst only ever lowers a sample (one of them once gave a
                       2-thread run at 138% of it), so the run is set against the larger of the two */
                    const double pk_after = have_peak ? peak_sample(pk_kind, nthr[k]) : 0;
                    pk = pk_after > pk ? pk_after : pk;
                    if (n_pk[ti][k] < MAX_SAMPLES)
                        pk_all[ti][k][n_pk[ti][k]++] = pk;
                    bwk[ti][k][r] = bw;
                    pr[ti][k][r] = have_peak ? flops[j] / sec[ti][k][r] / 1e9 / pk : 0;
                    fr[ti][k][r] = sec[ti][k][r] / (bytes / 1e9 / bw);
                    if (ti == 0 && tmeasure[k] && tp.pid && r < treps[k]) {
                        double v = torch_ask(&tp, "threads %d", nthr[k]);
                        if (v >= 0 && r == 0) { /* the warm-up, which also says how many runs fit */
                            v = torch_ask(&tp, "prefill %d 1", T);
                            const int fit = v > 0 ? (int)(budget / v) : R;
                            treps[k] = fit < 1 ? 1 : fit < R ? fit : R;
                        }
                        if (v >= 0 && (v = torch_ask(&tp, "prefill %d 1", T)) >= 0)
                            tsec[k][tcount[k]++] = v;
                    }
                }
                if (K == 2)
                    scale[ti][r] = sec[ti][0][r] / sec[ti][1][r];
            }
        }
        gm_kernels_select(NULL);
        for (int ti = 0; ti < n_tiers; ti++) {
            const tier_id tier = tier_of(tn[ti]);
            const peak_kind run_peak = peak_of(tier);
            const int have_peak = peak_available(run_peak);
            for (int k = 0; k < K; k++) {
                const double sm = median(sec[ti][k], R), f = median(fr[ti][k], R), p = median(pr[ti][k], R);
                if (j == 0)
                    first_sec[ti][k] = sm;
                char ftarget[64] = "", ptarget[64] = "";
                if (tier == TIER_AMX && T == 32)
                    snprintf(ftarget, sizeof ftarget, " (target <= 1.3x)");
                if (tier == TIER_AMX && k == K - 1 && (T == 512 || T == 2048))
                    snprintf(ptarget, sizeof ptarget, " (target >= %d%%)", T == 512 ? 40 : 30);
                if ((tier == TIER_AVX512 || tier == TIER_AVX2) && T == 32 && k == 0)
                    snprintf(ptarget, sizeof ptarget, " (target >= 70%%)");
                char ppart[160];
                if (have_peak)
                    snprintf(ppart, sizeof ppart, ", %.0f%% of the %s peak%s%s", 100.0 * p, peak_name(run_peak),
                             tier == TIER_PORTABLE ? " (the portable tier: against AVX2's peak)" : "", ptarget);
                else
                    snprintf(ppart, sizeof ppart, " (no peak measured for the %s tier)", tn[ti]);
                printf("prefill %d tokens (lite), %s, %d thread%s: %.3f s (median of %d); %.2fx the weight-read floor "
                       "(%.3f s at %.1f GB/s)%s; %.1f GFLOP/s%s\n",
                       T, tn[ti], nthr[k], k ? "s" : "", sm, R, f, bytes / 1e9 / median(bwk[ti][k], R),
                       median(bwk[ti][k], R), ftarget, flops[j] / sm / 1e9, ppart);
                print_profile(run_prof[ti][k], R, sm);
                if (ti == 0 && tmeasure[k] && tcount[k] > 0) {
                    const double ts = median(tsec[k], tcount[k]);
                    if (j == 0)
                        torch_first[k] = ts;
                    char ttarget[64] = "";
                    if (tier == TIER_AMX && (T == 32 || T == 512 || T == 2048))
                        snprintf(ttarget, sizeof ttarget, " (target >= %.1fx)", T == 32 ? 1.5 : 2.5);
                    printf("  PyTorch, %d thread%s: %.3f s (median of %d after a warm-up); ours is %.2fx PyTorch's "
                           "speed%s\n", nthr[k], k ? "s" : "", ts, tcount[k], ts / sm, ttarget);
                } else if (ti == 0 && j > 0 && tp.pid) {
                    printf("  PyTorch, %d thread%s: not measured: one run projected at %.0f s from its %d-token one, "
                           "over the budget of %.0f s\n", nthr[k], k ? "s" : "", projected[k], lens[0], budget);
                }
            }
            if (K == 2)
                printf("prefill %d tokens, %s, scaling %d threads over 1: %.2fx%s\n", T, tn[ti], cores,
                       median(scale[ti], R), tier == TIER_AVX2 && T == 32 ? " (target >= 1.8)" : "");
        }

        if (j > 0)
            continue;
        /*
        ** after the first length: greedy decode with the KV cache on every core,
        ** each tier in turn a step at a time, each step after a sample of the
        ** read bandwidth, and PyTorch's step after the first tier's
        */
        static double step[MAX_TIERS][MAX_STEPS], bratio[MAX_TIERS][MAX_STEPS];
        static rt_profile step_prof[MAX_TIERS][MAX_STEPS];
        double bws[MAX_STEPS], tstep[MAX_STEPS];
        int32_t tok[MAX_TIERS];
        int tsteps = 0, tfit = steps;
        for (int ti = 0; ti < n_tiers; ti++) {
            gm_kernels_select(tn[ti]);
            rt_prefill(sess[ti][K - 1], tokens, T, &res, &st);
            tok[ti] = res.top1;
            rt_result_free(&res);
        }
        if (tp.pid && torch_ask(&tp, "threads %d", cores) >= 0) {
            const double v = torch_ask(&tp, "decode %d 1", T); /* the warm-up */
            const int fit = v > 0 ? (int)(budget / v) : steps;
            tfit = fit < 1 ? 1 : fit < steps ? fit : steps;
        }
        for (int i = 0; i < steps; i++) {
            for (int ti = 0; ti < n_tiers; ti++) {
                gm_kernels_select(tn[ti]);
                const double bw = bw_sample(&bwp, cores, best[K - 1]);
                if (ti == 0)
                    bws[i] = bw;
                if (n_bw[K - 1] < MAX_SAMPLES)
                    bw_all[K - 1][n_bw[K - 1]++] = bw;
                const rt_profile before = prof[ti][K - 1];
                t0 = now();
                if (rt_decode_step(sess[ti][K - 1], tok[ti], &res, &st)) {
                    fprintf(stderr, "bench_runner: %s\n", st.msg);
                    return 1;
                }
                step[ti][i] = now() - t0;
                step_prof[ti][i] = profile_delta(&prof[ti][K - 1], &before);
                bratio[ti][i] = bytes / step[ti][i] / 1e9 / bw;
                tok[ti] = res.top1;
                rt_result_free(&res);
            }
            double v;
            if (tp.pid && i < tfit && (v = torch_ask(&tp, "decode %d 1", T)) >= 0)
                tstep[tsteps++] = v;
        }
        gm_kernels_select(NULL);
        for (int ti = 0; ti < n_tiers; ti++) {
            const double ds = median(step[ti], steps), dr = median(bratio[ti], steps);
            printf("decode after %d tokens, %s, %d threads: %.2f tokens/s (%.1f ms/token, median of %d steps); %.1f GB/s "
                   "of weights, %.0f%% of the read bandwidth (%.1f GB/s) (target >= 90%%)%s\n",
                   T, tn[ti], cores, 1.0 / ds, ds * 1e3, steps, bytes / ds / 1e9, 100.0 * dr, median(bws, steps),
                   dr > 1.0 ? "; above 100%: the probe reads slower than decode does" : "");
            print_profile(step_prof[ti], steps, ds);
            if (ti == 0 && tsteps > 0) {
                const double ts = median(tstep, tsteps);
                printf("  PyTorch decode (KV cache), %d threads: %.1f ms/token (median of %d steps after a warm-up); "
                       "ours is %.2fx PyTorch's speed\n", cores, ts * 1e3, tsteps, ts / ds);
            }
        }
    }
    torch_stop(&tp);
    for (int ti = 0; ti < n_tiers; ti++)
        for (int k = 0; k < K; k++)
            rt_session_free(sess[ti][k]);

    /* the tiers side by side at the first length: each one's speed over the next narrower one's */
    for (int ti = 0; ti + 1 < n_tiers; ti++)
        for (int k = 0; k < K; k++)
            printf("tiers side by side, prefill %d tokens, %d thread%s: %s is %.2fx %s's speed%s\n", lens[0], nthr[k],
                   k ? "s" : "", tn[ti], first_sec[ti + 1][k] / first_sec[ti][k], tn[ti + 1],
                   tier_of(tn[ti]) == TIER_AVX512 && tier_of(tn[ti + 1]) == TIER_AVX2 && k == 0 && lens[0] == 32
                       ? " (target >= 1.5x)" : "");
    /* and the AVX512_BF16 tier, an AVX-512 tier too, over the avx2 tier */
    for (int ti = 0; ti < n_tiers; ti++)
        for (int ta = ti + 2; ta < n_tiers && tier_of(tn[ti]) == TIER_AVX512_BF16; ta++)
            for (int k = 0; k < K && tier_of(tn[ta]) == TIER_AVX2; k++)
                printf("tiers side by side, prefill %d tokens, %d thread%s: %s is %.2fx %s's speed%s\n", lens[0],
                       nthr[k], k ? "s" : "", tn[ti], first_sec[ta][k] / first_sec[ti][k], tn[ta],
                       k == 0 && lens[0] == 32 ? " (target >= 1.5x)" : "");

    /*
    ** the blocked kernels against the plain reference, on layer 0's projections at the first length's rows: on the
    ** widest tier measured that reads W (in, out), in its form (panels), and the reference on the same values laid
    ** out (in, out) row-major, as it reads them
    */
    const int T = lens[0];
    int tk = -1;
    for (int ti = n_tiers - 1; ti >= 0; ti--)
        if (gm_kernels_info(tn[ti])->wform != GM_W_NK)
            tk = ti;
    if (tk >= 0) {
        const gm_wform wf = gm_kernels_info(tn[tk])->wform;
        const rt_layer *l0 = &models[wf].layers[0];
        gm_kernels_select(tn[tk]);
        float *X = malloc(sizeof(float) * (size_t)T * (size_t)F), *Y = malloc(sizeof(float) * (size_t)T * (size_t)F);
        for (size_t i = 0; i < (size_t)T * (size_t)F; i++)
            X[i] = (float)((int)(next() % 200) - 100) / 100.0f;
        struct { const gm_bf16 *w; int k, n; gm_bf16 *kn; } mats[] = {
            {l0->wq, cf->emb_dim, (int)qw, NULL}, {l0->wk, cf->emb_dim, (int)kvw, NULL},
            {l0->wv, cf->emb_dim, (int)kvw, NULL}, {l0->wo, (int)qw, cf->emb_dim, NULL},
            {l0->w_gate, cf->emb_dim, cf->hidden_dim, NULL}, {l0->w_up, cf->emb_dim, cf->hidden_dim, NULL},
            {l0->w_down, cf->hidden_dim, cf->emb_dim, NULL}};
        enum { MATS = sizeof mats / sizeof mats[0] };
        for (size_t i = 0; i < MATS; i++) {
            const size_t mk = (size_t)mats[i].k, mn = (size_t)mats[i].n;
            mats[i].kn = malloc(2 * mk * mn);
            for (size_t k = 0; k < mk; k++)
                for (size_t n = 0; n < mn; n++)
                    mats[i].kn[k * mn + n] = mats[i].w[gm_w_index(wf, mk, mn, k, n)];
        }
        gm_pool *pool = gm_pool_new(1);
        double fast[5], ref[1];
        for (int r = 0; r < 5; r++) {
            t0 = now();
            for (size_t i = 0; i < MATS; i++) {
                const gm_out o = {.Y = Y, .W = mats[i].w, .N = mats[i].n, .form = wf};
                gm_matmul_outs(pool, X, T, mats[i].k, &o, 1, 1);
            }
            fast[r] = now() - t0;
        }
        t0 = now();
        for (size_t i = 0; i < MATS; i++)
            gm_matmul_reference(Y, X, mats[i].kn, NULL, T, mats[i].k, mats[i].n, 1);
        ref[0] = now() - t0;
        const double lf = 2.0 * T * linear;
        char form[64];
        printf("kernels, one layer's projections (W %s) at %d rows, %s, 1 thread: blocked %.1f GFLOP/s, plain "
               "reference %.1f GFLOP/s: %.1fx\n", form_text(form, sizeof form, wf), T, gm_kernels_name(),
               lf / median(fast, 5) / 1e9, lf / ref[0] / 1e9, ref[0] / median(fast, 5));
        gm_pool_free(pool);
        for (size_t i = 0; i < MATS; i++)
            free(mats[i].kn);
        free(X);
        free(Y);
    }
    gm_kernels_select(NULL);
    for (int ti = 0; ti < n_tiers; ti++) {
        const peak_kind run_peak = peak_of(tier_of(tn[ti]));
        printf("machine, sampled beside the %s figures: %s peak %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads)\n",
               tn[ti], peak_name(run_peak), n_pk[ti][0] ? median(pk_all[ti][0], n_pk[ti][0]) : 0,
               n_pk[ti][K - 1] ? median(pk_all[ti][K - 1], n_pk[ti][K - 1]) : 0, cores);
    }
    printf("machine, sampled beside the figures above: memory read %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n",
           n_bw[0] ? median(bw_all[0], n_bw[0]) : 0, n_bw[K - 1] ? median(bw_all[K - 1], n_bw[K - 1]) : 0, cores);
    printf("whole run: %.0f s\n", now() - t_start);
    bw_free(&bwp);
    free(tokens);
    for (int f = 0; f < GM_W_FORMS; f++)
        if (wts[f]) {
            e->free(wts[f]);
            free(wts[f]);
            free(lays[f]);
        }
    remove_model(keep, dir, path);
    return 0;
}

/*
** gen-model: scaffold a Hugging Face decoder LLM's C inputs for an NPU
** deployment (Phase 0). Only main() turns a status into an exit code.
*/
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <sys/stat.h>

#include "gm/cli.h"
#include "gm/kernels.h"
#include "gm/lock.h"
#include "gm/status.h"
#include "hub.h"
#include "lua_host.h"
#include "tokenize_cmd.h"
#include "output.h"
#include "snapshot.h"

enum {
    EXIT_OK = 0,
    EXIT_INPUT = 1,       /* malformed or inconsistent input: config, headers, tensors */
    EXIT_USAGE = 2,       /* bad command line */
    EXIT_REFUSED = 3,     /* the model is outside gen-model's scope */
    EXIT_IO = 4,          /* a file could not be read or written */
    EXIT_NETWORK = 5,     /* the Hub could not be reached or refused */
    EXIT_INTERNAL = 70,   /* a bug in gen-model or a template */
    EXIT_INTERRUPTED = 130 /* SIGINT, SIGTERM or SIGHUP: stopped, nothing half-written */
};

static const char usage[] =
    "usage: gen-model SOURCE [--revision REV] [--out DIR] [--name ID] [--repo ORG/NAME] [--templates DIR] [--verbose]\n"
    "       gen-model download ORG/NAME [--revision REV]\n"
    "       gen-model tokenize TOKENIZER_JSON [--no-special] [--no-parse-special] [--decode]\n"
    "\n"
    "Scaffold models/<id>/ for a Hugging Face decoder LLM: <id>_weights.[ch] (Config,\n"
    "LayerWeights, loader, RoPE table), <id>_cpu_helpers.[ch], TODO.md,\n"
    "docs/development_progress/progress.md and snapshot/, the inputs it was made from.\n"
    "\n"
    "SOURCE      a Hub repo id ORG/NAME: config.json, the index and each safetensors\n"
    "            header are fetched (kilobytes, with HTTP Range) into the Hugging Face\n"
    "            cache; or a model folder: config.json plus model.safetensors or\n"
    "            model.safetensors.index.json and its shards, where any safetensors file\n"
    "            may be only its header (<file>.head), as in models/<id>/snapshot/\n"
    "download    fetch the full safetensors files into the cache (resumable, sha256\n"
    "            verified), for the Phase 0 gates; prints the snapshot folder\n"
    "tokenize    text on stdin to ids on stdout with the model's tokenizer.json, as the\n"
    "            Hugging Face tokenizers library gives them (--decode: ids to text)\n"
    "\n"
    "options:\n"
    "  -o, --out DIR        write DIR/<id>/ (default: models)\n"
    "  -n, --name ID        the model id (default: the repo name lower-cased, every run\n"
    "                       of other characters turned into '_': Qwen2-1.5B -> qwen2_1_5b)\n"
    "  -R, --revision REV   a branch, tag or commit of the Hub repo (default: main)\n"
    "  -r, --repo ORG/NAME  the Hub repo id, for a folder that does not record it\n"
    "      --templates DIR  read the templates from DIR instead of the built-in ones\n"
    "  -v, --verbose        a Lua traceback with internal errors\n"
    "  -h, --help           this text\n"
    "  -V, --version        the version, the runtime ABI and the kernel tier this CPU runs\n"
    "\n"
    "In scope: LlamaForCausalLM, MistralForCausalLM without sliding window,\n"
    "Qwen2ForCausalLM, Qwen3ForCausalLM. Anything else is refused with its reason.\n"
    "\n"
    "environment: HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH,\n"
    "$HF_HOME/token), HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE=1, HF_HUB_DOWNLOAD_TIMEOUT;\n"
    "HF_ASSETS_CACHE: where the header copies are kept, outside the shared snapshots\n"
    "(default $HF_HOME/assets; gen-model/ORG--NAME/headers/<commit>/)\n"
    "GM_LOCK_TIMEOUT: at most this many seconds to wait for a blob or models/<id>/ another\n"
    "process holds (default: as long as it holds it)\n"
    "\n"
    "exit status: 0 written; 1 bad input (config, header, tensors); 2 usage;\n"
    "3 model out of scope; 4 file system error; 5 network or Hub error; 70 internal error;\n"
    "130 interrupted (Ctrl-C, SIGTERM): transfers stopped, locks released, a partial\n"
    "download kept for the next run to resume, models/ left as it was\n";

static int exit_code(int code)
{
    switch (code) {
    case GM_OK: return EXIT_OK;
    case GM_EUSAGE: return EXIT_USAGE;
    case GM_EUNSUPPORTED: return EXIT_REFUSED;
    case GM_EIO: return EXIT_IO;
    case GM_ENET: return EXIT_NETWORK;
    case GM_ELUA: return EXIT_INTERNAL;
    default: return EXIT_INPUT;
    }
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* What a Hub run cost: the promise is kilobytes, so say it. */
static void report_transfer(const gm_hub *h)
{
    if (h->requests)
        fprintf(stderr, "gen-model: %llu bytes in %u request%s from %s\n", (unsigned long long)h->bytes,
                h->requests, h->requests == 1 ? "" : "s", h->endpoint);
}

/*
** An interrupted run (SIGINT, SIGTERM, SIGHUP): one line saying what was left, exit 130. Only
** what the next run resumes is left: a partial download stays in its .incomplete, models/ as it was.
*/
static int interrupted(const gm_status *st)
{
    if (st->code)
        fprintf(stderr, "gen-model: %s\n", st->msg);
    else
        fprintf(stderr, "gen-model: interrupted; what was done is complete, nothing is half-written\n");
    return EXIT_INTERRUPTED;
}

static int download(const char *repo, const char *revision)
{
    gm_status st = {0};
    gm_hub hub;
    char dir[PATH_MAX];
    if (!gm_repo_id_valid(repo)) {
        fprintf(stderr, "gen-model: download: expected a Hub repo id ORG/NAME, found '%s'\n", repo);
        return EXIT_USAGE;
    }
    if (gm_hub_init(&hub, &st) == 0 && gm_hub_download(&hub, repo, revision, dir, sizeof dir, &st) == 0)
        printf("%s\n", dir);
    gm_hub_free(&hub);
    if (gm_interrupted())
        return interrupted(&st);
    report_transfer(&hub);
    if (st.code)
        fprintf(stderr, "gen-model: %s\n", st.msg);
    return exit_code(st.code);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'},   {"name", required_argument, 0, 'n'},
        {"repo", required_argument, 0, 'r'},  {"revision", required_argument, 0, 'R'},
        {"templates", required_argument, 0, 'T'},
        {"verbose", no_argument, 0, 'v'},     {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},     {0, 0, 0, 0}};
    const char *out_dir = "models", *repo = NULL, *revision = "main";
    gm_gen_options opt = {0};
    if (argc > 1 && strcmp(argv[1], "tokenize") == 0)
        return gm_tokenize_main(argc - 1, argv + 1);
    int c, is_download = argc > 1 && strcmp(argv[1], "download") == 0;
    if (is_download) {
        argv++;
        argc--;
    }
    while ((c = getopt_long(argc, argv, ":o:n:r:R:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'n': opt.name = optarg; break;
        case 'r': repo = optarg; break;
        case 'R': revision = optarg; break;
        case 'T': opt.templates_dir = optarg; break;
        case 'v': opt.verbose = 1; break;
        case 'h': fputs(usage, stdout); return EXIT_OK;
        case 'V':
            printf("gen-model %s (runtime ABI %d, kernels %s)\n", GM_VERSION, GM_RUNTIME_ABI, gm_kernels_name());
            return EXIT_OK;
        default: gm_cli_bad_option("gen-model", c, argv); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "gen-model: expected one %s, found %d; see gen-model --help\n",
                is_download ? "ORG/NAME" : "SOURCE", argc - optind);
        return EXIT_USAGE;
    }
    if (opt.name && !gm_model_id_valid(opt.name)) {
        fprintf(stderr, "gen-model: --name: expected a C identifier of lower-case letters, digits and '_' "
                "(not gm, st or bf16), found '%s'\n", opt.name);
        return EXIT_USAGE;
    }
    /* past RLIMIT_FSIZE a write fails with EFBIG and is cleaned up, instead of killing us mid-write */
    signal(SIGXFSZ, SIG_IGN);
    /* Ctrl-C and SIGTERM stop the transfers and lock waits, and end the run as interrupted() says */
    gm_catch_interrupts();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "gen-model: cannot initialise libcurl\n");
        return EXIT_INTERNAL;
    }
    if (is_download) {
        int rc = download(argv[optind], revision);
        curl_global_cleanup();
        return rc;
    }

    const char *source = argv[optind];
    char cache_dir[PATH_MAX];
    const int from_hub = !is_dir(source);
    gm_status st = {0};
    gm_hub hub = {0};
    gm_snapshot snap = {0};
    gm_gen_result res = {0};
    if (from_hub) {
        if (!gm_repo_id_valid(source) || !strchr(source, '/')) {
            gm_fail(&st, GM_EUSAGE, "%s: expected a model folder or a Hub repo id ORG/NAME", source);
            goto out;
        }
        if (gm_hub_init(&hub, &st) || gm_hub_fetch_config(&hub, source, revision, cache_dir, sizeof cache_dir, &st))
            goto out;
        repo = source;
        source = cache_dir; /* .../models--org--name/snapshots/<commit>: repo and commit come from the path */
    }
    if (gm_snapshot_open_dir(&snap, source, from_hub ? NULL : repo, &st))
        goto out;
    /* the id chosen with --name is kept in the snapshot, so regeneration keeps it too */
    if (opt.name) {
        free(snap.name);
        snap.name = strdup(opt.name);
    }
    opt.name = snap.name;
    /* gen-model's header copies of a cache snapshot live beside the cache, not in it (hub.h) */
    char heads[PATH_MAX] = "";
    if (!from_hub && snap.hf_cache && gm_heads_dir(snap.repo, snap.commit, heads, sizeof heads, &st) == 0)
        gm_heads_migrate(source, heads);
    if (st.code || gm_check_config(&snap, &opt, NULL, &st) ||
        (from_hub && gm_hub_fetch_headers(&hub, repo, source, heads, sizeof heads, &st)) ||
        gm_snapshot_read_headers(&snap, source, heads[0] ? heads : NULL, &st) ||
        gm_generate(&snap, &opt, &res, &st))
        goto out;
    if (gm_write_model(out_dir, &res, &snap, &st))
        goto out;
    printf("gen-model: wrote %s/%s/ from %s @ %.12s (%zu shard header%s)\n", out_dir, res.id, snap.repo,
           snap.commit ? snap.commit : "local", snap.n_shards, snap.n_shards == 1 ? "" : "s");
    for (size_t i = 0; i < res.n_files; i++)
        printf("  %s/%s/%s\n", out_dir, res.id, res.files[i].path);
    printf("  %s/%s/snapshot/\n", out_dir, res.id);
out:
    gm_gen_result_free(&res);
    gm_snapshot_free(&snap);
    gm_hub_free(&hub);
    curl_global_cleanup();
    if (gm_interrupted())
        return interrupted(&st);
    if (from_hub)
        report_transfer(&hub);
    if (st.code)
        fprintf(stderr, "gen-model: %s\n", st.msg);
    return exit_code(st.code);
}

/*
** gen-model: scaffold a Hugging Face decoder LLM's C inputs for an NPU
** deployment (Phase 0). Only main() turns a status into an exit code.
*/
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "gm/cli.h"
#include "gm/io.h"
#include "gm/kernels.h"
#include "gm/lock.h"
#include "gm/status.h"
#include "output.h"
#include "review.h"
#include "source.h"
#include "tokenize_cmd.h"

static const char usage[] =
    "usage: gen-model SOURCE [--revision REV] [--out DIR] [--name ID] [--repo ORG/NAME] [--templates DIR] [--verbose]\n"
    "       gen-model download ORG/NAME [--revision REV]\n"
    "       gen-model tokenize TOKENIZER_JSON [--no-special] [--no-parse-special] [--decode]\n"
    "       gen-model regen [ID...] [--check] [--models DIR] [--templates DIR]\n"
    "       gen-model preview --templates DIR SOURCE... [--revision REV]\n"
    "\n"
    "Scaffold models/<id>/ for a Hugging Face decoder LLM: <id>_weights.[ch] (Config,\n"
    "LayerWeights, loader, RoPE table), <id>_cpu_helpers.[ch], TODO.md,\n"
    "docs/development_progress/progress.md and snapshot/, the inputs it was made from.\n"
    "\n"
    "SOURCE      a Hub repo id ORG/NAME: config.json, the index and each safetensors\n"
    "            header are fetched (kilobytes, with HTTP Range) into the Hugging Face\n"
    "            cache; or a model folder: config.json plus model.safetensors or\n"
    "            model.safetensors.index.json and its shards (or mlir-air's Q4NX bundle,\n"
    "            model.q4nx), where any safetensors file may be only its header\n"
    "            (<file>.head), as in models/<id>/snapshot/\n"
    "download    fetch the full safetensors files into the cache (resumable, sha256\n"
    "            verified), for the Phase 0 gates; prints the snapshot folder\n"
    "tokenize    text on stdin to ids on stdout with the model's tokenizer.json, as the\n"
    "            Hugging Face tokenizers library gives them (--decode: ids to text)\n"
    "regen       regenerate every models/<id>/ (or those named) from its own snapshot/;\n"
    "            --check writes nothing, prints the diff and exits 1 when anything would change\n"
    "preview     render each SOURCE (or every model folder in it) with the built-in templates\n"
    "            and with DIR's, and print the diff per model and a summary\n"
    "            (gen-model regen --help, gen-model preview --help)\n"
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
    "Qwen2ForCausalLM, Qwen3ForCausalLM; in bf16, f16 or f32, or quantized: AWQ (GEMM\n"
    "layout), GPTQ 4-bit (sym or not, with or without desc_act), FP8 e4m3 with block\n"
    "scales (quantization_config), mlir-air's Q4NX bundle (model.q4nx). A quantized\n"
    "projection's tensors are carried beside its bf16 field, which the loader fills by\n"
    "dequantizing them. Anything else is refused with its reason.\n"
    "\n"
    "environment: HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, HF_TOKEN_PATH,\n"
    "$HF_HOME/token), HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE=1, HF_HUB_DOWNLOAD_TIMEOUT;\n"
    "HF_HUB_DISABLE_PROGRESS_BARS=1: no download progress (a bar on a terminal; elsewhere,\n"
    "as in a log, a line every 10 s and one as each file completes)\n"
    "HF_ASSETS_CACHE: where the header copies are kept, outside the shared snapshots\n"
    "(default $HF_HOME/assets; gen-model/ORG--NAME/headers/<commit>/)\n"
    "GM_LOCK_TIMEOUT: at most this many seconds to wait for a blob or models/<id>/ another\n"
    "process holds (default: as long as it holds it)\n"
    "\n"
    "exit status: 0 written; 1 bad input (config, header, tensors); 2 usage;\n"
    "3 model out of scope; 4 file system error; 5 network or Hub error; 70 internal error;\n"
    "130 interrupted (Ctrl-C, SIGTERM): transfers stopped, locks released, a partial\n"
    "download kept for the next run to resume, models/ left as it was\n";

static const char download_usage[] =
    "usage: gen-model download ORG/NAME [--revision REV]\n"
    "\n"
    "Fetch the full safetensors files of a Hub repo, with config.json, the index and\n"
    "tokenizer.json and tokenizer_config.json when the repo has them, into the Hugging Face\n"
    "cache, for the Phase 0 gates; print the snapshot folder, a complete model folder.\n"
    "An interrupted download resumes from its blobs/<sha256>.incomplete; each file is\n"
    "checked against the sha256 the Hub gives before it is moved into place.\n"
    "\n"
    "options:\n"
    "  -R, --revision REV   a branch, tag or commit of the Hub repo (default: main)\n"
    "  -h, --help           this text\n"
    "\n"
    "environment: as gen-model's (gen-model --help)\n"
    "\n"
    "exit status: 0 downloaded; 1 bad input (no safetensors, a checksum mismatch); 2 usage;\n"
    "4 file system error; 5 network or Hub error; 130 interrupted (the partial file kept)\n";

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
    return GM_EXIT_INTERRUPTED;
}

static int download(const char *repo, const char *revision)
{
    gm_status st = {0};
    gm_sources src = {.revision = revision};
    char dir[PATH_MAX];
    if (!gm_repo_id_valid(repo)) {
        fprintf(stderr, "gen-model: download: expected a Hub repo id ORG/NAME, found '%s'\n", repo);
        return GM_EXIT_USAGE;
    }
    if (gm_sources_hub(&src, &st) == 0 && gm_hub_download(&src.hub, repo, revision, dir, sizeof dir, &st) == 0)
        printf("%s\n", dir);
    if (gm_interrupted()) {
        gm_sources_free(&src);
        return interrupted(&st);
    }
    /* a failure is its one line; the transfer's summary is for a success */
    if (!st.code)
        gm_sources_report(&src);
    gm_sources_free(&src);
    if (st.code)
        fprintf(stderr, "gen-model: %s\n", st.msg);
    return gm_exit_code(st.code);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'},   {"name", required_argument, 0, 'n'},
        {"repo", required_argument, 0, 'r'},  {"revision", required_argument, 0, 'R'},
        {"templates", required_argument, 0, 'T'},
        {"verbose", no_argument, 0, 'v'},     {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},     {0, 0, 0, 0}};
    /* download writes only the cache: the scaffold's options are not its own, and are refused */
    static const struct option download_opts[] = {
        {"revision", required_argument, 0, 'R'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *out_dir = "models", *repo = NULL, *revision = "main";
    gm_gen_options opt = {0};
    if (argc > 1 && strcmp(argv[1], "tokenize") == 0)
        return gm_tokenize_main(argc - 1, argv + 1);
    gm_status env = {0};
    if (gm_lock_check_env(&env)) { /* at the start, not when a lock is first waited for */
        fprintf(stderr, "gen-model: %s\n", env.msg);
        return gm_exit_code(env.code);
    }
    if (argc > 1 && strcmp(argv[1], "regen") == 0)
        return gm_regen_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "preview") == 0)
        return gm_preview_main(argc - 1, argv + 1);
    int c, is_download = argc > 1 && strcmp(argv[1], "download") == 0, revision_given = 0;
    if (is_download) {
        argv++;
        argc--;
    }
    while ((c = is_download ? getopt_long(argc, argv, ":R:h", download_opts, NULL)
                            : getopt_long(argc, argv, ":o:n:r:R:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'n': opt.name = optarg; break;
        case 'r': repo = optarg; break;
        case 'R':
            revision_given = 1;
            if (gm_revision_arg("gen-model", revision = optarg))
                return GM_EXIT_USAGE;
            break;
        case 'T': opt.templates_dir = optarg; break;
        case 'v': opt.verbose = 1; break;
        case 'h': fputs(is_download ? download_usage : usage, stdout); return GM_EXIT_OK;
        case 'V':
            printf("gen-model %s (runtime ABI %d, kernels %s)\n", GM_VERSION, GM_RUNTIME_ABI, gm_kernels_name());
            return GM_EXIT_OK;
        default: gm_cli_bad_option(is_download ? "gen-model download" : "gen-model", c, argv); return GM_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "gen-model: expected one %s, found %d; see gen-model%s --help\n",
                is_download ? "ORG/NAME" : "SOURCE", argc - optind, is_download ? " download" : "");
        return GM_EXIT_USAGE;
    }
    struct stat ssb;
    if (!is_download && revision_given && stat(argv[optind], &ssb) == 0 && S_ISDIR(ssb.st_mode)) {
        fprintf(stderr, "gen-model: --revision: SOURCE %s is a folder, one revision already; --revision chooses a "
                "Hub repo's (give ORG/NAME)\n", argv[optind]);
        return GM_EXIT_USAGE;
    }
    gm_status ost = {0};
    if (!is_download && gm_check_output("--out", out_dir, 1, &ost)) { /* a folder made when missing, said up front */
        fprintf(stderr, "gen-model: %s\n", ost.msg);
        return GM_EXIT_USAGE;
    }
    if (opt.name && !gm_model_id_valid(opt.name)) {
        fprintf(stderr, "gen-model: --name: expected a C identifier of 1 to %d lower-case letters, digits and '_' "
                "(not gm, st or bf16), found '%s'\n", GM_MODEL_ID_MAX, opt.name);
        return GM_EXIT_USAGE;
    }
    if (opt.templates_dir && gm_templates_check(opt.templates_dir, &ost)) {
        fprintf(stderr, "gen-model: --templates: %s\n", ost.msg);
        return GM_EXIT_USAGE;
    }
    /* an interrupt ends the run as interrupted() says */
    if (gm_command_start())
        return GM_EXIT_INTERNAL;
    if (is_download) {
        int rc = download(argv[optind], revision);
        gm_command_end();
        return rc;
    }

    gm_status st = {0};
    gm_sources src = {.revision = revision};
    gm_snapshot snap = {0};
    gm_gen_result res = {0};
    int from_hub = 0;
    if (gm_source_read(&src, argv[optind], repo, &opt, &snap, &from_hub, &st))
        goto out;
    opt.name = snap.name;
    if (gm_generate(&snap, &opt, &res, &st) || gm_write_model(out_dir, &res, &snap, &st))
        goto out;
    printf("gen-model: wrote %s/%s/ from %s @ %.12s (%zu shard header%s)\n", out_dir, res.id, snap.repo,
           snap.commit ? snap.commit : "local", snap.n_shards, snap.n_shards == 1 ? "" : "s");
    for (size_t i = 0; i < res.n_files; i++)
        printf("  %s/%s/%s\n", out_dir, res.id, res.files[i].path);
    printf("  %s/%s/snapshot/\n", out_dir, res.id);
out:
    gm_gen_result_free(&res);
    gm_snapshot_free(&snap);
    gm_command_end();
    if (gm_interrupted()) {
        gm_sources_free(&src);
        return interrupted(&st);
    }
    if (!st.code)
        gm_sources_report(&src);
    gm_sources_free(&src);
    if (st.code)
        fprintf(stderr, "gen-model: %s\n", st.msg);
    return gm_exit_code(st.code);
}

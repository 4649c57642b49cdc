/*
** phase0 as a user runs it, on every golden model of ../shared/golden
** (generated into the build tree and linked into phase0_golden): all three
** gates pass, the verdict is recorded once, the dumps load in numpy; and each
** gate fails, with its likely cause, on weights broken on purpose.
*/
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gm/npy.h"
#include "gm/utf8.h"
#include "golden_util.h"
#include "record.h"
#include "util.h"

static const char *const goldens[] = {"llama3_tied", "llama_f32_checkpoint", "llama_untied", "llama_untied_sharded",
                                      "mistral_untied", "qwen2_tied", "qwen3_tied"};

static int phase0(const char *id, const char *weights, const char *extra, char **out, char **err)
{
    char cmd[24576];
    snprintf(cmd, sizeof cmd, "'%s' %s --weights '%s' %s", GM_PHASE0, id, weights, extra ? extra : "");
    return tu_run(cmd, out, err);
}

Test(phase0, passes_all_three_gates_on_every_golden_and_records_it_once, .timeout = 120)
{
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        const char *id = goldens[i];
        char weights[4096], *toks = tg_tokens_arg(id), *out = NULL, *err = NULL;
        snprintf(weights, sizeof weights, "%s/golden/%s", GM_SHARED_DIR, id);
        for (int round = 0; round < 2; round++) { /* twice: the record must not duplicate */
            int rc = phase0(id, weights, toks, &out, &err);
            cr_assert_eq(rc, 0, "%s: exit %d\n%s%s", id, rc, out, err);
            cr_assert(strstr(out, "gate 1 weights loadable    PASS") && strstr(out, "gate 2 baseline runnable   PASS") &&
                          strstr(out, "gate 3 config consistent   PASS") && strstr(out, "Phase 0: PASS"),
                      "%s:\n%s", id, out);
            free(out);
            free(err);
        }
        char path[4400];
        snprintf(path, sizeof path, "%s/%s/docs/development_progress/progress.md", GM_GOLDEN_MODELS, id);
        char *progress = tu_read(path, NULL);
        const char *first = strstr(progress, "## Phase 0: PASS");
        cr_assert(first && !strstr(first + 1, "## Phase 0:"), "%s: one Phase 0 entry expected:\n%s", id, progress);
        cr_assert(strstr(progress, "CPU helpers kept: rms_norm, attention_reference, softmax"), "%s", progress);
        snprintf(path, sizeof path, "%s/%s/TODO.md", GM_GOLDEN_MODELS, id);
        char *todo = tu_read(path, NULL);
        cr_assert(strstr(todo, "- [x] Phase 0:") && strstr(todo, "## Active blockers\n- none\n"), "%s", todo);
        free(todo);
        free(progress);
        free(toks);
    }
}

Test(phase0, json_report_names_every_gate_and_the_measured_times)
{
    char weights[4096], *toks = tg_tokens_arg("qwen2_tied"), *out = NULL, extra[8192];
    snprintf(weights, sizeof weights, "%s/golden/qwen2_tied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --json --no-record", toks);
    cr_assert_eq(phase0("qwen2_tied", weights, extra, &out, NULL), 0);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "not JSON: %s", out);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "pass")));
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "gates")), 3);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "top5")), 5);
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "load_seconds")));
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, "prefill_seconds")));
    cJSON_Delete(j);
    free(out);
    free(toks);
}

Test(phase0, gm_isa_picks_the_tier_the_report_names_and_refuses_one_the_cpu_lacks)
{
    char weights[4096], *toks = tg_tokens_arg("qwen2_tied"), *out = NULL, *err = NULL, extra[8192];
    snprintf(weights, sizeof weights, "%s/golden/qwen2_tied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --json --no-record", toks);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "GM_ISA=portable '%s' qwen2_tied --weights '%s' %s", GM_PHASE0, weights, extra);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "not JSON: %s", out);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "kernels")), "portable");
    cJSON_Delete(j);
    free(out), free(err);
    /* without GM_ISA: the widest tier this CPU has, by name */
    cr_assert_eq(phase0("qwen2_tied", weights, extra, &out, NULL), 0);
    j = cJSON_Parse(out);
    char k[16] = "";
    snprintf(k, sizeof k, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(j, "kernels")) ?: "");
    cr_assert(!strcmp(k, "amx") || !strcmp(k, "avx512-bf16") || !strcmp(k, "avx512") || !strcmp(k, "avx2") ||
                  !strcmp(k, "portable"),
              "%s", out);
    cJSON_Delete(j);
    free(out);
    /* a name that is no tier, and (where the CPU lacks AMX) a tier it lacks: exit 2, one line naming it */
    snprintf(cmd, sizeof cmd, "GM_ISA=sse9 '%s' qwen2_tied --weights '%s' %s", GM_PHASE0, weights, extra);
    cr_assert_eq(tu_run(cmd, &out, &err), 2);
    cr_assert(strstr(err, "GM_ISA: expected one of amx, avx512-bf16, avx512, avx2, portable; found \"sse9\""), "%s", err);
    free(out), free(err);
    if (strcmp(k, "amx") != 0) {
        snprintf(cmd, sizeof cmd, "GM_ISA=amx '%s' qwen2_tied --weights '%s' %s", GM_PHASE0, weights, extra);
        cr_assert_eq(tu_run(cmd, &out, &err), 2);
        cr_assert(strstr(err, "GM_ISA=amx: this CPU has no amx tier (it has: ") && tu_lines(err) == 1, "%s", err);
        free(out), free(err);
    }
    free(toks);
}

Test(phase0, dumps_load_in_numpy_with_the_goldens_shapes)
{
    char *work = tu_tmpdir(), weights[4096], extra[9000], *toks = tg_tokens_arg("llama3_tied"), *out = NULL, *err = NULL;
    snprintf(weights, sizeof weights, "%s/golden/llama3_tied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --dump '%s/d' --no-record", toks, work);
    cr_assert_eq(phase0("llama3_tied", weights, extra, &out, &err), 0, "%s", err);
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np, json, sys; d=sys.argv[1]; g=sys.argv[2]; "
             "s={f: np.load(d+'/'+f+'.npy').shape for f in ['tokens','logits','embed','layers','final_norm']}; "
             "print(s); assert s=={'tokens':(24,),'logits':(24,384),'embed':(24,96),'layers':(2,24,96),"
             "'final_norm':(24,96)}; "
             "assert (np.load(d+'/logits.npy')==np.load(g+'/seq24/bf16_fp32acc/logits.npy')).mean()>0.99; "
             "assert json.load(open(d+'/report.json'))['pass']\" '%s/d' '%s/golden/llama3_tied/golden'",
             work, GM_SHARED_DIR);
    free(out);
    free(err);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "numpy could not read the dumps: %s%s", out, err);
    free(out);
    free(err);
    free(toks);
    tu_rmtree(work);
}

/*
** Where --dump cannot go is said before the work, not after a whole load and
** prefill: one line naming --dump and the path given, no report; a folder
** not there yet (with its parents) is made. Tried, not read off the
** permission bits: root passes access() on /proc, where nothing can be made.
*/
Test(phase0, dump_to_a_place_it_cannot_write_fails_before_the_run)
{
    char *work = tu_tmpdir(), weights[4096], extra[9000], path[4200], want[8800], *out = NULL, *err = NULL;
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    snprintf(path, sizeof path, "%s/afile", work);
    tu_write(path, "x", 1);
    const char *dumps[][2] = {{"afile", "--dump %s/afile: expected a folder, found a file"},
                              {"afile/d", "--dump %s/afile/d: %s/afile is a file, expected a folder"}};
    for (size_t i = 0; i < sizeof dumps / sizeof dumps[0]; i++) {
        snprintf(extra, sizeof extra, "--tokens 1,2 --no-record --dump '%s/%s'", work, dumps[i][0]);
        cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s", extra);
        snprintf(want, sizeof want, dumps[i][1], work, work);
        cr_expect(strstr(err, want) && tu_lines(err) == 1 && !*out, "%s: %s%s", extra, out, err);
        free(out), free(err);
    }
    struct stat sb;
    if (stat("/proc/self", &sb) == 0) { /* a folder missing there, and /proc itself: nothing can be made in it */
        const char *procs[][2] = {{"/proc/x", "--dump /proc/x: cannot "}, {"/proc", "--dump /proc: cannot "}};
        for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
            snprintf(extra, sizeof extra, "--tokens 1,2 --no-record --dump %s", procs[i][0]);
            cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s: %s%s", extra, out, err);
            cr_expect(strstr(err, procs[i][1]) && tu_lines(err) == 1 && !*out, "%s: %s%s", extra, out, err);
            free(out), free(err);
        }
    }
    snprintf(extra, sizeof extra, "--tokens 1,2 --no-record --dump '%s/new/er'", work);
    cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/new/er/report.json", work);
    cr_expect(tu_exists(path), "no %s", path);
    free(out), free(err);
    /* the checks' tries are gone: the folders hold what the run wrote, and nothing else */
    snprintf(extra, sizeof extra, "ls -A '%s' '%s/new'", work, work);
    cr_assert_eq(tu_run(extra, &out, NULL), 0);
    cr_expect(!strstr(out, ".gm-check"), "%s", out);
    free(out);
    tu_rmtree(work);
}

/* ---------------------------------------------------------------------- */
/* each gate failing */

/* A copy of a golden model folder, with `fill` written over tensor `name` (each bf16 element). */
static char *broken_copy(const char *work, const char *id, const char *name, uint16_t fill, int row)
{
    char src[4096], *dst = malloc(4200), path[4400];
    snprintf(src, sizeof src, "%s/golden/%s", GM_SHARED_DIR, id);
    snprintf(dst, 4200, "%s/%s", work, id);
    tu_copy_dir(src, dst);
    if (!name)
        return dst;
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    size_t len;
    uint8_t *bytes = (uint8_t *)tu_read(path, &len);
    uint64_t n;
    memcpy(&n, bytes, 8);
    cJSON *h = cJSON_ParseWithLength((char *)bytes + 8, n);
    const cJSON *t = cJSON_GetObjectItem(h, name);
    cr_assert_not_null(t, "%s has no %s", id, name);
    const cJSON *off = cJSON_GetObjectItem(t, "data_offsets"), *shape = cJSON_GetObjectItem(t, "shape");
    size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, e = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    if (row >= 0) { /* only one row of a 2-D tensor */
        const size_t cols = (size_t)cJSON_GetArrayItem(shape, 1)->valuedouble;
        b += (size_t)row * cols * 2;
        e = b + cols * 2;
    }
    for (size_t k = 8 + n + b; k < 8 + n + e; k += 2)
        memcpy(bytes + k, &fill, 2);
    tu_write(path, bytes, len);
    cJSON_Delete(h);
    free(bytes);
    return dst;
}

/* phase0 fails with want_gate and want_cause in its report, which is returned (malloc'd). */
static char *expect_failure(const char *id, const char *weights, const char *want_gate, const char *want_cause)
{
    char *toks = tg_tokens_arg(id), *out = NULL, *err = NULL, extra[8192];
    snprintf(extra, sizeof extra, "%s --no-record", toks);
    int rc = phase0(id, weights, extra, &out, &err);
    cr_assert_eq(rc, 1, "exit %d:\n%s%s", rc, out, err);
    cr_assert(strstr(out, want_gate), "expected '%s' in:\n%s", want_gate, out);
    cr_assert(strstr(out, want_cause), "expected '%s' in:\n%s", want_cause, out);
    cr_assert(strstr(out, "Phase 0: FAIL"), "%s", out);
    free(err);
    free(toks);
    return out;
}

Test(phase0, gate1_fails_on_another_models_weights_and_names_the_tensor)
{
    char weights[4096];
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    free(expect_failure("qwen2_tied", weights, "gate 1 weights loadable    FAIL",
                        "HF names differ from the family's table"));
}

/*
** Replace `from` by `to` (no longer) in the safetensors header of dir's
** model.safetensors, padding the header with spaces to its length.
*/
static void edit_header(const char *dir, const char *from, const char *to)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t len;
    uint8_t *bytes = (uint8_t *)tu_read(path, &len);
    uint64_t n;
    memcpy(&n, bytes, 8);
    char *h = (char *)bytes + 8, *at = memmem(h, n, from, strlen(from));
    cr_assert_not_null(at, "'%s' is not in the header of %s", from, path);
    const size_t a = strlen(from), b = strlen(to);
    cr_assert_leq(b, a);
    memmove(at + b, at + a, (size_t)(h + n - (at + a)));
    memcpy(at, to, b);
    memset(h + n - (a - b), ' ', a - b);
    tu_write(path, bytes, len);
    free(bytes);
}

/* Every row of Phase 0's failure table, each produced and its cause checked (docs/phase0.md). */

Test(phase0, gate1_fails_without_weights_as_a_missing_download)
{
    char *work = tu_tmpdir(), cmd[9000];
    char *w = broken_copy(work, "qwen2_tied", NULL, 0, -1);
    snprintf(cmd, sizeof cmd, "rm '%s'/*.safetensors", w);
    cr_assert_eq(system(cmd), 0);
    free(expect_failure("qwen2_tied", w, "gate 1 weights loadable    FAIL", "the weights are not there"));
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate1_fails_on_a_truncated_file_as_an_incomplete_download)
{
    char *work = tu_tmpdir(), cmd[9000];
    char *w = broken_copy(work, "qwen2_tied", NULL, 0, -1);
    snprintf(cmd, sizeof cmd, "truncate -s -1000 '%s/model.safetensors'", w);
    cr_assert_eq(system(cmd), 0);
    char *out = expect_failure("qwen2_tied", w, "gate 1 weights loadable    FAIL", "the download is incomplete");
    cr_assert(strstr(out, "gen-model download"), "no way to fetch it again:\n%s", out);
    cr_assert(!strstr(out, "HF names differ"), "%s", out);
    free(out);
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate1_fails_on_a_shape_or_dtype_mismatch_as_the_config_extraction)
{
    char *work = tu_tmpdir();
    char *w = broken_copy(work, "qwen3_tied", NULL, 0, -1);
    /* one norm weight declared as another dtype of the same width */
    edit_header(w, "\"model.norm.weight\":{\"dtype\":\"BF16\"", "\"model.norm.weight\":{\"dtype\":\"I16\"");
    char *out = expect_failure("qwen3_tied", w, "gate 1 weights loadable    FAIL", "a dtype or shape mismatch");
    cr_assert(strstr(out, "config extraction"), "%s", out);
    free(out);
    free(w);
    w = broken_copy(work, "qwen3_tied", NULL, 0, -1);
    /* a square projection's shape given as another of the same size */
    char *hdr = NULL, cmd[9000];
    snprintf(cmd, sizeof cmd, "python3 -c \"import json,struct,sys; f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',"
             "f.read(8))[0]; h=json.loads(f.read(n)); print(h['model.layers.0.self_attn.o_proj.weight']['shape'])\" "
             "'%s/model.safetensors'", w);
    cr_assert_eq(tu_run(cmd, &hdr, NULL), 0);
    int r = 0, c = 0;
    cr_assert_eq(sscanf(hdr, "[%d, %d]", &r, &c), 2, "%s", hdr);
    free(hdr);
    char from[256], to[256];
    snprintf(from, sizeof from, "\"model.layers.0.self_attn.o_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,%d]", r, c);
    snprintf(to, sizeof to, "\"model.layers.0.self_attn.o_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,%d]",
             r * c / 2, 2);
    edit_header(w, from, to);
    out = expect_failure("qwen3_tied", w, "gate 1 weights loadable    FAIL", "a dtype or shape mismatch");
    free(out);
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate2_fails_on_nan_weights_as_a_corrupt_download_naming_the_tensor)
{
    char *work = tu_tmpdir();
    char *w = broken_copy(work, "qwen3_tied", "model.norm.weight", 0x7FC0, -1);
    char *out = expect_failure("qwen3_tied", w, "gate 2 baseline runnable   FAIL",
                               "NaN or Inf in the weights: a corrupt download");
    cr_assert(strstr(out, "out_norm has"), "the tensor is not named:\n%s", out);
    free(out);
    free(w);
    tu_rmtree(work);
}

/* The progress.md entry of a baseline whose logits were NaN shows what gate 2 said, and no numbers it never measured. */
Test(phase0, a_nan_baseline_is_recorded_without_made_up_numbers)
{
    char *work = tu_tmpdir(), models[4400], cmd[16384], *out = NULL;
    char *w = broken_copy(work, "qwen3_tied", "model.norm.weight", 0x7FC0, -1);
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/qwen3_tied' '%s/'", models, GM_GOLDEN_MODELS, models);
    cr_assert_eq(system(cmd), 0);
    char *toks = tg_tokens_arg("qwen3_tied"), extra[16384];
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    cr_assert_eq(phase0("qwen3_tied", w, extra, &out, NULL), 1, "%s", out);
    snprintf(cmd, sizeof cmd, "%s/qwen3_tied/docs/development_progress/progress.md", models);
    char *progress = tu_read(cmd, NULL);
    const char *fail = strstr(progress, "## Phase 0: FAIL"); /* (after the pass the folder holds, if any) */
    cr_assert(fail, "%s", progress);
    cr_expect(strstr(fail, "- Baseline: ran, logits not finite (") && strstr(fail, "are NaN or Inf") &&
                  !strstr(fail, "(id 0)") && !strstr(fail, "entropy"),
              "%s", progress);
    free(progress);
    free(out);
    free(toks);
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate2_fails_on_non_finite_logits_from_finite_weights_as_a_dtype_problem)
{
    char *work = tu_tmpdir();
    /* the largest finite bf16 in the final norm: every weight finite, the logits overflow */
    char *w = broken_copy(work, "qwen3_tied", "model.norm.weight", 0x7F7F, -1);
    free(expect_failure("qwen3_tied", w, "gate 2 baseline runnable   FAIL",
                        "a dtype problem in loading (every weight is finite)"));
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate2_fails_on_constant_logits_as_degenerate)
{
    char *work = tu_tmpdir();
    char *w = broken_copy(work, "qwen3_tied", "model.norm.weight", 0x0000, -1);
    free(expect_failure("qwen3_tied", w, "degenerate logits", "a dtype problem in loading, or a corrupt download"));
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate2_fails_when_the_top1_is_a_special_token)
{
    char *work = tu_tmpdir();
    /* lm_head row 2 (eos) made huge: the top-1 becomes the end-of-sequence token */
    char *w = broken_copy(work, "llama_untied", "lm_head.weight", 0x4300, 2);
    free(expect_failure("llama_untied", w, "a special token", "tokenizer mismatch"));
    free(w);
    tu_rmtree(work);
}

/* A tokenizer.json that is there and broken is named with what is wrong in it, not taken for a missing one */
Test(phase0, gate2_names_a_broken_tokenizer_json_and_what_is_wrong_in_it)
{
    char *work = tu_tmpdir(), path[4400], *out = NULL, *err = NULL;
    char *w = broken_copy(work, "llama_untied", NULL, 0, -1);
    snprintf(path, sizeof path, "%s/tokenizer.json", w);
    tu_write(path, "{\"model\": {", 11);
    cr_assert_eq(phase0("llama_untied", w, "--no-record", &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(out, "gate 2 baseline runnable   FAIL") && strstr(out, "tokenizer.json: ") &&
              strstr(out, "malformed JSON") && !strstr(out, "no tokenizer.json"), "%s", out);
    free(out), free(err);
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate3_fails_when_config_json_disagrees_and_the_blocker_is_recorded)
{
    char *work = tu_tmpdir(), models[4400], cmd[16384];
    char *w = broken_copy(work, "mistral_untied", NULL, 0, -1);
    snprintf(cmd, sizeof cmd, "sed -i 's/\"rope_theta\": 1000000.0/\"rope_theta\": 10000.0/' '%s/config.json'", w);
    cr_assert_eq(system(cmd), 0);
    /* a private copy of the model's living documents to record into */
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/mistral_untied' '%s/'", models, GM_GOLDEN_MODELS, models);
    cr_assert_eq(system(cmd), 0);
    /* a blocker of the user's own, with what a person writes around it: all of it must stay */
    static const char mine[] = "- NPU attention kernel lacks head_dim 16 support\n"
                               "  (tracked in JIRA-123; workaround: pad to 32)\n"
                               "  - sub-item: ask the kernel team\n"
                               "\n"
                               "See also the meeting notes of 2026-11-30.\n"
                               "* starred bullet blocker\n";
    snprintf(cmd, sizeof cmd, "%s/mistral_untied/TODO.md", models);
    char *text = tu_read(cmd, NULL), *at = strstr(text, "## Active blockers\n- none\n");
    cr_assert_not_null(at, "%s", text);
    char *edited = malloc(strlen(text) + sizeof mine);
    sprintf(edited, "%.*s## Active blockers\n%s%s", (int)(at - text), text, mine, at + strlen("## Active blockers\n- none\n"));
    tu_write(cmd, edited, strlen(edited));
    free(edited);
    free(text);
    char *toks = tg_tokens_arg("mistral_untied"), *out = NULL, extra[16384];
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    cr_assert_eq(phase0("mistral_untied", w, extra, &out, NULL), 1);
    cr_assert(strstr(out, "gate 3 config consistent   FAIL  rope_base (rope_theta) is 1000000, config.json says 10000"),
              "%s", out);
    cr_assert(strstr(out, "an extraction error"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s/mistral_untied/TODO.md", models);
    char *todo = tu_read(cmd, NULL);
    /* the blocker says what failed, as the report does, then why and what next */
    cr_assert(strstr(todo, "- [ ] Phase 0:") && strstr(todo, "- Phase 0 gate 3 (config consistent) fails: rope_base "
                                                             "(rope_theta) is 1000000, config.json says 10000 (likely "
                                                             "cause: an extraction error"), "%s", todo);
    snprintf(cmd, sizeof cmd, "%s/mistral_untied/docs/development_progress/progress.md", models);
    char *progress = tu_read(cmd, NULL);
    cr_assert(strstr(progress, "3 config consistent FAIL (rope_base (rope_theta) is 1000000, config.json says 10000)"),
              "%s", progress);
    free(progress);
    char want[1024];
    snprintf(want, sizeof want, "## Active blockers\n%s- Phase 0 gate 3", mine);
    cr_assert(strstr(todo, want), "the user's blocker text is not kept whole:\n%s", todo);
    free(todo);
    free(out);
    /* a pass on the right weights: Phase 0 ticked, our blocker gone, the user's text as it was, no "- none" */
    snprintf(cmd, sizeof cmd, "%s/golden/mistral_untied", GM_SHARED_DIR);
    cr_assert_eq(phase0("mistral_untied", cmd, extra, &out, NULL), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "%s/mistral_untied/TODO.md", models);
    todo = tu_read(cmd, NULL);
    snprintf(want, sizeof want, "## Active blockers\n%s\n## ", mine);
    cr_assert(strstr(todo, "- [x] Phase 0:") && strstr(todo, want) && !strstr(todo, "<!-- phase0 -->"), "%s", todo);
    free(todo);
    free(out);
    free(toks);
    free(w);
    tu_rmtree(work);
}

/*
** config.json with the value of top-level `key` (a scalar or a list of
** scalars) replaced by the JSON text `value`; every other byte kept.
*/
static void edit_config(const char *dir, const char *key, const char *value)
{
    char path[4400], quoted[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    char *text = tu_read(path, NULL);
    char *at = strstr(text, quoted);
    cr_assert_not_null(at, "%s has no %s", path, quoted);
    const char *begin = at + strlen(quoted), *end = begin;
    while (*end && *end != ',' && *end != '}' && *end != '[')
        end++;
    if (*end == '[') /* a list: through its ']' */
        end = strchr(end, ']') + 1;
    else /* a scalar: without the whitespace before the ',' or '}' */
        while (end > begin && (end[-1] == ' ' || end[-1] == '\n'))
            end--;
    const size_t head = (size_t)(begin - text), tail = strlen(end);
    char *edited = malloc(head + strlen(value) + tail + 2);
    sprintf(edited, "%.*s %s%s", (int)head, text, value, end);
    tu_write(path, edited, strlen(edited));
    free(edited);
    free(text);
}

/* One config.json key given another valid value, and what gate 3 must say about it. */
struct config_change {
    const char *key, *value, *says;
};

static const struct config_change config_changes[] = {
    {"torch_dtype", "\"float32\"", "dtype (torch_dtype) is bfloat16, config.json says float32"},
    {"rms_norm_eps", "1e-05", "rms_norm_eps is 1e-06, config.json says 1e-05"},
    {"bos_token_id", "0", "bos_token_id is 1, config.json says 0"},
    {"eos_token_id", "[2, 3]", "eos_token_ids (eos_token_id) is [2], config.json says [2, 3]"},
    {"max_position_embeddings", "8192", "max_position_embeddings is 4096, config.json says 8192"},
    {"architectures", "[\"LlamaForCausalLM\"]",
     "architecture (architectures[0]) is Qwen2ForCausalLM, config.json says LlamaForCausalLM"},
};
#define N_CONFIG_CHANGES (sizeof config_changes / sizeof config_changes[0])

/* Parameters are indices: pointers into this binary may not survive into the test process. */
ParameterizedTestParameters(phase0, gate3_names_the_field_that_config_json_changes)
{
    static size_t idx[N_CONFIG_CHANGES];
    for (size_t i = 0; i < N_CONFIG_CHANGES; i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, N_CONFIG_CHANGES);
}

ParameterizedTest(size_t *i, phase0, gate3_names_the_field_that_config_json_changes)
{
    const struct config_change *c = &config_changes[*i];
    char *work = tu_tmpdir(), *w = broken_copy(work, "qwen2_tied", NULL, 0, -1), want[512];
    edit_config(w, c->key, c->value);
    /* gate 3 fails naming the field; only it reads config.json, so the other two still pass */
    snprintf(want, sizeof want, "gate 3 config consistent   FAIL  %s\n", c->says);
    char *out = expect_failure("qwen2_tied", w, want, "an extraction error");
    cr_expect(strstr(out, "gate 1 weights loadable    PASS") && strstr(out, "gate 2 baseline runnable   PASS"), "%s",
              out);
    free(out);
    free(w);
    tu_rmtree(work);
}

Test(phase0, gate3_passes_on_an_unchanged_copy_and_after_an_edit_that_keeps_the_value)
{
    char *work = tu_tmpdir(), *w = broken_copy(work, "qwen2_tied", NULL, 0, -1);
    char *toks = tg_tokens_arg("qwen2_tied"), *out = NULL, extra[8192];
    snprintf(extra, sizeof extra, "%s --no-record", toks);
    for (int round = 0; round < 2; round++) {
        if (round == 1) /* the same values in other spellings */
            edit_config(w, "rms_norm_eps", "0.000001"), edit_config(w, "eos_token_id", "[2]");
        cr_assert_eq(phase0("qwen2_tied", w, extra, &out, NULL), 0, "%s", out);
        cr_assert(strstr(out, "gate 3 config consistent   PASS  every field of qwen2_tied_config_default() and the "
                              "architecture (Qwen2ForCausalLM) equal"), "%s", out);
        free(out);
    }
    free(toks);
    free(w);
    tu_rmtree(work);
}

Test(phase0, an_unknown_model_id_lists_the_built_in_ones)
{
    char *err = NULL;
    cr_assert_eq(phase0("nope", "/tmp", NULL, NULL, &err), 2);
    cr_assert(strstr(err, "no model 'nope' is built in") && strstr(err, "qwen3_tied"), "%s", err);
    free(err);
}

/* ---------------------------------------------------------------------- */
/* a model with a real tokenizer: the canonical prompt, and the top-5 as text */

Test(phase0, tokenizes_the_canonical_prompt_and_prints_the_top5_as_text)
{
    char cmd[8192], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' tiny_qwen --weights '%s' --no-record", GM_PHASE0_TINY, GM_TINY_DIR);
    int rc = tu_run(cmd, &out, &err);
    cr_assert_eq(rc, 0, "exit %d\n%s%s", rc, out, err);
    cr_assert(strstr(out, "prompt: \"The capital of France is\""), "%s", out);
    cr_assert(strstr(out, "tokens (5): 785 6722 315 9625 374"), "Qwen's ids for the prompt:\n%s", out);
    /* each top-5 line shows the token's text between the id and the logit */
    const char *line = strstr(out, "  1. ");
    cr_assert_not_null(line, "%s", out);
    const char *quote = strchr(line, '"'), *logit = strstr(line, "logit");
    cr_assert(quote && logit && quote < logit && strchr(quote + 1, '"') < logit, "no text for the top-1:\n%s", out);
    free(out);
    free(err);
}

Test(phase0, decode_reports_hf_greedy_tokens_and_tokens_per_second)
{
    char weights[4096], *toks = tg_tokens_arg("mistral_untied"), *out = NULL, extra[8192], path[4096];
    snprintf(weights, sizeof weights, "%s/golden/mistral_untied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --decode 16 --json --no-record --threads 2", toks);
    cr_assert_eq(phase0("mistral_untied", weights, extra, &out, NULL), 0, "%s", out);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    const cJSON *d = cJSON_GetObjectItem(j, "decode_tokens");
    cr_assert_eq(cJSON_GetArraySize(d), 16);
    cr_assert_gt(cJSON_GetObjectItem(j, "decode_tokens_per_second")->valuedouble, 0);
    gm_npy want;
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/golden/mistral_untied/golden/seq24/bf16_fp32acc/decode_tokens.npy", GM_SHARED_DIR);
    cr_assert_eq(gm_npy_read(path, &want, &st), 0, "%s", st.msg);
    for (int i = 0; i < 16; i++)
        cr_assert_eq((int32_t)cJSON_GetArrayItem(d, i)->valuedouble, ((int32_t *)want.data)[i], "token %d", i);
    gm_npy_free(&want);
    cJSON_Delete(j);
    free(out);
    free(toks);
}

/* Positions past max_position_embeddings (4096 in every golden) run, as in transformers, with a note that says so. */
Test(phase0, a_run_past_max_position_embeddings_passes_with_a_note_and_one_inside_without)
{
    char weights[4096], extra[16384], *out = NULL, *err = NULL;
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    const struct {
        int tokens, decode, note;
    } runs[] = {{4096, 0, 0}, {4097, 0, 1}, {4090, 7, 0}, {4090, 8, 1}}; /* the last decoded token does not run */
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        int n = runs[i].decode ? snprintf(extra, sizeof extra, "--no-record --decode %d --tokens 5", runs[i].decode)
                               : snprintf(extra, sizeof extra, "--no-record --tokens 5");
        for (int t = 1; t < runs[i].tokens; t++)
            n += snprintf(extra + n, sizeof extra - (size_t)n, ",5");
        cr_assert_eq(phase0("llama_untied", weights, extra, &out, &err), 0, "%s%s", out, err);
        cr_assert(strstr(out, "Phase 0: PASS"), "%s", out);
        char want[128];
        snprintf(want, sizeof want, "phase0: note: this run takes %d positions, past max_position_embeddings (4096)",
                 runs[i].tokens + (runs[i].decode ? runs[i].decode - 1 : 0));
        cr_assert_eq(strstr(err, want) != NULL, runs[i].note, "%d tokens, --decode %d:\n%s", runs[i].tokens,
                     runs[i].decode, err);
        free(out);
        free(err);
    }
}

Test(phase0, two_runs_recording_at_once_leave_each_file_whole_with_one_entry)
{
    const char *id = "qwen2_tied";
    char *work = tu_tmpdir(), models[4400], src[4400], cmd[20000], path[4500];
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(src, sizeof src, "%s/%s", GM_GOLDEN_MODELS, id);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s' '%s/' && echo 'a note of ours' >> '%s/%s/TODO.md' && "
             "echo 'a note of ours' >> '%s/%s/docs/development_progress/progress.md'",
             models, src, models, models, id, models, id);
    cr_assert_eq(system(cmd), 0);
    char *toks = tg_tokens_arg(id);
    for (int round = 0; round < 5; round++) {
        snprintf(cmd, sizeof cmd,
                 "(cd '%s' && for i in 1 2 3; do ( '%s' %s --weights '%s/golden/%s' %s --models '%s' > p$i.out 2>&1; "
                 "echo $? > p$i.rc ) & done; wait; cat p1.rc p2.rc p3.rc | tr -d '\\n')",
                 work, GM_PHASE0, id, GM_SHARED_DIR, id, toks, models);
        char *rcs = NULL;
        cr_assert_eq(tu_run(cmd, &rcs, NULL), 0);
        cr_assert_str_eq(rcs, "000", "round %d: exit statuses %s", round, rcs);
        free(rcs);
        snprintf(path, sizeof path, "%s/%s/docs/development_progress/progress.md", models, id);
        char *progress = tu_read(path, NULL);
        const char *first = strstr(progress, "## Phase 0: PASS");
        cr_assert(first && !strstr(first + 1, "## Phase 0:"), "round %d: one Phase 0 entry expected:\n%s", round,
                  progress);
        cr_assert(strstr(progress, "a note of ours"), "round %d: progress.md lost what was there:\n%s", round, progress);
        snprintf(path, sizeof path, "%s/%s/TODO.md", models, id);
        char *todo = tu_read(path, NULL);
        const char *tick = strstr(todo, "- [x] Phase 0:");
        cr_assert(tick && !strstr(tick + 14, "Phase 0:") && strstr(todo, "a note of ours"),
                  "round %d: TODO.md:\n%s", round, todo);
        free(todo);
        free(progress);
    }
    free(toks);
    tu_rmtree(work);
}

Test(phase0, records_and_scaffolds_of_one_model_at_once_serialize_and_leave_only_the_model)
{
    /* the record's lock is gen-model's: a scaffold never swaps in a copy of progress.md read before a record */
    const char *id = "qwen2_tied";
    char *work = tu_tmpdir(), models[4400], cmd[20000], path[4500];
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(cmd, sizeof cmd, "'%s' '%s/golden/%s' --out '%s' >/dev/null", GM_GEN_MODEL, GM_SHARED_DIR, id, models);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/%s/docs/development_progress/progress.md", models, id);
    char *fresh = tu_read(path, NULL);
    char *toks = tg_tokens_arg(id);
    for (int round = 0; round < 5; round++) {
        tu_write(path, fresh, strlen(fresh));
        snprintf(cmd, sizeof cmd,
                 "(cd '%s' || exit 1; ( '%s' %s --weights '%s/golden/%s' %s --models '%s' > p.out 2>&1; echo $? > p.rc ) & "
                 "for i in 1 2; do ( '%s' '%s/golden/%s' --out '%s' > g$i.out 2>&1; echo $? > g$i.rc ) & done; "
                 "wait; cat p.rc g1.rc g2.rc | tr -d '\\n')",
                 work, GM_PHASE0, id, GM_SHARED_DIR, id, toks, models, GM_GEN_MODEL, GM_SHARED_DIR, id, models);
        char *rcs = NULL;
        cr_assert_eq(tu_run(cmd, &rcs, NULL), 0);
        cr_assert_str_eq(rcs, "000", "round %d: exit statuses %s", round, rcs);
        free(rcs);
        char *progress = tu_read(path, NULL);
        const char *first = strstr(progress, "## Phase 0: PASS");
        cr_assert(first && !strstr(first + 1, "## Phase 0:"), "round %d: the record was lost or doubled:\n%s", round,
                  progress);
        free(progress);
        char *ls = NULL;
        snprintf(cmd, sizeof cmd, "ls -A '%s'", models);
        tu_run(cmd, &ls, NULL);
        cr_assert_str_eq(ls, "qwen2_tied\n", "round %d: %s holds more than the model", round, models);
        free(ls);
    }
    free(toks);
    free(fresh);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    cr_assert_eq(system(cmd), 0);
    tu_rmtree(work);
}

Test(phase0, version_and_a_bad_option_are_one_line_each)
{
    char cmd[4200], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' --version", GM_PHASE0);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_expect(strncmp(out, "phase0 ", 7) == 0 && strstr(out, "runtime ABI ") && strstr(out, "kernels ") &&
                  tu_lines(out) == 1, "%s", out);
    free(out);
    const char *bad[][3] = {{"--nope x", "unknown option '--nope'", "see phase0 --help"},
                            {"capture --zzz", "unknown option '--zzz'", "see phase0 capture --help"},
                            {"verify --html", "option '--html' needs a value", "see phase0 verify --help"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", GM_PHASE0, bad[i][0]);
        cr_expect_eq(tu_run(cmd, NULL, &err), 2, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]) && strstr(err, bad[i][2]) && tu_lines(err) == 1 && !strstr(err, "usage:"),
                  "%s: %s", bad[i][0], err);
        free(err);
    }
}

/*
** A thread count is read whole and bounded: "3abc" is not 3, and a typo of
** 99999999999 (which atoi wrapped to about 1.2e9) must not start threads
** until the system runs out of them. GM_THREADS, which the pool reads later,
** is held to the same rule up front; empty, it is unset.
*/
Test(phase0, a_thread_or_token_count_is_a_bounded_whole_number_or_one_line, .timeout = 60)
{
    char dir[4096], cmd[8400], *err = NULL;
    snprintf(dir, sizeof dir, "%s/golden/llama_untied", GM_SHARED_DIR);
    const char *bad[][2] = {{"--threads 99999999999",
                             "--threads: expected a whole number in [1, 512], found '99999999999'"},
                            {"--threads 3abc", "found '3abc'"},
                            {"--threads 0", "found '0'"},
                            {"--threads 513", "found '513'"},
                            {"--threads=-2", "found '-2'"},
                            {"--decode 5x", "--decode: expected a token count in [1, 4096], found '5x'"},
                            {"--decode 4097", "found '4097'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "--tokens 1,2 --no-record %s", bad[i][0]);
        cr_expect_eq(phase0("llama_untied", dir, cmd, NULL, &err), 2, "%s", bad[i][0]);
        cr_expect(strstr(err, bad[i][1]) && tu_lines(err) == 1, "%s: %s", bad[i][0], err);
        free(err);
    }
    const char *env[][2] = {{"GM_THREADS=abc", "GM_THREADS: expected a whole number in [1, 512], found 'abc'"},
                            {"GM_THREADS=100000", "found '100000'"},
                            /* a bound mistyped is not no bound: "2s" waited for ever on a held lock */
                            {"GM_LOCK_TIMEOUT=2s",
                             "GM_LOCK_TIMEOUT: expected a whole number of seconds in [0, 31536000], found '2s'"},
                            {"GM_LOCK_TIMEOUT=-1", "GM_LOCK_TIMEOUT: expected a whole number of seconds"}};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        for (int sub = 0; sub < 2; sub++) { /* the gates, and a subcommand */
            if (sub)
                snprintf(cmd, sizeof cmd, "%s '%s' verify a b", env[i][0], GM_PHASE0);
            else
                snprintf(cmd, sizeof cmd, "%s '%s' llama_untied --weights '%s' --tokens 1,2 --no-record", env[i][0],
                         GM_PHASE0, dir);
            cr_expect_eq(tu_run(cmd, NULL, &err), 2, "%s", cmd);
            cr_expect(strstr(err, env[i][1]) && tu_lines(err) == 1, "%s: %s", cmd, err);
            free(err);
        }
    snprintf(cmd, sizeof cmd, "GM_THREADS= '%s' llama_untied --weights '%s' --tokens 1,2 --no-record --threads 512",
             GM_PHASE0, dir);
    cr_expect_eq(tu_run(cmd, NULL, NULL), 0, "the most threads, and an empty GM_THREADS, run: %s", cmd);
}

Test(phase0, a_terminal_sees_the_prefill_progress_and_a_pipe_does_not)
{
    char weights[4096], cmd[16384], *toks = tg_tokens_arg("qwen3_tied"), *out = NULL, *err = NULL;
    snprintf(weights, sizeof weights, "%s/golden/qwen3_tied", GM_SHARED_DIR);
    snprintf(cmd, sizeof cmd, "script -qec \"'%s' qwen3_tied --weights '%s' %s --no-record\" /dev/null", GM_PHASE0,
             weights, toks);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s", out);
    cr_expect(strstr(out, "prefill: layer 1 of 2"), "no progress on a terminal:\n%s", out);
    free(out);
    char extra[8192];
    snprintf(extra, sizeof extra, "%s --no-record", toks);
    cr_assert_eq(phase0("qwen3_tied", weights, extra, &out, &err), 0);
    cr_expect(!strchr(err, '\r') && !strstr(err, "prefill: layer"), "progress on a pipe: %s", err);
    free(out);
    free(err);
    free(toks);
}

/*
** A --weights path that is no folder is a usage error, not a gate failure: nothing runs and a recorded
** pass stays recorded. Where the verdict would go is checked before the gates too: a --models folder
** without the model's documents (an installed phase0's default, on another machine) is one line, exit 2.
*/
Test(phase0, a_mistyped_weights_path_or_a_models_folder_without_the_model_is_one_line_before_any_gate)
{
    char *work = tu_tmpdir(), models[4400], cmd[16384], weights[4400], todo[4500], *out = NULL, *err = NULL;
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/llama_untied' '%s/'", models, GM_GOLDEN_MODELS, models);
    cr_assert_eq(system(cmd), 0);
    char *toks = tg_tokens_arg("llama_untied"), extra[16384];
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    cr_assert_eq(phase0("llama_untied", weights, extra, &out, NULL), 0, "%s", out);
    free(out);
    snprintf(todo, sizeof todo, "%s/llama_untied/TODO.md", models);
    char *before = tu_read(todo, NULL);
    cr_assert(strstr(before, "- [x] Phase 0:"), "%s", before);
    /* the typo: one line, exit 2, no gate, the pass still recorded */
    snprintf(weights, sizeof weights, "%s/golden/llama_untiedd", GM_SHARED_DIR);
    cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "--weights ") && strstr(err, "llama_untiedd: expected a model folder, found none") &&
              tu_lines(err) == 1 && !strstr(out, "gate"), "%s%s", out, err);
    char *after = tu_read(todo, NULL);
    cr_expect_str_eq(after, before, "TODO.md changed");
    free(out), free(err), free(after);
    /* two prompts, or ids the model has no row for: usage errors too, and nothing recorded */
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    const char *const typos[][2] = {{"--prompt 'Hello'", "--prompt and --tokens each choose the prompt"},
                                    {"--instruct", "--instruct and --tokens each choose the prompt"},
                                    /* positions from 0, as the runner's (capture's) and verify's messages */
                                    {"--tokens 5,6,100000", "found 100000 at position 2\n"},
                                    {"--tokens 384,5", "found 384 at position 0\n"},
                                    /* a prompt that is not text: the typo is the user's, not the tokenizer's */
                                    {"--prompt \"$(printf 'ab\\377cd')\"",
                                     "--prompt: expected UTF-8 text, found byte 0xff at offset 2"}};
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        snprintf(extra, sizeof extra, "%s %s --models '%s'", i < 2 ? toks : "", typos[i][0], models);
        cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s: %s%s", typos[i][0], out, err);
        cr_expect(strstr(err, typos[i][1]) && tu_lines(err) == 1 && !strstr(out, "gate"), "%s: %s%s", typos[i][0],
                  out, err);
        free(out), free(err);
        after = tu_read(todo, NULL);
        cr_expect_str_eq(after, before, "%s: TODO.md changed", typos[i][0]);
        free(after);
    }
    /* a file where the folder belongs: said as such */
    snprintf(weights, sizeof weights, "%s/golden/llama_untied/config.json", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "config.json: expected a model folder, found a file") && tu_lines(err) == 1, "%s", err);
    free(out), free(err), free(before);
    /* a --models folder that does not hold the model: said before the gates, not after them */
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, work);
    cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 2, "%s%s", out, err);
    cr_expect(strstr(err, "/llama_untied/TODO.md: cannot record the verdict there") && strstr(err, "--no-record") &&
              tu_lines(err) == 1 && !strstr(out, "gate"), "%s%s", out, err);
    free(out), free(err);
    /* a folder without the weights: gate 1 fails and is recorded; the baseline, never run, shows no numbers */
    snprintf(weights, sizeof weights, "%s/empty", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", weights);
    cr_assert_eq(system(cmd), 0);
    /* with --dump: report.json says what failed; an earlier run's arrays there are not left to mislead */
    char dump[4500], file[4600];
    snprintf(dump, sizeof dump, "%s/dump", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo stale > '%s/logits.npy'", dump, dump);
    cr_assert_eq(system(cmd), 0);
    snprintf(extra, sizeof extra, "%s --models '%s' --dump '%s'", toks, models, dump);
    cr_expect_eq(phase0("llama_untied", weights, extra, &out, &err), 1, "%s%s", out, err);
    free(out), free(err);
    snprintf(file, sizeof file, "%s/report.json", dump);
    char *text = tu_read(file, NULL);
    cJSON *report = text ? cJSON_Parse(text) : NULL;
    free(text);
    cr_expect(report && cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(report, "gates"), 0),
                                                          "pass")), "report.json: %s", file);
    cJSON_Delete(report);
    snprintf(file, sizeof file, "%s/logits.npy", dump);
    cr_expect(!tu_exists(file), "%s is an earlier run's", file);
    snprintf(cmd, sizeof cmd, "%s/llama_untied/docs/development_progress/progress.md", models);
    char *progress = tu_read(cmd, NULL);
    cr_expect(strstr(progress, "## Phase 0: FAIL") && strstr(progress, "- Baseline: not run: the weights did not load\n") &&
              !strstr(progress, "top-1 \"\" (id 0)"), "%s", progress);
    free(progress);
    free(toks);
    tu_rmtree(work);
}

/* the number of times needle occurs in s */
static int occurrences(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/*
** A failing run after a pass (Phase 0's "recording a pass"): the recorded
** PASS entry stays as it was, the FAIL entry after it; a second failure
** replaces only the first; the next pass replaces both.
*/
Test(phase0, a_failure_after_a_pass_keeps_the_recorded_pass, .timeout = 120)
{
    char *work = tu_tmpdir(), models[4400], cmd[16384], good[4400], empty[4400], path[4500], *out = NULL, *err = NULL;
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(empty, sizeof empty, "%s/empty", work); /* no weights: gate 1 fails */
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' '%s' && cp -r '%s/llama_untied' '%s/'", models, empty, GM_GOLDEN_MODELS,
             models);
    cr_assert_eq(system(cmd), 0);
    snprintf(good, sizeof good, "%s/golden/llama_untied", GM_SHARED_DIR);
    snprintf(path, sizeof path, "%s/llama_untied/docs/development_progress/progress.md", models);
    char *toks = tg_tokens_arg("llama_untied"), extra[16384], *pass = NULL;
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    const struct { const char *weights; int rc, passes, fails; } runs[] = {
        {good, 0, 1, 0}, {empty, 1, 1, 1}, {empty, 1, 1, 1}, {good, 0, 1, 0}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cr_assert_eq(phase0("llama_untied", runs[i].weights, extra, &out, &err), runs[i].rc, "run %zu: %s%s", i, out,
                     err);
        free(out), free(err);
        char *progress = tu_read(path, NULL);
        const char *p = strstr(progress, "## Phase 0: PASS"), *f = strstr(progress, "## Phase 0: FAIL");
        cr_assert(occurrences(progress, "## Phase 0: PASS") == runs[i].passes &&
                      occurrences(progress, "## Phase 0: FAIL") == runs[i].fails &&
                      occurrences(progress, "<!-- phase0:begin -->") == 1 && (!f || (p && p < f)),
                  "run %zu: expected %d PASS and then %d FAIL entries:\n%s", i, runs[i].passes, runs[i].fails,
                  progress);
        if (i == 0) /* the entry as the pass wrote it, to its last line */
            pass = strndup(p, (size_t)(strstr(p, "<!-- phase0:end -->") - p));
        else if (runs[i].fails)
            cr_assert(strstr(progress, pass) && strstr(progress, "- Baseline: not run: the weights did not load\n"),
                      "run %zu: the pass is not as it was recorded:\n%s\nin\n%s", i, pass, progress);
        free(progress);
    }
    free(pass);
    free(toks);
    tu_rmtree(work);
}

Test(phase0, a_path_or_prompt_that_holds_lines_or_marks_is_recorded_on_its_line)
{
    /* a folder whose name holds a newline, backticks and progress.md's own end mark */
    char *work = tu_tmpdir(), models[4400], cmd[16384], weights[4400], path[4500], *out = NULL, *err = NULL;
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(weights, sizeof weights, "%s/w`x\n- [x] Phase 1: injected\n<!-- phase0:end -->\n", work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/llama_untied' '%s/' && ln -s '%s/golden/llama_untied' '%s'",
             models, GM_GOLDEN_MODELS, models, GM_SHARED_DIR, weights);
    cr_assert_eq(system(cmd), 0);
    char *toks = tg_tokens_arg("llama_untied"), extra[16384];
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    cr_assert_eq(phase0("llama_untied", weights, extra, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    snprintf(path, sizeof path, "%s/llama_untied/docs/development_progress/progress.md", models);
    char *progress = tu_read(path, NULL);
    cr_expect(occurrences(progress, "<!-- phase0:begin -->") == 1 && occurrences(progress, "<!-- phase0:end -->") == 1 &&
              !strstr(progress, "\n- [x] Phase 1") && strstr(progress, "weights from `` ") &&
              strstr(progress, "w`x\\n- [x] Phase 1: injected\\n<\\!-- phase0:end -->\\n ``\n"), "%s", progress);
    free(progress);
    /* the next run, from a plain path, replaces that entry whole */
    snprintf(weights, sizeof weights, "%s/golden/llama_untied", GM_SHARED_DIR);
    snprintf(extra, sizeof extra, "%s --models '%s'", toks, models);
    cr_assert_eq(phase0("llama_untied", weights, extra, &out, &err), 0, "%s%s", out, err);
    free(out), free(err);
    progress = tu_read(path, NULL);
    cr_expect(occurrences(progress, "<!-- phase0:begin -->") == 1 && occurrences(progress, "<!-- phase0:end -->") == 1 &&
              !strstr(progress, "injected"), "a second run left the first's lines: %s", progress);
    /* without a tokenizer the top-1 is its id, not an empty text */
    cr_expect(strstr(progress, " tokens; top-1 id ") && !strstr(progress, "top-1 \"\""), "%s", progress);
    free(progress);
    free(toks);
    tu_rmtree(work);
}

/*
** Text cut to fit a report or a record (a long prompt, a long token's text) ends where a character ends, so that
** the report, the JSON and progress.md stay UTF-8: a prompt of 1500 'é' had been cut inside its 1022nd.
*/
Test(phase0, text_cut_to_fit_ends_where_a_character_ends)
{
    char out[64], big[2048], md[2048];
    cr_expect_str_eq(p0_cut(out, 6, "abcd\xc3\xa9" "f"), "abcd"); /* 'é' would not fit whole */
    cr_expect_str_eq(p0_cut(out, 7, "abcd\xc3\xa9" "f"), "abcd\xc3\xa9");
    cr_expect_str_eq(p0_cut(out, 5, "ab\xf0\x9f\x98\x80"), "ab"); /* a 4-byte emoji */
    cr_expect_str_eq(p0_cut(out, sizeof out, "short"), "short");
    char prompt[3001] = "";
    for (int i = 0; i < 1500; i++)
        memcpy(prompt + 2 * i, "\xc3\xa9", 2);
    for (size_t size = 2040; size <= sizeof big; size++) {
        const char *shown = p0_shown(prompt, big, size), *in_md = p0_md(prompt, 1, md, size);
        cr_assert(gm_utf8_check(shown, strlen(shown)) == strlen(shown), "p0_shown at %zu bytes: cut inside a character",
                  size);
        cr_assert(gm_utf8_check(in_md, strlen(in_md)) == strlen(in_md), "p0_md at %zu bytes: cut inside a character",
                  size);
        cr_assert(strlen(shown) >= size - 8, "p0_shown at %zu bytes kept only %zu", size, strlen(shown));
    }
}

/* ---------------------------------------------------------------------- */
/* TODO.md's marks, on files a person has edited (p0_record_todo directly) */

/* text as TODO.md in a fresh folder, the runs recorded in turn (blocker NULL: a pass); what the file then holds */
static char *todo_after(const char *text, const char *const *runs, int n_runs)
{
    char *dir = tu_tmpdir(), path[4400];
    snprintf(path, sizeof path, "%s/TODO.md", dir);
    tu_write(path, text, strlen(text));
    for (int i = 0; i < n_runs; i++) {
        gm_status st = {0};
        cr_assert_eq(p0_record_todo(dir, runs[i] == NULL, runs[i], &st), 0, "%s", st.msg);
    }
    char *got = tu_read(path, NULL);
    tu_rmtree(dir); /* and frees it */
    return got;
}

Test(record, todo_marks_keep_what_a_person_wrote_whatever_the_file_looks_like)
{
    static const char *const fail_pass_fail[] = {"B1", NULL, "B2"}, *const fail[] = {"B1"}, *const pass[] = {NULL};
    static const struct { const char *name, *text; const char *const *runs; int n; const char *want; } cases[] = {
        {"the heading is the last line, with no newline", "- [ ] Phase 0: x\n## Active blockers", fail_pass_fail, 3,
         "- [ ] Phase 0: x\n## Active blockers\n- B2 <!-- phase0 -->\n"},
        {"CRLF line ends stay CRLF", "- [ ] Phase 0: x\r\n\r\n## Active blockers\r\n- none\r\n\r\n## Next\r\n", fail, 1,
         "- [ ] Phase 0: x\r\n\r\n## Active blockers\r\n- B1 <!-- phase0 -->\r\n\r\n## Next\r\n"},
        {"no section: a failure adds one", "- [ ] Phase 0: x\n", fail, 1,
         "- [ ] Phase 0: x\n\n## Active blockers\n- B1 <!-- phase0 -->\n"},
        {"no section: a pass adds nothing", "- [ ] Phase 0: x\n", pass, 1, "- [x] Phase 0: x\n"},
        {"a note indented under phase0's blocker goes with it",
         "## Active blockers\n- mine\n- B0 <!-- phase0 -->\n  (a note on it)\n- other\n\n## Next\n", pass, 1,
         "## Active blockers\n- mine\n- other\n\n## Next\n"},
        {"an empty section gets the placeholder", "## Active blockers\n\n## Next\n", pass, 1,
         "## Active blockers\n- none\n\n## Next\n"},
        {"the box stays where it stands", "## Active blockers\n- [ ] Phase 0: x\n- mine\n", fail, 1,
         "## Active blockers\n- [ ] Phase 0: x\n- mine\n- B1 <!-- phase0 -->\n"},
        {"\"- none of these\" is a blocker, not the placeholder", "## Active blockers\n- none of these work\n", pass,
         1, "## Active blockers\n- none of these work\n"},
        {"a box ticked as [X] is unticked by a failure", "- [X] Phase 0: x\n", fail, 1,
         "- [ ] Phase 0: x\n\n## Active blockers\n- B1 <!-- phase0 -->\n"},
        {"a note indented under phase0's blocker follows the next failure's",
         "## Active blockers\n- B0 <!-- phase0 -->\n  (a note on it)\n- other\n", fail, 1,
         "## Active blockers\n- other\n- B1 <!-- phase0 -->\n  (a note on it)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = todo_after(cases[i].text, cases[i].runs, cases[i].n);
        cr_expect_str_eq(got, cases[i].want, "%s", cases[i].name);
        free(got);
    }
}

/* progress.md's entry: its markers only as whole lines; a linked file written where the link leads, modes kept */
Test(record, the_entry_replaces_its_own_lines_only_and_a_link_or_a_mode_stays_the_users)
{
    char *dir = tu_tmpdir(), docs[4400], path[4500], target[4500], cmd[9500];
    snprintf(docs, sizeof docs, "%s/docs/development_progress", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", docs);
    cr_assert_eq(tu_run(cmd, NULL, NULL), 0);
    snprintf(path, sizeof path, "%s/progress.md", docs);
    static const char quoted[] = "Note: phase0 owns `<!-- phase0:begin -->` .. `<!-- phase0:end -->`.\n";
    char text[1024];
    snprintf(text, sizeof text, "# Progress\n%s\n<!-- phase0:begin -->\nold entry\n<!-- phase0:end -->\nafter\n", quoted);
    tu_write(path, text, strlen(text));
    cr_assert_eq(chmod(path, 0600), 0);
    gm_status st = {0};
    cr_assert_eq(p0_record_progress(dir, "new entry\n", &st), 0, "%s", st.msg);
    char *got = tu_read(path, NULL), want[1024];
    snprintf(want, sizeof want, "# Progress\n%s\n<!-- phase0:begin -->\nnew entry\n<!-- phase0:end -->\nafter\n", quoted);
    cr_expect_str_eq(got, want);
    free(got);
    struct stat sb;
    cr_expect(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "mode %o", (unsigned)(sb.st_mode & 0777));
    /* a file with CRLF line ends gets its entry with CRLF line ends */
    static const char crlf[] = "# Progress\r\nmine\r\n";
    tu_write(path, crlf, strlen(crlf));
    cr_assert_eq(p0_record_progress(dir, "a\nb\n", &st), 0, "%s", st.msg);
    got = tu_read(path, NULL);
    cr_expect_str_eq(got, "# Progress\r\nmine\r\n\r\n<!-- phase0:begin -->\r\na\r\nb\r\n<!-- phase0:end -->\r\n");
    free(got);
    /* TODO.md a link to a file elsewhere: the file is marked, the link stays a link */
    snprintf(target, sizeof target, "%s/shared-todo.md", dir);
    tu_write(target, "- [ ] Phase 0: x\n", 17);
    snprintf(path, sizeof path, "%s/TODO.md", dir);
    cr_assert_eq(symlink(target, path), 0);
    cr_assert_eq(p0_record_todo(dir, 1, NULL, &st), 0, "%s", st.msg);
    cr_expect(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode), "TODO.md is no longer a link");
    got = tu_read(target, NULL);
    cr_expect_str_eq(got, "- [x] Phase 0: x\n");
    free(got);
    tu_rmtree(dir);
}

/*
** gen-model regen and gen-model preview as a reviewer and CI meet them: the checked-in models
** copied into a scratch folder, the templates copied and edited there, the commands run and their
** exit status, their lines and what they write (or do not) checked.
*/
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define HUB GM_SHARED_DIR "/hub"

static char *work;
static char models[4200], tmpl[4200];

static void setup(void)
{
    work = tu_tmpdir();
    snprintf(models, sizeof models, "%s/models", work);
    snprintf(tmpl, sizeof tmpl, "%s/templates", work);
}

static void teardown(void)
{
    tu_rm_rf(work);
    free(work);
}

TestSuite(review, .init = setup, .fini = teardown, .timeout = 120);

/* gen-model with the arguments fmt makes; the exit status, stdout and stderr. */
static int gm(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int gm(char **out, char **err, const char *fmt, ...)
{
    char args[12000], cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s", GM_GEN_MODEL, args);
    return tu_run(cmd, out, err);
}

/* gen-model run in folder dir, with the arguments fmt makes. */
static int gm_in(const char *dir, char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int gm_in(const char *dir, char **out, char **err, const char *fmt, ...)
{
    char args[12000], cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", dir, GM_GEN_MODEL, args);
    return tu_run(cmd, out, err);
}

/* The same with TMPDIR where no folder can be made. */
static int gm_no_tmp(char **out, char **err, const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "TMPDIR=/nonexistent/tmp '%s' %s", GM_GEN_MODEL, args);
    return tu_run(cmd, out, err);
}

/* The checked-in models/ as a scratch copy. */
static void copy_models(void)
{
    tu_copy_dir(GM_SOURCE_DIR "/models", models);
}

/* A copy of templates/ whose weights.h.tmpl says one more line for a family with q_norm/k_norm. */
static void edit_templates(void)
{
    char path[4400];
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    snprintf(path, sizeof path, "%s/weights.h.tmpl", tmpl);
    char *text = tu_read(path, NULL);
    const char *at = "#define ${m.ID}_N_LAYERS ${m.cfg.n_layers}\n";
    char *p = strstr(text, at);
    cr_assert_not_null(p, "weights.h.tmpl has no N_LAYERS line");
    p += strlen(at);
    size_t n = strlen(text) + 200;
    char *edited = malloc(n);
    snprintf(edited, n, "%.*s@if m.cfg.qk_norm then\n/* q_norm and k_norm: per-head RMSNorms */\n@end\n%s",
             (int)(p - text), text, p);
    tu_write(path, edited, strlen(edited));
    free(edited);
    free(text);
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static const char *const ids[] = {"llama_3_2_1b", "meta_llama_3_8b", "mistral_7b_v0_3",
                                  "qwen2_0_5b",   "qwen2_1_5b",      "qwen3_0_6b"};

/* ---------------------------------------------------------------------- */
/* regen */

Test(review, regen_on_a_fresh_tree_changes_nothing)
{
    char *out = NULL, *err = NULL;
    copy_models();
    char *before = tu_tree_hash(models);
    cr_assert_eq(gm(&out, &err, "regen --models '%s'", models), 0, "%s%s", out, err);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char line[4400];
        snprintf(line, sizeof line, "%s/%s: unchanged\n", models, ids[i]);
        cr_expect(strstr(out, line), "no '%s' in:\n%s", line, out);
    }
    cr_expect(strstr(out, "6 models under"), "%s", out);
    cr_expect_str_eq(err, "");
    char *after = tu_tree_hash(models);
    cr_expect_str_eq(before, after, "regen of a fresh tree wrote something");
    free(out);
    free(err);
    /* --check too: no diff, exit 0 */
    cr_assert_eq(gm(&out, &err, "regen --check --models '%s'", models), 0, "%s%s", out, err);
    cr_expect_null(strstr(out, "---"), "%s", out);
    free(out);
    free(err);
    free(before);
    free(after);
}

Test(review, an_edited_template_fails_check_with_the_diff_and_regen_then_fixes_it)
{
    char *out = NULL, *err = NULL, path[4400];
    copy_models();
    edit_templates();
    /* phase0's record in a living document stays as it is */
    snprintf(path, sizeof path, "%s/qwen3_0_6b/TODO.md", models);
    tu_write(path, "recorded by phase0\n", 19);
    char *before = tu_tree_hash(models);

    cr_assert_eq(gm_in(work, &out, &err, "regen --check --models '%s' --templates '%s'", models, tmpl), 1, "%s%s", out,
                 err);
    char *after = tu_tree_hash(models);
    cr_expect_str_eq(before, after, "regen --check wrote something");
    /* the unified diff of exactly the one file of the one model the edit touches, named from where gen-model ran */
    char want[8800];
    snprintf(want, sizeof want, "--- a/models/qwen3_0_6b/qwen3_0_6b_weights.h\n+++ b/models/qwen3_0_6b/qwen3_0_6b_weights.h\n");
    cr_expect(strstr(out, want), "no '%s' in:\n%s", want, out);
    cr_expect(strstr(out, "\n+/* q_norm and k_norm: per-head RMSNorms */\n"), "%s", out);
    cr_expect_eq(count(out, "\n--- "), 1, "%s", out); /* the diff's first line starts the output */
    cr_expect_eq(count(out, ": unchanged\n"), 5, "%s", out);
    snprintf(want, sizeof want, "%s/qwen3_0_6b: would change qwen3_0_6b_weights.h\n", models);
    cr_expect(strstr(out, want), "%s", out);
    cr_expect_eq(tu_lines(err), 1, "%s", err);
    snprintf(want, sizeof want, "1 of 6 models would change; to fix run: gen-model regen --models %s --templates %s "
             "qwen3_0_6b\n", models, tmpl);
    cr_expect(strstr(err, want), "no '%s' in: %s", want, err);
    free(out);
    free(err);

    /* regen fixes it: only that file, the living document kept */
    cr_assert_eq(gm(&out, &err, "regen --models '%s' --templates '%s'", models, tmpl), 0, "%s%s", out, err);
    snprintf(want, sizeof want, "%s/qwen3_0_6b: rewrote qwen3_0_6b_weights.h\n", models);
    cr_expect(strstr(out, want), "%s", out);
    cr_expect_eq(count(out, ": unchanged\n"), 5, "%s", out);
    free(out);
    free(err);
    char *todo = tu_read(path, NULL);
    cr_expect_str_eq(todo, "recorded by phase0\n");
    free(todo);
    snprintf(path, sizeof path, "%s/qwen3_0_6b/qwen3_0_6b_weights.h", models);
    char *h = tu_read(path, NULL);
    cr_expect(strstr(h, "/* q_norm and k_norm: per-head RMSNorms */"));
    free(h);
    cr_assert_eq(gm(&out, &err, "regen --check --models '%s' --templates '%s'", models, tmpl), 0, "%s%s", out, err);
    free(out);
    free(err);
    /* against the built-in templates that model is now the stale one, and the others are not */
    cr_assert_eq(gm(&out, &err, "regen --check --models '%s'", models), 1, "%s%s", out, err);
    cr_expect_eq(count(out, ": unchanged\n"), 5, "%s", out);
    cr_expect(strstr(out, "\n-/* q_norm and k_norm: per-head RMSNorms */\n"), "%s", out);
    free(out);
    free(err);
    free(before);
    free(after);
}

/* A diff that cannot be shown (no temporary folder) is an error that says so, not a change listed without its diff. */
Test(review, a_diff_that_cannot_be_made_is_one_line_and_exit_4)
{
    char *out = NULL, *err = NULL;
    copy_models();
    edit_templates();
    const char *const runs[] = {"regen --check --models '%s' --templates '%s'",
                                "preview --templates '%2$s' '%1$s/qwen3_0_6b'"};
    for (size_t i = 0; i < 2; i++) {
        char args[9000];
        snprintf(args, sizeof args, runs[i], models, tmpl);
        const int rc = gm_no_tmp(&out, &err, args);
        cr_expect_eq(rc, 4, "%s: exit %d\n%s%s", runs[i], rc, out, err);
        cr_expect(strstr(out, "cannot create a temporary folder for the diff (TMPDIR)") ||
                  strstr(err, "cannot create a temporary folder for the diff (TMPDIR)"), "%s:\n%s%s", runs[i], out, err);
        free(out), free(err);
    }
}

/* A generated file replaced by a link (to a copy of itself): the user's, to regen and to regen --check alike. */
Test(review, a_link_where_a_generated_file_belongs_is_refused_by_regen_and_check_alike)
{
    char *out = NULL, *err = NULL, cmd[9000];
    copy_models();
    snprintf(cmd, sizeof cmd, "cd '%s/qwen3_0_6b' && cp qwen3_0_6b_cpu_helpers.h ../helpers.h && rm qwen3_0_6b_cpu_helpers.h "
             "&& ln -s ../helpers.h qwen3_0_6b_cpu_helpers.h", models);
    cr_assert_eq(system(cmd), 0);
    for (int check = 1; check >= 0; check--) {
        const int rc = gm(&out, &err, "regen %s--models '%s' qwen3_0_6b", check ? "--check " : "", models);
        cr_expect_eq(rc, 2, "check %d: exit %d\n%s%s", check, rc, out, err);
        cr_expect(strstr(err, "qwen3_0_6b_cpu_helpers.h: yours (a symbolic link, not a file gen-model wrote), and "
                              "gen-model now writes qwen3_0_6b_cpu_helpers.h there"), "check %d: %s%s", check, out, err);
        free(out), free(err);
    }
}

/* A model folder that is a link: refused (the swap would replace the link and leave what it points to stale). */
Test(review, a_model_folder_that_is_a_link_is_refused_and_left_as_it_is)
{
    char *out = NULL, *err = NULL, cmd[9000];
    copy_models();
    snprintf(cmd, sizeof cmd, "cd '%s' && mv qwen3_0_6b ../store_qwen3 && ln -s ../store_qwen3 qwen3_0_6b && "
             "echo '// hand' >> ../store_qwen3/qwen3_0_6b_weights.c", models);
    cr_assert_eq(system(cmd), 0);
    const int rc = gm(&out, &err, "regen --models '%s' qwen3_0_6b", models);
    cr_expect_eq(rc, 2, "exit %d\n%s%s", rc, out, err);
    cr_expect(strstr(err, "/qwen3_0_6b: a symbolic link (to ../store_qwen3); the model folder is swapped whole") &&
              tu_lines(err) == 1, "%s", err);
    snprintf(cmd, sizeof cmd, "test -L '%s/qwen3_0_6b' && tail -1 '%s/qwen3_0_6b/qwen3_0_6b_weights.c' | grep -qx '// hand'",
             models, models);
    cr_expect_eq(system(cmd), 0, "the link or what it points to changed");
    free(out), free(err);
}

Test(review, regen_names_files_that_are_new_or_no_longer_generated)
{
    char *out = NULL, *err = NULL, path[4400];
    copy_models();
    /* a source an older template made, which nothing generates any more */
    static const char stray[] = "// Code generated by gen-model from templates/stray.c.tmpl; DO NOT EDIT.\n";
    snprintf(path, sizeof path, "%s/qwen2_0_5b/stray.c", models);
    tu_write(path, stray, strlen(stray));
    /* and the user's own work beside the generated files: neither a change nor removed */
    char mine[4400], cmd[9000];
    snprintf(mine, sizeof mine, "%s/qwen2_0_5b/npu/attn.cc", models);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/qwen2_0_5b/npu' && echo mine > '%s' && echo notes > '%s/qwen2_0_5b/docs/notes.md'",
             models, mine, models);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/qwen2_0_5b/docs/development_progress/progress.md", models);
    cr_assert_eq(remove(path), 0);
    cr_assert_eq(gm(&out, &err, "regen --check --models '%s' qwen2_0_5b", models), 1, "%s%s", out, err);
    cr_expect(strstr(out, "+++ /dev/null\n@@ -1 +0,0 @@\n-// Code generated by gen-model from templates/stray.c.tmpl"),
              "%s", out);
    cr_expect(!strstr(out, "attn.cc") && !strstr(out, "notes.md"), "the user's files are not changes: %s", out);
    cr_expect(strstr(out, "--- /dev/null\n"), "%s", out);
    cr_expect(strstr(out, "qwen2_0_5b: would change docs/development_progress/progress.md (new), stray.c (removed)\n"),
              "%s", out);
    cr_expect_null(strstr(out, "llama"), "only the model named is looked at: %s", out);
    free(out);
    free(err);
    cr_assert_eq(gm(&out, &err, "regen --models '%s' qwen2_0_5b", models), 0, "%s%s", out, err);
    cr_expect(strstr(out, "rewrote docs/development_progress/progress.md (new), stray.c (removed)"), "%s", out);
    cr_expect(tu_exists(path), "progress.md is not written again");
    snprintf(path, sizeof path, "%s/qwen2_0_5b/stray.c", models);
    cr_expect(!tu_exists(path), "stray.c is still there");
    char *kept = tu_read(mine, NULL);
    cr_expect(kept && strcmp(kept, "mine\n") == 0, "%s: the user's file is gone", mine);
    cr_expect(strstr(out, "gen-model: kept ") && strstr(out, "/qwen2_0_5b/npu (not written by gen-model)") &&
              strstr(out, "/qwen2_0_5b/docs/notes.md (not written by gen-model)"), "%s", out);
    free(kept);
    free(out);
    free(err);
}

Test(review, regen_bad_input_is_one_line_and_the_other_models_go_on)
{
    char *out = NULL, *err = NULL, path[4400];
    copy_models();
    snprintf(path, sizeof path, "%s/qwen2_1_5b/snapshot/config.json", models);
    char *cfg = tu_read(path, NULL), *at = strstr(cfg, "\"hidden_size\": 1536");
    cr_assert_not_null(at);
    at += strlen("\"hidden_size\": 1536");
    size_t n = strlen(cfg) + 8;
    char *edited = malloc(n);
    snprintf(edited, n, "%.*s.0%s", (int)(at - cfg), cfg, at);
    tu_write(path, edited, strlen(edited));
    free(edited);
    free(cfg);
    char *before = tu_tree_hash(models);
    cr_assert_eq(gm(&out, &err, "regen --models '%s'", models), 1, "%s%s", out, err);
    cr_expect_eq(tu_lines(err), 1, "%s", err);
    char line[8192];
    snprintf(line, sizeof line, "gen-model: %s/qwen2_1_5b/snapshot/config.json: hidden_size must be an integer, "
             "found 1536.0\n", models);
    cr_expect_str_eq(err, line);
    cr_expect_eq(count(out, ": unchanged\n"), 5, "%s", out);
    char *after = tu_tree_hash(models);
    cr_expect_str_eq(before, after);
    free(before);
    free(after);
    free(out);
    free(err);
    /* a source.json that is not JSON is said to be so, not to lack its repo */
    snprintf(path, sizeof path, "%s/qwen2_0_5b/snapshot/source.json", models);
    tu_write(path, "{bad", 4);
    cr_assert_eq(gm(&out, &err, "regen --models '%s' qwen2_0_5b", models), 1, "%s%s", out, err);
    cr_expect(strstr(err, "/qwen2_0_5b/snapshot/source.json: expected a JSON object {\"repo\": ..., \"commit\": ...}, "
                     "found text that is not JSON") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);

    /* usage: an unknown id, a missing folder, templates that are not a template set */
    const char *cases[][3] = {
        {"regen --models '%s' no_such_model", "no_such_model: expected the id of a model folder with a snapshot/", "2"},
        {"regen --models '%s/nowhere'", "--models", "2"},
        {"regen --models '%s' --templates /nonexistent", "--templates: /nonexistent/", "2"},
        {"regen --models '%s' --bogus", "unknown option '--bogus'", "2"},
        /* a path to a model folder elsewhere: not checked in --models' stead */
        {"regen --check --models '%s' /tmp/qwen2_0_5b", "/tmp/qwen2_0_5b: not under --models ", "2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8800];
        snprintf(args, sizeof args, cases[i][0], models);
        int rc = gm(&out, &err, "%s", args);
        cr_expect_eq(rc, atoi(cases[i][2]), "%s: exit %d: %s", args, rc, err);
        cr_expect_eq(tu_lines(err), 1, "%s: %s", args, err);
        cr_expect(strstr(err, cases[i][1]), "%s: no '%s' in %s", args, cases[i][1], err);
        cr_expect_str_eq(out, "", "%s", args);
        free(out);
        free(err);
    }
}

/* A hand edit of a generated file, so that regen --check prints a diff. */
static void hand_edit(void)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/qwen2_1_5b/qwen2_1_5b_cpu_helpers.h", models);
    char *text = tu_read(path, NULL);
    text[0] = '#';
    tu_write(path, text, strlen(text));
    free(text);
}

/*
** The diff's labels name the file from where gen-model ran (as a patch tool applies them), whichever way
** --models names the folder: $PWD/models as models does, a folder elsewhere as the way there.
*/
Test(review, check_labels_are_paths_from_the_working_folder_however_models_is_given)
{
    char *out = NULL, *err = NULL, cmd[9000], sub[4400], here[4400];
    copy_models();
    hand_edit();
    snprintf(sub, sizeof sub, "%s/sub", work);
    snprintf(here, sizeof here, "%s/here", work); /* a link to work: the shell's $PWD goes through it */
    snprintf(cmd, sizeof cmd, "mkdir '%s' && ln -s . '%s'", sub, here);
    cr_assert_eq(system(cmd), 0);
    static const char file[] = "/qwen2_1_5b/qwen2_1_5b_cpu_helpers.h\n";
    const struct {
        const char *in, *models, *shown;
    } cases[] = {
        {work, "models", "models"},          {work, "'%s'", "models"},   {work, "models/", "models"},
        {work, "./models//.", "models"},     {sub, "'%s'", "../models"}, {sub, "../models", "../models"},
        {here, "\"$PWD/models\"", "models"}, {here, "'%s'", "models"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char arg[4400], want[9000];
        snprintf(arg, sizeof arg, cases[i].models, models);
        const int rc = gm_in(cases[i].in, &out, &err, "regen --check --models %s qwen2_1_5b", arg);
        cr_expect_eq(rc, 1, "in %s, --models %s: exit %d\n%s%s", cases[i].in, arg, rc, out, err);
        snprintf(want, sizeof want, "--- a/%s%s+++ b/%s%s", cases[i].shown, file, cases[i].shown, file);
        cr_expect(strstr(out, want), "in %s, --models %s: no '%s' in:\n%s", cases[i].in, arg, want, out);
        free(out), free(err);
    }
}

/* models/<id>/snapshot/ with its header padded to 65 MB, as a safetensors header may be: gen-model writes it. */
static void big_header_model(void)
{
    char src[4400], path[4500];
    snprintf(src, sizeof src, "%s/src", work);
    tu_copy_dir(GM_SOURCE_DIR "/models/qwen2_0_5b/snapshot", src);
    snprintf(path, sizeof path, "%s/model.safetensors.head", src);
    size_t len;
    char *head = tu_read(path, &len);
    uint64_t n;
    memcpy(&n, head, 8);
    const size_t pad = 65u << 20, big = 8 + n + pad;
    char *bytes = malloc(big);
    cr_assert_not_null(bytes);
    memcpy(bytes, head, 8 + n);
    memset(bytes + 8 + n, ' ', pad); /* the spaces a header may end in */
    n += pad;
    memcpy(bytes, &n, 8);
    tu_write(path, bytes, big);
    free(bytes);
    free(head);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(&out, &err, "'%s' --out '%s'", src, models), 0, "%s%s", out, err);
    free(out), free(err);
}

/* What gen-model wrote, it reads back: a snapshot/ copy over 64 MB is checked and regenerated like any other. */
Test(review, regen_and_check_read_back_a_header_copy_over_64_mb)
{
    char *out = NULL, *err = NULL, want[4600];
    big_header_model();
    snprintf(want, sizeof want, "%s/qwen2_0_5b: unchanged\n", models);
    for (int check = 1; check >= 0; check--) {
        const int rc = gm(&out, &err, "regen %s--models '%s'", check ? "--check " : "", models);
        cr_expect_eq(rc, 0, "check %d: exit %d\n%s%s", check, rc, out, err);
        cr_expect(strstr(out, want), "check %d: %s%s", check, out, err);
        free(out), free(err);
    }
}

/* A living document of any size (phase0's record grows) is kept by regen, not read under a cap that fails it. */
Test(review, regen_keeps_a_living_document_over_64_mb)
{
    char *out = NULL, *err = NULL, path[4400], want[4600];
    copy_models();
    edit_templates();
    snprintf(path, sizeof path, "%s/qwen3_0_6b/docs/development_progress/progress.md", models);
    cr_assert_eq(truncate(path, 65 << 20), 0); /* sparse: 65 MB that take no room */
    const int rc = gm(&out, &err, "regen --models '%s' --templates '%s' qwen3_0_6b", models, tmpl);
    cr_expect_eq(rc, 0, "exit %d\n%s%s", rc, out, err);
    snprintf(want, sizeof want, "%s/qwen3_0_6b: rewrote qwen3_0_6b_weights.h\n", models);
    cr_expect(strstr(out, want), "%s%s", out, err);
    struct stat sb;
    cr_expect(stat(path, &sb) == 0 && sb.st_size == 65 << 20, "%s: not kept as it was", path);
    free(out), free(err);
}

/*
** gen-model writes no file over GM_GEN_FILE_MAX (128 MiB), the most regen reads back: a template rendering more is
** one line naming the file and the limit, in preview and regen --check alike. A file with gen-model's mark that
** large was not written by it: --check says so instead of a diff, regen replaces it.
*/
Test(review, a_file_over_what_gen_model_writes_is_named_with_the_limit)
{
    char *out = NULL, *err = NULL, path[4400];
    copy_models();
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    snprintf(path, sizeof path, "%s/cpu_helpers.h.tmpl", tmpl);
    char *text = tu_read(path, NULL), *nl = strchr(text, '\n');
    const size_t line = 1u << 20, n = strlen(text) + line + 64;
    char *edited = malloc(n), *long_line = malloc(line + 1);
    memset(long_line, 'x', line);
    long_line[line] = '\0';
    snprintf(edited, n, "%.*s@for _ = 1, 130 do\n// %s\n@end\n%s", (int)(nl + 1 - text), text, long_line, nl + 1);
    tu_write(path, edited, strlen(edited));
    free(long_line), free(edited), free(text);
    static const char what[] = "/cpu_helpers.h.tmpl: renders qwen2_0_5b_cpu_helpers.h as ",
                      why[] = " bytes, more than gen-model writes into a model folder (at most 134217728, what regen "
                              "reads back)\n";
    int rc = gm(&out, &err, "preview --templates '%s' '%s/qwen2_0_5b/snapshot'", tmpl, models);
    cr_expect_eq(rc, 1, "exit %d\n%s%s", rc, out, err);
    cr_expect(strstr(out, what) && strstr(out, why), "%s%s", out, err);
    free(out), free(err);
    rc = gm(&out, &err, "regen --check --models '%s' --templates '%s' qwen2_0_5b", models, tmpl);
    cr_expect_eq(rc, 1, "exit %d\n%s%s", rc, out, err);
    cr_expect(strstr(err, what) && strstr(err, why) && tu_lines(err) == 1, "%s%s", out, err);
    free(out), free(err);

    /* 129 MiB (sparse) that start as gen-model's files do */
    static const char mark[] = "// Code generated by gen-model from templates/weights.c.tmpl; DO NOT EDIT.\n";
    snprintf(path, sizeof path, "%s/qwen2_0_5b/qwen2_0_5b_weights.c", models);
    tu_write(path, mark, strlen(mark));
    cr_assert_eq(truncate(path, 129 << 20), 0);
    rc = gm(&out, &err, "regen --check --models '%s' qwen2_0_5b", models);
    cr_expect_eq(rc, 1, "exit %d\n%s%s", rc, out, err);
    char want[4600];
    snprintf(want, sizeof want, "%s/qwen2_0_5b/qwen2_0_5b_weights.c: qwen2_0_5b_weights.c is 135266304 bytes, more "
             "than gen-model writes (at most 134217728); its diff is not shown\n", models);
    cr_expect(strstr(out, want), "%s%s", out, err);
    cr_expect(strstr(out, "qwen2_0_5b: would change qwen2_0_5b_weights.c\n"), "%s", out);
    free(out), free(err);
    rc = gm(&out, &err, "regen --models '%s' qwen2_0_5b", models);
    cr_expect_eq(rc, 0, "exit %d\n%s%s", rc, out, err);
    cr_expect(strstr(out, "qwen2_0_5b: rewrote qwen2_0_5b_weights.c\n"), "%s", out);
    free(out), free(err);
    cr_expect_eq(gm(&out, &err, "regen --check --models '%s' qwen2_0_5b", models), 0, "%s%s", out, err);
    free(out), free(err);
}

/* ---------------------------------------------------------------------- */
/* preview */

static const char *const refused[] = {
    "hub/deepseek-ai/DeepSeek-V2-Lite: refused: deepseek-ai/DeepSeek-V2-Lite: multi-head latent attention (MLA) is out of scope",
    "hub/google-t5/t5-small: refused: google-t5/t5-small: encoder-decoder models are out of scope",
    "hub/mistralai/Mistral-7B-v0.1: refused: mistralai/Mistral-7B-v0.1: sliding-window attention is out of scope",
    "hub/mistralai/Mixtral-8x7B-v0.1: refused: mistralai/Mixtral-8x7B-v0.1: mixture-of-experts models are out of scope",
};

/* Each refused source once where it comes, and once in the summary (as "  SOURCE: reason"). */
static void expect_refusals_listed(const char *out)
{
    const char *summary = strstr(out, "\npreview: 4 refused:\n");
    cr_assert_not_null(summary, "%s", out);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char line[512];
        const char *why = strstr(refused[i], ": refused: ") + strlen(": refused: ");
        snprintf(line, sizeof line, "%.*s: %s", (int)(strstr(refused[i], ": refused: ") - refused[i]), refused[i], why);
        cr_expect_eq(count(out, refused[i]), 1, "'%s' is not listed in:\n%s", refused[i], out);
        cr_expect_eq(count(summary, line), 1, "'%s' is not in the summary:\n%s", line, summary);
    }
}

Test(review, preview_of_the_shared_hub_with_the_same_templates_changes_nothing)
{
    char *out = NULL, *err = NULL;
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    cr_assert_eq(gm(&out, &err, "preview --templates '%s' '%s'", tmpl, HUB), 0, "%s%s", out, err);
    cr_expect(strstr(out, ": 0 with changes, 6 unchanged\n"), "%s", out);
    cr_expect_eq(count(out, "): unchanged\n"), 6, "%s", out);
    cr_expect_null(strstr(out, "\n--- "), "%s", out);
    expect_refusals_listed(out);
    cr_expect_str_eq(err, "");
    free(out);
    free(err);
}

Test(review, preview_of_the_shared_hub_names_exactly_the_models_and_files_an_edit_touches)
{
    char *out = NULL, *err = NULL;
    edit_templates();
    copy_models();
    char *before = tu_tree_hash(models);
    cr_assert_eq(gm(&out, &err, "preview --templates '%s' '%s' '%s'", tmpl, HUB, models), 0, "%s%s", out, err);
    /* Qwen3 in the Hub copy and the checked-in one: the one family with q_norm/k_norm */
    cr_expect(strstr(out, ": 2 with changes, 10 unchanged\n"), "%s", out);
    char want[8800];
    snprintf(want, sizeof want, "\n  qwen3_0_6b (%s/Qwen/Qwen3-0.6B): qwen3_0_6b_weights.h\n"
             "  qwen3_0_6b (%s/qwen3_0_6b/snapshot): qwen3_0_6b_weights.h\npreview: 4 refused:\n", HUB, models);
    cr_expect(strstr(out, want), "no '%s' in:\n%s", want, out);
    cr_expect_eq(count(out, "--- a/qwen3_0_6b/qwen3_0_6b_weights.h\n+++ b/qwen3_0_6b/qwen3_0_6b_weights.h\n"), 2,
                 "%s", out);
    cr_expect_eq(count(out, "\n+/* q_norm and k_norm: per-head RMSNorms */\n"), 2, "%s", out);
    cr_expect_eq(count(out, "\n--- "), 2, "%s", out);
    expect_refusals_listed(out);
    char *after = tu_tree_hash(models);
    cr_expect_str_eq(before, after, "preview wrote into a models folder");
    free(before);
    free(after);
    free(out);
    free(err);
}

/*
** Hub repo ids that all fail (one the Hub has not, a gated one without a token): their failures are the output,
** with no transfer summary claiming work; a source read (here a refusal) has it again. The Hub is
** tests/fakehub.py serving ../shared/hub.
*/
Test(review, preview_prints_no_transfer_summary_when_every_hub_source_failed)
{
    char *out = NULL, *err = NULL, cmd[16384];
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    const char *const runs[][2] = {
        {"no/such-repo meta-llama/Llama-3.2-1B", "preview: 2 failed:\n"},
        {"no/such-repo google-t5/t5-small", "preview: 1 refused:\n"},
    };
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && { python3 '%s/tests/fakehub.py' --root '%s' --ready-file ready.json --log hub.log "
                 "--max-seconds 60 >/dev/null 2>&1 & hub=$!; }; i=0; while [ ! -s ready.json ] && [ $i -lt 400 ]; do "
                 "sleep 0.05; i=$((i+1)); done; port=$(sed -n 's/.*\"hub\": *\\([0-9]*\\).*/\\1/p' ready.json); "
                 "env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_TOKEN_PATH -u HF_HUB_OFFLINE -u HF_HUB_CACHE "
                 "-u XDG_CACHE_HOME HF_HOME='%s/home' HF_ENDPOINT=http://127.0.0.1:$port GM_HUB_RETRY_MS=20 '%s' "
                 "preview --templates '%s' %s; rc=$?; kill $hub; wait $hub; rm -f ready.json; exit $rc",
                 work, GM_SOURCE_DIR, GM_SHARED_DIR, work, GM_GEN_MODEL, tmpl, runs[i][0]);
        const int rc = tu_run(cmd, &out, &err);
        cr_expect_eq(rc, 5, "%s: exit %d\n%s%s", runs[i][0], rc, out, err);
        cr_expect(strstr(out, "preview: 0 models rendered") && strstr(out, runs[i][1]), "%s: %s", runs[i][0], out);
        if (i == 0)
            cr_expect_str_eq(err, "", "%s: nothing was fetched", runs[i][0]);
        else
            cr_expect(strstr(err, "gen-model: ") && strstr(err, " bytes in 2 requests from http://127.0.0.1:") &&
                      tu_lines(err) == 1, "%s: %s", runs[i][0], err);
        free(out), free(err);
    }
}

Test(review, preview_lists_a_source_that_fails_and_goes_on)
{
    char *out = NULL, *err = NULL, path[4400];
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    /* a template of DIR that fails (a nil) on the model it renders, and a folder with no model */
    snprintf(path, sizeof path, "%s/cpu_helpers.h.tmpl", tmpl);
    char *text = tu_read(path, NULL);
    size_t n = strlen(text) + 64;
    char *edited = malloc(n);
    snprintf(edited, n, "// ${m.no_such_field}\n%s", text);
    tu_write(path, edited, strlen(edited));
    char empty[4400];
    snprintf(empty, sizeof empty, "%s/empty", work);
    tu_copy_dir(GM_SOURCE_DIR "/phase0/prompts", empty);
    int rc = gm(&out, &err, "preview --templates '%s' '%s' '%s/Qwen/Qwen2-0.5B' '%s/mistralai/Mixtral-8x7B-v0.1' "
                "'%s/no-such-folder'", tmpl, empty, HUB, HUB, work);
    cr_assert_eq(rc, 1, "exit %d: %s%s", rc, out, err);
    cr_expect(strstr(out, "preview: 0 models rendered"), "%s", out);
    cr_expect(strstr(out, "preview: 1 refused:\n"), "%s", out);
    cr_expect(strstr(out, "preview: 3 failed:\n"), "%s", out);
    cr_expect(strstr(out, "empty: expected a model folder (config.json) in it or below, found none"), "%s", out);
    char gone[4600]; /* the source once, not again at the start of the message */
    snprintf(gone, sizeof gone, "\n  %s/no-such-folder: expected a model folder or a Hub repo id ORG/NAME\n", work);
    cr_expect(strstr(out, gone), "%s", out);
    char want[4600]; /* named in the folder it was read from */
    snprintf(want, sizeof want, "Qwen2-0.5B: with the templates of --templates: %s/cpu_helpers.h.tmpl:1: "
             "${m.no_such_field} is nil", tmpl);
    cr_expect(strstr(out, want), "%s", out);
    free(out);
    free(err);
    free(edited);
    free(text);

    /* usage: no --templates, no source, a template set without a template */
    snprintf(path, sizeof path, "%s/registry.c.tmpl", tmpl);
    cr_assert_eq(remove(path), 0);
    const char *cases[][2] = {
        {"preview " HUB, "expected --templates DIR"},
        {"preview --templates '%s'", "expected at least one SOURCE"},
        {"preview --templates '%s' " HUB, "registry.c.tmpl: cannot open"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[8800];
        snprintf(args, sizeof args, cases[i][0], tmpl);
        cr_expect_eq(gm(&out, &err, "%s", args), 2, "%s: %s", args, err);
        cr_expect_eq(tu_lines(err), 1, "%s: %s", args, err);
        cr_expect(strstr(err, cases[i][1]), "%s: no '%s' in %s", args, cases[i][1], err);
        free(out);
        free(err);
    }
    /* a template of the reviewer's own that nothing renders: said, not passed over as "unchanged" */
    char fresh[4400];
    snprintf(fresh, sizeof fresh, "%s/fresh", work);
    tu_copy_dir(GM_SOURCE_DIR "/templates", fresh);
    snprintf(path, sizeof path, "%s/README.md.tmpl", fresh);
    tu_write(path, "# ${m.id}\n", 10);
    const char *extra[] = {"preview --templates '%s' " HUB "/Qwen/Qwen2-0.5B",
                           "regen --check --models " GM_SOURCE_DIR "/models --templates '%s'",
                           HUB "/Qwen/Qwen2-0.5B --templates '%1$s' --out '%1$s.out'"};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        char args[8800];
        snprintf(args, sizeof args, extra[i], fresh);
        cr_expect_eq(gm(&out, &err, "%s", args), 2, "%s: %s%s", args, out, err);
        cr_expect(strstr(err, "README.md.tmpl: not a template gen-model renders") && tu_lines(err) == 1, "%s: %s",
                  args, err);
        free(out);
        free(err);
    }
}

Test(review, help_of_each_command_exits_0)
{
    const char *cmds[][2] = {{"regen --help", "usage: gen-model regen [ID...] [--check]"},
                             {"preview --help", "usage: gen-model preview --templates DIR SOURCE..."},
                             {"--help", "gen-model regen [ID...]"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *out = NULL;
        cr_expect_eq(gm(&out, NULL, "%s", cmds[i][0]), 0, "%s", cmds[i][0]);
        cr_expect(strstr(out, cmds[i][1]), "%s: %s", cmds[i][0], out);
        free(out);
    }
}

/* .pre-commit-hooks.yaml: its entry, run where a project keeps models/, passes a fresh tree and stops a stale one */
Test(review, the_pre_commit_hook_runs_regen_check_in_the_project)
{
    char *yaml = tu_read(GM_SOURCE_DIR "/.pre-commit-hooks.yaml", NULL), *out = NULL, *err = NULL;
    cr_assert_not_null(yaml);
    cr_expect(strstr(yaml, "\n- id: gen-model-regen-check\n"), "%s", yaml);
    cr_expect(strstr(yaml, "\n  language: system\n") && strstr(yaml, "\n  pass_filenames: false\n"), "%s", yaml);
    const char *entry = strstr(yaml, "\n  entry: gen-model ");
    cr_assert_not_null(entry, "%s", yaml);
    entry += strlen("\n  entry: gen-model ");
    char args[256], cmd[8800];
    snprintf(args, sizeof args, "%.*s", (int)strcspn(entry, "\n"), entry);
    cr_expect_str_eq(args, "regen --check");
    copy_models();
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", work, GM_GEN_MODEL, args);
    cr_expect_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    free(out);
    free(err);
    char path[4400];
    snprintf(path, sizeof path, "%s/qwen2_1_5b/qwen2_1_5b_cpu_helpers.h", models);
    char *text = tu_read(path, NULL);
    text[0] = '#'; /* a hand edit of a generated file */
    tu_write(path, text, strlen(text));
    cr_expect_eq(tu_run(cmd, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(out, "--- a/models/qwen2_1_5b/qwen2_1_5b_cpu_helpers.h\n"), "%s", out);
    cr_expect(strstr(err, "to fix run: gen-model regen qwen2_1_5b\n"), "%s", err);
    free(text);
    free(out);
    free(err);
    free(yaml);
}

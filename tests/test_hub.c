/*
** gen-model against a fake Hugging Face Hub on 127.0.0.1 (tests/fakehub.py,
** started and stopped by each test): header-only reads, the token's reach,
** every Hub error a user can meet, retries, the shared cache, offline mode
** and resumable, verified downloads. No other network is used.
*/
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static struct {
    pid_t pid;
    int port;
    char *work;
    char log[4200], home[4200], out[4200];
} hub;

static void setup(void)
{
    hub.work = tu_tmpdir();
    snprintf(hub.log, sizeof hub.log, "%s/hub.log", hub.work);
    snprintf(hub.home, sizeof hub.home, "%s/hf", hub.work);
    snprintf(hub.out, sizeof hub.out, "%s/models", hub.work);
    hub.pid = 0;
}

/* SIGTERM, and SIGKILL if it has not exited 10 s later: a fake Hub left running would hold ctest's pipe. */
static void hub_stop(void)
{
    if (hub.pid > 0) {
        kill(hub.pid, SIGTERM);
        int exited = 0;
        for (int i = 0; i < 1000 && !exited; i++)
            if (!(exited = waitpid(hub.pid, NULL, WNOHANG) == hub.pid))
                usleep(10000);
        if (!exited) {
            kill(hub.pid, SIGKILL);
            waitpid(hub.pid, NULL, 0);
        }
        cr_expect(exited, "the fake Hub (pid %d) did not stop on SIGTERM within 10 s", (int)hub.pid);
        hub.pid = 0;
    }
}

static void teardown(void)
{
    hub_stop();
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hub.work);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", hub.work);
    free(hub.work);
}

/* Start the fake Hub with extra arguments (a NULL-terminated list). */
static void hub_start(const char *const *extra)
{
    char ready[4300];
    snprintf(ready, sizeof ready, "%s/ready.json", hub.work);
    unlink(ready);
    unlink(hub.log); /* each start has its own request log */
    const char *argv[32] = {"python3", GM_SOURCE_DIR "/tests/fakehub.py", "--root", GM_SHARED_DIR,
                            "--ready-file", ready, "--log", hub.log, "--max-seconds", "120"};
    int argc = 10;
    for (; extra && *extra && argc < 31; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    hub.pid = fork();
    cr_assert_neq(hub.pid, -1);
    if (hub.pid == 0) {
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200 && !tu_exists(ready); i++)
        usleep(25000);
    char *text = tu_read(ready, NULL);
    cr_assert_not_null(text, "the fake Hub did not start");
    const char *p = strstr(text, "\"hub\":");
    cr_assert_not_null(p);
    hub.port = atoi(p + 6);
    free(text);
}

static char *downloaded_dir(const char *out);
static void assert_golden_files(const char *dir, const char *id);

/* Run gen-model after the shell commands `pre` (limits, traps), with a clean Hub environment plus `env`. */
static int gm_after(const char *pre, const char *env, const char *args, char **out, char **err)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "%s env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_TOKEN_PATH -u HF_HUB_OFFLINE -u HF_HUB_CACHE "
             "-u XDG_CACHE_HOME HF_HOME='%s' HF_ENDPOINT=http://127.0.0.1:%d GM_HUB_RETRY_MS=20 %s '%s' %s",
             pre, hub.home, hub.port, env ? env : "", GM_GEN_MODEL, args);
    return tu_run(cmd, out, err);
}

/* Run gen-model with a clean Hub environment plus `env` (KEY=VALUE ...). */
static int gm(const char *env, const char *args, char **out, char **err)
{
    return gm_after("", env, args, out, err);
}

/* Scaffold repo into hub.out; returns the exit status. */
static int scaffold(const char *env, const char *repo, char **err)
{
    char args[8800];
    snprintf(args, sizeof args, "'%s' --out '%s'", repo, hub.out);
    return gm(env, args, NULL, err);
}

/*
** The fake Hub started with args, then gen-model repo (env added): its stderr, once its exit status is
** `status` and nothing was written to --out.
*/
static char *refused(const char *const *args, const char *env, const char *repo, int status)
{
    hub_start(args);
    char *err = NULL;
    const int rc = scaffold(env, repo, &err);
    cr_assert_eq(rc, status, "exit %d: %s", rc, err);
    cr_assert(!tu_exists(hub.out), "%s was written: %s", hub.out, err);
    return err;
}

/* Lines of the request log that contain every one of the given strings. */
static int log_count(const char *a, const char *b)
{
    char *text = tu_read(hub.log, NULL);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
        n += strstr(line, a) && (!b || strstr(line, b));
    free(text);
    return n;
}

/* Sum of the body bytes the fake Hub sent, per its log. */
static long log_bytes(void)
{
    char *text = tu_read(hub.log, NULL);
    long sum = 0;
    for (char *p = text; p && (p = strstr(p, "\"bytes\": ")); p += 9)
        sum += atol(p + 9);
    free(text);
    return sum;
}

static void assert_same_tree(const char *a, const char *b)
{
    char cmd[9000], *out = NULL;
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s'", a, b);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s and %s differ:\n%s", a, b, out);
    free(out);
}

TestSuite(hub, .init = setup, .fini = teardown, .timeout = 180);

/* ---------------------------------------------------------------------- */

Test(hub, scaffolds_the_same_model_as_the_offline_path_from_kilobytes)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-1.5B", &err), 0, "%s", err);
    char got[4400];
    snprintf(got, sizeof got, "%s/qwen2_1_5b", hub.out);
    assert_same_tree(got, GM_SOURCE_DIR "/models/qwen2_1_5b");
    /* header-only: every safetensors request is ranged, and the whole run stays under 100 KiB */
    cr_assert_eq(log_count("model.safetensors", "\"range\": null"), 0, "an unranged safetensors request");
    cr_assert_lt(log_bytes(), 100 * 1024, "the fake Hub sent %ld bytes", log_bytes());
    cr_assert(strstr(err, " bytes in "), "the transfer is not reported: %s", err);
    free(err);
}

/*
** A quantized repo from the Hub as any other: config.json and the headers by Range, kilobytes, the
** same sources as from its header-only snapshot (tests/data/hub); a Q4NX bundle's model.q4nx is found
** after model.safetensors and the index are not there.
*/
Test(hub, quantized_repos_scaffold_from_their_headers_as_the_offline_path_does)
{
    const char *const extra[] = {"--root", GM_SOURCE_DIR "/tests/data", NULL};
    hub_start(extra);
    const char *repos[][2] = {{"Qwen/Qwen2-1.5B-Instruct-AWQ", "qwen2_1_5b_instruct_awq"},
                              {"FastFlowLM/Llama-3.2-1B-NPU2", "llama_3_2_1b_npu2"}};
    for (size_t i = 0; i < 2; i++) {
        char *err = NULL, got[4400], want[4400], args[9000];
        cr_assert_eq(scaffold(NULL, repos[i][0], &err), 0, "%s: %s", repos[i][0], err);
        free(err);
        snprintf(want, sizeof want, "%s/offline", hub.work);
        snprintf(args, sizeof args, "'%s/tests/data/hub/%s' --out '%s'", GM_SOURCE_DIR, repos[i][0], want);
        cr_assert_eq(gm(NULL, args, NULL, &err), 0, "%s", err);
        free(err);
        snprintf(got, sizeof got, "%s/%s", hub.out, repos[i][1]);
        snprintf(want, sizeof want, "%s/offline/%s", hub.work, repos[i][1]);
        assert_same_tree(got, want);
    }
    /* the index's 404 is a plain GET, as ever; every weights file is asked for by Range */
    cr_assert_eq(log_count("model.safetensors\", \"range\": null", NULL), 0, "an unranged safetensors request");
    cr_assert_eq(log_count("model.q4nx\", \"range\": null", NULL), 0, "an unranged model.q4nx request");
    cr_assert_gt(log_count("model.q4nx", "\"status\": 206"), 0, "model.q4nx's header was not fetched by Range");
    cr_assert_lt(log_bytes(), 200 * 1024, "the fake Hub sent %ld bytes", log_bytes());
}

/* gen-model preview takes Hub repo ids as a scaffold does: kilobytes, and a refusal listed, not fatal */
Test(hub, preview_renders_hub_repo_ids_and_lists_a_refused_one)
{
    hub_start(NULL);
    char tmpl[4400], args[9000], *out = NULL, *err = NULL;
    snprintf(tmpl, sizeof tmpl, "%s/templates", hub.work);
    tu_copy_dir(GM_SOURCE_DIR "/templates", tmpl);
    snprintf(args, sizeof args, "preview --templates '%s' Qwen/Qwen3-0.6B mistralai/Mixtral-8x7B-v0.1", tmpl);
    cr_assert_eq(gm(NULL, args, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "preview: qwen3_0_6b (Qwen/Qwen3-0.6B): unchanged\n"), "%s", out);
    cr_expect(strstr(out, "preview: mistralai/Mixtral-8x7B-v0.1: refused: mixture-of-experts models are out of "
                          "scope"), "%s", out);
    cr_expect(strstr(out, ": 0 with changes, 1 unchanged\npreview: 1 refused:\n"), "%s", out);
    cr_expect(strstr(err, " bytes in "), "the transfer is not reported: %s", err);
    cr_assert_eq(log_count("model.safetensors", "\"range\": null"), 0, "an unranged safetensors request");
    cr_expect(!tu_exists(hub.out), "preview wrote a models folder");
    free(out);
    free(err);
}

Test(hub, shard_headers_of_a_gated_sharded_repo_with_a_token)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Meta-Llama-3-8B", &err), 0, "%s", err);
    char got[4400];
    snprintf(got, sizeof got, "%s/meta_llama_3_8b", hub.out);
    assert_same_tree(got, GM_SOURCE_DIR "/models/meta_llama_3_8b");
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"range\": \"bytes=0-100000\""), 4, "one header read per shard");
    /* the token goes to the Hub, never to the CDN a 302 points at */
    cr_assert_gt(log_count("\"server\": \"hub\"", "\"auth\": true"), 0);
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"auth\": true"), 0, "the token reached the CDN");
    free(err);
}

Test(hub, a_gated_repo_without_a_token_says_to_accept_the_licence_and_set_hf_token)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "meta-llama/Llama-3.2-1B", &err), 5);
    cr_assert(strstr(err, "meta-llama/Llama-3.2-1B: gated repo") && strstr(err, "accept the licence") &&
              strstr(err, "HF_TOKEN"), "%s", err);
    cr_assert(!tu_exists(hub.out), "output written after a failure");
    free(err);
    cr_assert_eq(scaffold("HF_TOKEN=hf_noaccess", "meta-llama/Llama-3.2-1B", &err), 5);
    cr_assert(strstr(err, "has no access"), "%s", err);
    free(err);
    cr_assert_eq(scaffold("HF_TOKEN=hf_bogus", "meta-llama/Llama-3.2-1B", &err), 5);
    cr_assert(strstr(err, "refused the token from HF_TOKEN") && !strstr(err, "hf_bogus"), "%s", err);
    free(err);
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
    /* CR and LF inside the variable are removed, as huggingface_hub's _clean_token does: never a header of their own */
    tu_rm_rf(hub.out);
    cr_assert_eq(scaffold("HF_TOKEN=\"$(printf ' hf_go\\r\\nod\\n')\"", "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
}

Test(hub, an_endpoint_that_is_not_a_hub_is_named_with_the_url_it_answered_404_for)
{
    hub_start(NULL);
    char *err = NULL, env[256];
    snprintf(env, sizeof env, "HF_ENDPOINT=http://127.0.0.1:%d/prefix", hub.port); /* a mirror's path, mistyped */
    cr_assert_neq(scaffold(env, "Qwen/Qwen2-0.5B", &err), 0);
    cr_expect(strstr(err, "/prefix/Qwen/Qwen2-0.5B/resolve/main/config.json: 404 without the Hub's X-Error-Code") &&
              strstr(err, "HF_ENDPOINT http://127.0.0.1:") && tu_lines(err) == 1, "%s", err);
    cr_expect(!tu_exists(hub.out), "output written after a failure");
    free(err);
}

/* No message of gen-model's holds the user name, the password or the token (each given as its own string). */
static void assert_no_secret(const char *what, const char *text, const char *const *secrets)
{
    for (; *secrets; secrets++)
        cr_assert(!strstr(text, *secrets), "%s shows '%s':\n%s", what, *secrets, text);
}

/*
** HF_ENDPOINT=http://user:password@host is how a private mirror is reached: each message that names the
** endpoint or a URL of it (an error of the Hub's, a mirror's 404, a server error, an unreachable host, a
** bad setting) names it with "***" for the credentials, and a token echoed by the server is hidden too.
*/
Test(hub, credentials_in_hf_endpoint_and_the_token_never_show_in_a_message)
{
    const char *const secrets[] = {"gm-user", "gm-s3cret", "hf_gm_t0ken", NULL};
    const char *args[] = {"--basic", "gm-user:gm-s3cret", "--mode", "echo-auth", NULL};
    hub_start(args);
    char *err = NULL, env[512], want[256];
    snprintf(env, sizeof env, "HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:%d", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/NoSuchModel", &err), 5, "%s", err);
    snprintf(want, sizeof want, "Qwen/NoSuchModel: repo not found at http://***@127.0.0.1:%d (", hub.port);
    cr_assert(strstr(err, want) && tu_lines(err) == 1, "%s", err);
    assert_no_secret("a missing repo", err, secrets);
    free(err);
    /* a token the mirror refuses, and whose header it quotes back: the message keeps its words, not the token */
    snprintf(env, sizeof env, "HF_TOKEN=hf_gm_t0ken HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:%d", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/Qwen2-0.5B", &err), 5, "%s", err);
    cr_assert(strstr(err, "refused the token from HF_TOKEN") && strstr(err, "Bearer ***"), "%s", err);
    assert_no_secret("a refused token", err, secrets);
    free(err);
    /*
    ** a wrong password and no token: the credentials in HF_ENDPOINT were refused, which HF_TOKEN would not mend (it
    ** said "a private repo needs HF_TOKEN"); the mirror's echo of them, base64 in a Basic header, hidden too
    */
    const char *const wrong[] = {"gm-user", "gm-wr0ng", "Z20tdXNlcjpnbS13cjBuZw==", NULL}; /* base64 user:password */
    snprintf(env, sizeof env, "HF_ENDPOINT=http://gm-user:gm-wr0ng@127.0.0.1:%d", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/Qwen2-0.5B", &err), 5, "%s", err);
    snprintf(want, sizeof want, "Qwen/Qwen2-0.5B: http://***@127.0.0.1:%d refused the user name and password in "
             "HF_ENDPOINT for config.json (401: Basic credentials required: Basic ***); check them", hub.port);
    cr_assert(strstr(err, want) && !strstr(err, "HF_TOKEN") && tu_lines(err) == 1, "%s", err);
    assert_no_secret("refused credentials", err, wrong);
    free(err);
    /* a mirror's path, mistyped: the URL and the endpoint both named */
    snprintf(env, sizeof env, "HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:%d/prefix/", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/Qwen2-0.5B", &err), 1, "%s", err);
    snprintf(want, sizeof want, "(http://***@127.0.0.1:%d/prefix/Qwen/Qwen2-0.5B/resolve/main/config.json: 404 "
             "without the Hub's X-Error-Code; if HF_ENDPOINT http://***@127.0.0.1:%d/prefix is not", hub.port,
             hub.port);
    cr_assert(strstr(err, want), "%s", err);
    assert_no_secret("a mirror's 404", err, secrets);
    free(err);
    hub_stop();

    /* a server that keeps failing */
    const char *failing[] = {"--fail-first", "50", NULL};
    hub_start(failing);
    snprintf(env, sizeof env, "HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:%d", hub.port);
    cr_assert_eq(gm(env, "download Qwen/Qwen2-0.5B", NULL, &err), 5, "%s", err);
    snprintf(want, sizeof want, "GET http://***@127.0.0.1:%d/Qwen/Qwen2-0.5B/resolve/main/config.json: server error "
             "503 after 5 attempts", hub.port);
    cr_assert(strstr(err, want), "%s", err);
    assert_no_secret("a server error", err, secrets);
    free(err);

    /* nothing listening */
    cr_assert_eq(scaffold("HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:1", "Qwen/Qwen2-0.5B", &err), 5, "%s", err);
    cr_assert(strstr(err, "GET http://***@127.0.0.1:1/Qwen/Qwen2-0.5B/resolve/main/config.json: "), "%s", err);
    assert_no_secret("an unreachable host", err, secrets);
    free(err);

    /* a bad setting is named without them; a password whose '/' or '@' is not percent-encoded is not shown either */
    cr_assert_eq(scaffold("HF_ENDPOINT=ftp://gm-user:gm-s3cret@127.0.0.1", "Qwen/Qwen2-0.5B", &err), 2, "%s", err);
    cr_assert(strstr(err, "found 'ftp://***@127.0.0.1'"), "%s", err);
    assert_no_secret("a bad HF_ENDPOINT", err, secrets);
    free(err);
    const char *const unencoded[] = {"HF_ENDPOINT=http://gm-user:gm/s3cret@127.0.0.1:1",
                                     "HF_ENDPOINT=http://gm-user:gm@s3cret@127.0.0.1:1"};
    const char *const parts[] = {"gm-user", "s3cret", NULL};
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(scaffold(unencoded[i], "Qwen/Qwen2-0.5B", &err), 2, "%s: %s", unencoded[i], err);
        cr_assert(strstr(err, "HF_ENDPOINT: expected a user name and password with any '/', '?', '#' or '@' in "
                  "them percent-encoded") && tu_lines(err) == 1, "%s: %s", unencoded[i], err);
        assert_no_secret(unencoded[i], err, parts);
        free(err);
    }
    cr_assert(!tu_exists(hub.out));
}

/*
** The credentials still go with every request to the endpoint (a relative redirect's too), never to the CDN a
** 302 points at; the transfer summary names the endpoint without them, and no file gen-model writes holds them.
*/
Test(hub, credentials_in_hf_endpoint_reach_a_mirror_behind_a_password)
{
    const char *const secrets[] = {"gm-user", "gm-s3cret", NULL};
    const char *args[] = {"--basic", "gm-user:gm-s3cret", "--mode", "rename", NULL};
    hub_start(args);
    char *err = NULL, *out = NULL, env[512], want[256];
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-0.5B", &err), 5, "the mirror let a request without credentials in: %s",
                 err);
    free(err);
    snprintf(env, sizeof env, "HF_ENDPOINT=http://gm-user:gm-s3cret@127.0.0.1:%d", hub.port);
    snprintf(want, sizeof want, " from http://***@127.0.0.1:%d\n", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/Qwen2-0.5B-old", &err), 0, "%s", err);
    cr_assert(strstr(err, want), "no summary naming the endpoint: %s", err);
    assert_no_secret("a scaffold's summary", err, secrets);
    free(err);
    cr_assert_eq(gm(env, "download golden/qwen2_tied", &out, &err), 0, "%s", err);
    cr_assert(strstr(err, want), "no summary naming the endpoint: %s", err);
    assert_no_secret("a download's summary", err, secrets);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "qwen2_tied");
    free(dir);
    free(out);
    free(err);
    cr_assert_eq(log_count("\"server\": \"hub\"", "\"basic\": null"), 1, "only the first scaffold came without them");
    cr_assert_gt(log_count("\"status\": 307", "\"basic\": \"gm-user\""), 0);
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"basic\": \"gm-"), 0, "the credentials reached the CDN");
    /* the cache and the scaffold (its snapshot/source.json among them) */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "grep -rlI -e gm-user -e gm-s3cret '%s' '%s'", hub.home, hub.out);
    cr_assert_eq(tu_run(cmd, &out, NULL), 1, "written with the credentials:\n%s", out);
    free(out);
}

Test(hub, the_token_comes_from_the_env_then_the_token_files)
{
    hub_start(NULL);
    char *err = NULL, env[4400], path[4400];
    cr_assert_eq(scaffold("HUGGING_FACE_HUB_TOKEN=hf_good", "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
    snprintf(path, sizeof path, "%s/mytoken", hub.work);
    tu_write(path, "  hf_good\n", 10);
    snprintf(env, sizeof env, "HF_TOKEN_PATH='%s'", path);
    cr_assert_eq(scaffold(env, "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
    mkdir(hub.home, 0755);
    snprintf(path, sizeof path, "%s/token", hub.home);
    tu_write(path, "hf_good", 7);
    cr_assert_eq(scaffold(NULL, "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
    /* HF_TOKEN wins over the file */
    cr_assert_eq(scaffold("HF_TOKEN=hf_noaccess", "meta-llama/Llama-3.2-1B", &err), 5);
    free(err);
}

Test(hub, missing_repo_revision_and_file_each_get_their_message)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/NoSuchModel", &err), 5);
    cr_assert(strstr(err, "Qwen/NoSuchModel: repo not found"), "%s", err);
    free(err);
    /* with a token, what the Hub says of a private repo the token cannot see: not "needs HF_TOKEN" */
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "Qwen/NoSuchModel", &err), 5);
    cr_assert(strstr(err, "Qwen/NoSuchModel: repo not found") && strstr(err, "the token from HF_TOKEN must be of an "
              "account with access") && !strstr(err, "needs HF_TOKEN") && tu_lines(err) == 1, "%s", err);
    free(err);
    char args[8800];
    snprintf(args, sizeof args, "Qwen/Qwen2-1.5B --revision v9.9 --out '%s'", hub.out);
    cr_assert_eq(gm(NULL, args, NULL, &err), 5);
    cr_assert(strstr(err, "revision 'v9.9' not found"), "%s", err);
    free(err);
    /* a revision is URL-escaped */
    snprintf(args, sizeof args, "Qwen/Qwen2-1.5B --revision refs/pr/1 --out '%s'", hub.out);
    cr_assert_eq(gm(NULL, args, NULL, &err), 5);
    cr_assert_eq(log_count("resolve/refs%2Fpr%2F1/config.json", NULL), 1);
    free(err);
    /* a repo with no safetensors at all */
    snprintf(args, sizeof args, "download google-t5/t5-small");
    cr_assert_eq(gm(NULL, args, NULL, &err), 1);
    cr_assert(strstr(err, "neither model.safetensors nor model.safetensors.index.json"), "%s", err);
    free(err);
    cr_assert(!tu_exists(hub.out));
}

Test(hub, a_commit_id_as_revision_is_recorded_in_the_banner)
{
    hub_start(NULL);
    char *err = NULL, args[8800];
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --revision 8f445e3628f3500ee69f24e1303c9f10f5342a39 --out '%s'",
             hub.out);
    int rc = gm(NULL, args, NULL, &err);
    char *hubjson = tu_read(GM_SHARED_DIR "/hub/Qwen/Qwen2-0.5B/.hub.json", NULL);
    char *c = strstr(hubjson, "\"commit\": \"");
    cr_assert_not_null(c);
    char commit[41];
    snprintf(commit, sizeof commit, "%s", c + 11);
    free(err);
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --revision %s --out '%s'", commit, hub.out);
    cr_assert_eq(gm(NULL, args, NULL, &err), 0, "%s", err);
    char path[4400];
    snprintf(path, sizeof path, "%s/qwen2_0_5b/qwen2_0_5b_weights.c", hub.out);
    char *src = tu_read(path, NULL);
    cr_assert(strstr(src, commit), "the banner does not name commit %s", commit);
    (void)rc;
    free(src);
    free(hubjson);
    free(err);
}

Test(hub, server_errors_and_rate_limits_are_retried_with_backoff)
{
    const char *args[] = {"--fail-first", "3", NULL};
    hub_start(args);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-0.5B", &err), 0, "%s", err);
    cr_assert_eq(log_count("\"status\": 503", NULL), 3);
    free(err);
}

Test(hub, persistent_rate_limiting_gives_up_with_a_message)
{
    const char *args[] = {"--fail-first", "50", "--fail-status", "429", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "rate limited (429) after 5 attempts"), "%s", err);
    cr_assert_eq(log_count("\"status\": 429", NULL), 5, "bounded retries");
    free(err);
}

Test(hub, persistent_server_errors_give_up_with_a_message)
{
    const char *args[] = {"--fail-first", "50", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "server error 503 after 5 attempts"), "%s", err);
    free(err);
}

Test(hub, a_stalled_transfer_times_out)
{
    const char *args[] = {"--mode", "slow", "--slow", "4", NULL};
    char *err = refused(args, "HF_HUB_DOWNLOAD_TIMEOUT=1", "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "timed out") && strstr(err, "HF_HUB_DOWNLOAD_TIMEOUT"), "%s", err);
    free(err);
}

/* A link that keeps stalling after a little (1000 bytes, 2 s, ...) times out too, as a read timeout does. */
Test(hub, a_link_that_keeps_stalling_times_out)
{
    const char *args[] = {"--mode", "trickle", "--slow", "2", NULL};
    char *err = refused(args, "HF_HUB_DOWNLOAD_TIMEOUT=1", "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "timed out") && strstr(err, "no bytes for 1 s") && tu_lines(err) == 1, "%s", err);
    free(err);
}

/* A Hub that cannot be reached: the error is the one line, with no transfer summary beside it. */
Test(hub, an_unreachable_hub_is_one_line_without_the_transfer_summary)
{
    hub.port = 1; /* nothing listens there */
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-0.5B", &err), 5, "%s", err);
    cr_assert(strstr(err, "http://127.0.0.1:1/") && !strstr(err, " bytes in ") && tu_lines(err) == 1,
              "one line, not:\n%s", err);
    cr_assert(strstr(err, "; check the network and HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use what the cache holds"),
              "what to do next: %s", err);
    free(err);
    cr_assert_eq(gm(NULL, "download Qwen/Qwen2-0.5B", NULL, &err), 5, "%s", err);
    cr_assert(strstr(err, "http://127.0.0.1:1/") && !strstr(err, " bytes in ") && tu_lines(err) == 1,
              "one line, not:\n%s", err);
    free(err);
    cr_assert(!tu_exists(hub.out));
}

/*
** HF_ENDPOINT and HF_HUB_DOWNLOAD_TIMEOUT are checked before anything is asked: a bad one is one
** line naming it, what was expected and what was found, exit 2 (usage). The timeout is whole
** seconds above 0, as huggingface_hub reads it (int(): no fraction). Empty is unset, as for every
** HF_ variable gen-model reads.
*/
Test(hub, bad_hub_settings_are_one_line_naming_them_before_any_request)
{
    hub_start(NULL);
    const char *bad[][3] = {
        {"HF_ENDPOINT='not a url'", "HF_ENDPOINT: expected an http:// or https:// URL", "found 'not a url'"},
        {"HF_ENDPOINT=ftp://127.0.0.1", "HF_ENDPOINT: expected an http:// or https:// URL", "found 'ftp://127.0.0.1'"},
        {"HF_ENDPOINT=http://", "HF_ENDPOINT: expected an http:// or https:// URL", "found 'http://'"},
        {"HF_HUB_DOWNLOAD_TIMEOUT=abc", "HF_HUB_DOWNLOAD_TIMEOUT: expected a whole number of seconds", "found 'abc'"},
        {"HF_HUB_DOWNLOAD_TIMEOUT=-1", "HF_HUB_DOWNLOAD_TIMEOUT: expected a whole number of seconds", "found '-1'"},
        {"HF_HUB_DOWNLOAD_TIMEOUT=0", "HF_HUB_DOWNLOAD_TIMEOUT: expected a whole number of seconds", "found '0'"},
        {"HF_HUB_DOWNLOAD_TIMEOUT=1.5", "HF_HUB_DOWNLOAD_TIMEOUT: expected a whole number of seconds", "found '1.5'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *err = NULL;
        cr_expect_eq(scaffold(bad[i][0], "Qwen/Qwen2-0.5B", &err), 2, "%s: %s", bad[i][0], err);
        cr_expect(strstr(err, bad[i][1]) && strstr(err, bad[i][2]) && tu_lines(err) == 1, "%s: %s", bad[i][0], err);
        free(err);
        cr_expect_eq(gm(bad[i][0], "download Qwen/Qwen2-0.5B", NULL, &err), 2, "%s: %s", bad[i][0], err);
        cr_expect(strstr(err, bad[i][1]) && tu_lines(err) == 1, "%s: %s", bad[i][0], err);
        free(err);
    }
    cr_assert_eq(log_count("\"path\"", NULL), 0, "the Hub was asked");
    cr_assert(!tu_exists(hub.out));
    /* the good forms still work */
    char *err = NULL;
    cr_assert_eq(scaffold("HF_HUB_DOWNLOAD_TIMEOUT=30 HF_ENDPOINT=HTTP://127.0.0.1:1", "Qwen/Qwen2-0.5B", &err), 5,
                 "%s", err);
    free(err);
    char env[128];
    snprintf(env, sizeof env, "HF_HUB_DOWNLOAD_TIMEOUT= HF_ENDPOINT=http://127.0.0.1:%d/", hub.port);
    cr_assert_eq(scaffold(env, "Qwen/Qwen2-0.5B", &err), 0, "%s", err);
    free(err);
}

Test(hub, a_truncated_body_is_an_error_not_a_short_file)
{
    const char *args[] = {"--mode", "truncate", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "truncated"), "%s", err);
    free(err);
}

/*
** A file outside LFS whose body is not its git blob id (cut short by a proxy, with a Content-Length that agrees) is
** a network error naming the URL, and nothing is cached: the next run against a sound Hub is not poisoned by it.
*/
Test(hub, a_small_file_that_is_not_its_etag_is_never_cached)
{
    const char *args[] = {"--mode", "short-small", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "/Qwen/Qwen2-0.5B/resolve/main/config.json: the body (") &&
              strstr(err, "is not the file the Hub announced (ETag ") && tu_lines(err) == 1, "%s", err);
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "find '%s' -path '*models--Qwen--Qwen2-0.5B/blobs/*' -type f 2>/dev/null; true", hub.home);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_expect_str_eq(out, "", "a blob was cached");
    free(out);
    free(err);
}

Test(hub, a_redirect_loop_is_cut_short)
{
    const char *args[] = {"--mode", "redirect-loop", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "redirects (a redirect loop)"), "%s", err);
    cr_assert_leq(log_count("config.json", NULL), 11);
    free(err);
}

Test(hub, a_renamed_repo_is_followed_through_its_relative_redirect)
{
    const char *args[] = {"--mode", "rename", NULL};
    hub_start(args);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-0.5B-old", &err), 0, "%s", err);
    cr_assert_eq(log_count("\"status\": 307", NULL), 2, "config and header each redirected once");
    free(err);
    /* a download's HEAD follows it too (to the new name, whose answer is the CDN's absolute redirect) */
    char *out = NULL;
    cr_assert_eq(gm(NULL, "download golden/qwen2_tied-old", &out, &err), 0, "%s", err);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "qwen2_tied");
    free(dir);
    free(out);
    free(err);
}

Test(hub, a_server_that_ignores_range_is_cut_off_after_the_header)
{
    const char *args[] = {"--mode", "ignore-range", NULL};
    hub_start(args);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-1.5B", &err), 0, "%s", err);
    char got[4400];
    snprintf(got, sizeof got, "%s/qwen2_1_5b", hub.out);
    assert_same_tree(got, GM_SOURCE_DIR "/models/qwen2_1_5b");
    /* gen-model's own count: it stopped reading after 8 + N bytes of a 3 GB body */
    long bytes = atol(strstr(err, "gen-model: ") + 11);
    cr_assert_lt(bytes, 100 * 1024, "read %ld bytes: %s", bytes, err);
    free(err);
}

/*
** A server that ignores Range, for a header longer than the first request's 100001 bytes: the second request's
** 200 is the file from byte 0 again, which replaces what the first gave (appended after it, it made a corrupt
** header copy that the run blamed on the file and every later run, against a sound Hub too, read back).
*/
Test(hub, a_server_that_ignores_range_gives_a_header_longer_than_the_first_request_whole)
{
    char dir[4400], path[4500], serve[4600], cmd[16384];
    size_t len = 0;
    char *st = tu_read(GM_SHARED_DIR "/golden/qwen2_tied/model.safetensors", &len);
    cr_assert(st && len > 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (uint8_t)st[i];
    const size_t pad = 150000, grown = (n + pad + 30 + 7) / 8 * 8; /* the header with a long __metadata__ */
    char *big = malloc(8 + grown + (len - 8 - n));
    cr_assert_not_null(big);
    const char *meta = "{\"__metadata__\":{";
    const size_t m = strlen(meta);
    cr_assert(n > m && memcmp(st + 8, meta, m) == 0);
    int k = snprintf(big + 8, grown + 1, "%s\"pad\":\"", meta);
    memset(big + 8 + k, 'x', pad);
    k += (int)pad;
    k += snprintf(big + 8 + k, grown + 1 - (size_t)k, "\",");
    memcpy(big + 8 + k, st + 8 + m, n - m); /* the original header after its metadata's '{' */
    memset(big + 8 + k + (n - m), ' ', grown - (size_t)k - (n - m));
    for (int i = 0; i < 8; i++)
        big[i] = (char)((uint64_t)grown >> (8 * i));
    memcpy(big + 8 + grown, st + 8 + n, len - 8 - n);
    snprintf(dir, sizeof dir, "%s/long", hub.work);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tu_write(path, big, 8 + grown + (len - 8 - n));
    snprintf(cmd, sizeof cmd, "cp '%s/golden/qwen2_tied/config.json' '%s/'", GM_SHARED_DIR, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(serve, sizeof serve, "test/long=%s", dir);
    const char *args[] = {"--mode", "ignore-range", "--serve", serve, NULL};
    hub_start(args);
    char *err = NULL;
    cr_assert_eq(scaffold(NULL, "test/long", &err), 0, "%s", err);
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"status\": 200"), 2, "two header requests");
    snprintf(cmd, sizeof cmd, "head -c %zu '%s' | cmp - '%s'/assets/gen-model/test--long/headers/*/model.safetensors.head",
             8 + grown, path, hub.home);
    cr_assert_eq(system(cmd), 0, "the header copy is not the file's header");
    free(err);
    free(big);
    free(st);
}

/* ---------------------------------------------------------------------- */
/* the cache */

Test(hub, the_cache_has_the_python_layout_and_a_second_run_works_offline)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Llama-3.2-1B", &err), 0, "%s", err);
    free(err);
    char path[4400], *commit;
    snprintf(path, sizeof path, "%s/hub/models--meta-llama--Llama-3.2-1B/refs/main", hub.home);
    commit = tu_read(path, NULL);
    cr_assert(commit && strlen(commit) == 40, "refs/main holds no commit");
    snprintf(path, sizeof path, "%s/hub/models--meta-llama--Llama-3.2-1B/snapshots/%s/config.json", hub.home,
             commit);
    struct stat sb;
    cr_assert(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode), "config.json is not a link into blobs/");
    char target[4400];
    ssize_t n = readlink(path, target, sizeof target - 1);
    cr_assert_gt(n, 0);
    target[n] = '\0';
    cr_assert(strncmp(target, "../../blobs/", 12) == 0, "link target %s", target);

    hub_stop(); /* no server at all from here on */
    char out2[4400], args[8900];
    snprintf(out2, sizeof out2, "%s/again", hub.work);
    snprintf(args, sizeof args, "meta-llama/Llama-3.2-1B --out '%s'", out2);
    cr_assert_eq(gm("HF_HUB_OFFLINE=1", args, NULL, &err), 0, "%s", err);
    char a[4500], b[4500];
    snprintf(a, sizeof a, "%s/llama_3_2_1b", hub.out);
    snprintf(b, sizeof b, "%s/llama_3_2_1b", out2);
    assert_same_tree(a, b);
    free(err);
    free(commit);
}

/* The one snapshot folder of repo's cache (flat: org--name), or NULL. */
static char *snapshot_of(const char *flat)
{
    char cmd[9000], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -d '%s'/hub/models--%s/snapshots/*", hub.home, flat);
    if (tu_run(cmd, &out, NULL) != 0) {
        free(out);
        return NULL;
    }
    out[strcspn(out, "\n")] = '\0';
    return out;
}

Test(hub, header_copies_stay_out_of_the_shared_snapshot_in_the_assets_folder)
{
    hub_start(NULL);
    char *err = NULL;
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Meta-Llama-3-8B", &err), 0, "%s", err);
    free(err);
    char *snap = snapshot_of("meta-llama--Meta-Llama-3-8B"), cmd[9000], *ls = NULL;
    cr_assert_not_null(snap);
    /* the snapshot holds the repo's files and nothing of gen-model's own */
    snprintf(cmd, sizeof cmd, "ls -A '%s'", snap);
    tu_run(cmd, &ls, NULL);
    cr_assert_str_eq(ls, "config.json\nmodel.safetensors.index.json\n");
    free(ls);
    /* the headers sit where huggingface_hub lets a downstream tool keep its own files */
    const char *commit = strrchr(snap, '/') + 1;
    snprintf(cmd, sizeof cmd, "ls '%s/assets/gen-model/meta-llama--Meta-Llama-3-8B/headers/%s'", hub.home, commit);
    tu_run(cmd, &ls, NULL);
    cr_assert_str_eq(ls, "model-00001-of-00004.safetensors.head\nmodel-00002-of-00004.safetensors.head\n"
                         "model-00003-of-00004.safetensors.head\nmodel-00004-of-00004.safetensors.head\n");
    free(ls);
    /* a copy cut short (a full disk, a killed copy) is fetched again online, not an error for good */
    char head[9000];
    snprintf(head, sizeof head, "%s/assets/gen-model/meta-llama--Meta-Llama-3-8B/headers/%s/"
             "model-00002-of-00004.safetensors.head", hub.home, commit);
    size_t whole = 0;
    free(tu_read(head, &whole));
    cr_assert_eq(truncate(head, 500), 0);
    tu_rm_rf(hub.out);
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Meta-Llama-3-8B", &err), 0, "%s", err);
    free(err);
    size_t now = 0;
    free(tu_read(head, &now));
    cr_assert_eq(now, whole, "the header copy is %zu bytes, %zu before it was cut", now, whole);
    /* and so is one of the right length whose JSON is garbled (a server that ignored Range once wrote such copies) */
    size_t len = 0;
    char *text = tu_read(head, &len);
    memset(text + 8, '#', 16);
    tu_write(head, text, len);
    tu_rm_rf(hub.out);
    cr_assert_eq(scaffold("HF_TOKEN=hf_good", "meta-llama/Meta-Llama-3-8B", &err), 0, "%s", err);
    free(err);
    char *fixed = tu_read(head, &now);
    cr_assert(now == whole && fixed[8] == '{', "the garbled header copy was kept: %zu bytes, starting %.20s", now,
              fixed + 8);
    free(fixed), free(text);
    /* and a cache snapshot given as SOURCE finds them there, with no network */
    char args[9000];
    hub_stop();
    snprintf(args, sizeof args, "'%s' --out '%s/again'", snap, hub.work);
    cr_assert_eq(gm("HF_HUB_OFFLINE=1", args, NULL, &err), 0, "%s", err);
    free(err);
    char a[4500], b[4500];
    snprintf(a, sizeof a, "%s/meta_llama_3_8b", hub.out);
    snprintf(b, sizeof b, "%s/again/meta_llama_3_8b", hub.work);
    assert_same_tree(a, b);
    free(snap);
}

Test(hub, header_copies_an_earlier_version_left_in_a_snapshot_are_moved_out)
{
    hub_start(NULL);
    char *err = NULL, cmd[16384], assets[4400];
    snprintf(assets, sizeof assets, "%s/elsewhere", hub.work);
    snprintf(cmd, sizeof cmd, "HF_ASSETS_CACHE='%s'", assets);
    cr_assert_eq(scaffold(cmd, "Qwen/Qwen2-0.5B", &err), 0, "%s", err);
    free(err);
    char *snap = snapshot_of("Qwen--Qwen2-0.5B");
    cr_assert_not_null(snap);
    const char *commit = strrchr(snap, '/') + 1;
    /* as earlier versions left it: snapshots/<commit>/model.safetensors.head -> ../../blobs/<sha256 of it> */
    snprintf(cmd, sizeof cmd,
             "set -e; h='%s/gen-model/Qwen--Qwen2-0.5B/headers/%s/model.safetensors.head'; test -f \"$h\"; "
             "b=$(sha256sum \"$h\" | cut -c1-64); mv \"$h\" '%s/../../blobs/'$b; "
             "ln -s ../../blobs/$b '%s/model.safetensors.head'; rm -r '%s'",
             assets, commit, snap, snap, assets);
    cr_assert_eq(system(cmd), 0);
    hub_stop();
    hub.port = 9;
    snprintf(cmd, sizeof cmd, "HF_HUB_OFFLINE=1 HF_ASSETS_CACHE='%s'", assets);
    cr_assert_eq(scaffold(cmd, "Qwen/Qwen2-0.5B", &err), 0, "%s", err);
    free(err);
    char *ls = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s'; ls '%s/../../blobs' | wc -l; ls '%s/gen-model/Qwen--Qwen2-0.5B/headers/%s'",
             snap, snap, assets, commit);
    tu_run(cmd, &ls, NULL);
    /* the snapshot holds config.json alone, its blob alone is left, and the header moved to the assets folder */
    cr_assert_str_eq(ls, "config.json\n1\nmodel.safetensors.head\n");
    free(ls);
    free(snap);
}

Test(hub, offline_with_an_empty_cache_is_a_clear_error)
{
    char *err = NULL, args[8900];
    hub.port = 9; /* nothing listens there, and nothing may be asked */
    snprintf(args, sizeof args, "Qwen/Qwen2-1.5B --out '%s'", hub.out);
    cr_assert_eq(gm("HF_HUB_OFFLINE=1", args, NULL, &err), 1);
    cr_assert(strstr(err, "HF_HUB_OFFLINE=1 and the cache has no") && !strstr(err, "bytes in"), "%s", err);
    cr_assert(!tu_exists(hub.out));
    free(err);
}

Test(hub, a_model_fetched_by_the_python_tools_is_used_without_network)
{
    /* lay out the cache as huggingface_hub does: refs/main, blobs, snapshot links */
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    char cmd[16384], *err = NULL;
    snprintf(cmd, sizeof cmd,
             "set -e; r='%s/hub/models--golden--qwen3_tied'; mkdir -p $r/refs $r/blobs $r/snapshots/%s; "
             "printf %s > $r/refs/main; for f in config.json model.safetensors; do "
             "b=$(sha256sum '%s/golden/qwen3_tied/'$f | cut -c1-64); cp '%s/golden/qwen3_tied/'$f $r/blobs/$b; "
             "ln -s ../../blobs/$b $r/snapshots/%s/$f; done",
             hub.home, commit, commit, GM_SHARED_DIR, GM_SHARED_DIR, commit);
    cr_assert_eq(system(cmd), 0);
    hub.port = 9;
    cr_assert_eq(scaffold("HF_HUB_OFFLINE=1", "golden/qwen3_tied", &err), 0, "%s", err);
    char path[4400];
    snprintf(path, sizeof path, "%s/qwen3_tied/qwen3_tied_weights.c", hub.out);
    char *src = tu_read(path, NULL);
    cr_assert(src && strstr(src, commit), "banner lacks the cached commit");
    free(src);
    free(err);
}

/* ---------------------------------------------------------------------- */
/* downloads */

static void assert_golden_files(const char *dir, const char *id);

static char *downloaded_dir(const char *out)
{
    char *dir = strdup(out);
    dir[strcspn(dir, "\n")] = '\0';
    return dir;
}

Test(hub, download_survives_a_dropped_connection_and_verifies_the_checksum)
{
    const char *args[] = {"--mode", "drop-once", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download golden/llama_untied_sharded", &out, &err), 0, "%s", err);
    cr_assert(!strchr(err, '\r'), "a progress bar when stderr is not a terminal");
    char *dir = downloaded_dir(out);
    const char *files[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json", "config.json"};
    for (size_t i = 0; i < 5; i++) {
        char a[4400], b[4400], c[9000];
        snprintf(a, sizeof a, "%s/%s", dir, files[i]);
        snprintf(b, sizeof b, "%s/golden/llama_untied_sharded/%s", GM_SHARED_DIR, files[i]);
        snprintf(c, sizeof c, "cmp -s '%s' '%s'", a, b);
        cr_assert_eq(system(c), 0, "%s differs from the original", files[i]);
    }
    /* each shard was cut once and resumed with a Range from where it stopped */
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"range\": \"bytes="), 3, "three resumed requests");
    /* and the downloaded folder is a complete model for the gates */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "ls '%s'/../../blobs | grep -c incomplete", dir);
    char *count = NULL;
    tu_run(cmd, &count, NULL);
    cr_assert_eq(atoi(count), 0, "an .incomplete blob is left");
    free(count);
    free(dir);
    free(out);
    free(err);
}

Test(hub, an_interrupted_download_never_looks_complete_and_resumes_later)
{
    const char *args[] = {"--mode", "drop-always", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download golden/qwen2_tied", &out, &err), 5);
    cr_assert(strstr(err, "run the download again to resume"), "%s", err);
    free(out);
    free(err);
    char cmd[9000], *ls = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s/hub/models--golden--qwen2_tied' && ls snapshots/* && ls blobs", hub.home);
    tu_run(cmd, &ls, NULL);
    cr_assert(!strstr(ls, "model.safetensors\n"), "a partial file is linked as complete:\n%s", ls);
    cr_assert(strstr(ls, ".incomplete"), "no partial file kept to resume:\n%s", ls);
    free(ls);
    hub_stop();
    hub_start(NULL);
    cr_assert_eq(gm(NULL, "download golden/qwen2_tied", &out, &err), 0, "%s", err);
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"range\": \"bytes="), 1, "the second run resumed with Range");
    char *dir = downloaded_dir(out);
    snprintf(cmd, sizeof cmd, "cmp -s '%s/model.safetensors' '%s/golden/qwen2_tied/model.safetensors'", dir,
             GM_SHARED_DIR);
    cr_assert_eq(system(cmd), 0);
    free(dir);
    free(out);
    free(err);
}

/*
** Download golden/mistral_untied, then leave its weights as a partial download: `make` (shell, with
** $b the blob's path) writes $b.incomplete, and the blob and its snapshot link are removed.
*/
static void plant_partial(const char *make)
{
    char *out = NULL, *err = NULL, cmd[9000];
    cr_assert_eq(gm(NULL, "download golden/mistral_untied", &out, &err), 0, "%s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd,
             "cd '%s/hub/models--golden--mistral_untied' && b=$(readlink snapshots/*/model.safetensors) && "
             "b=blobs/${b##*/} && %s && rm -f $b snapshots/*/model.safetensors", hub.home, make);
    cr_assert_eq(system(cmd), 0);
}

/* Is a .incomplete left among golden/mistral_untied's blobs? */
static int partial_left(void)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "ls '%s/hub/models--golden--mistral_untied/blobs' | grep -q incomplete", hub.home);
    return system(cmd) == 0;
}

Test(hub, a_corrupt_partial_download_fails_the_checksum_and_is_removed)
{
    hub_start(NULL);
    char *out = NULL, *err = NULL;
    plant_partial("head -c 1000 /dev/zero > $b.incomplete");
    cr_assert_eq(gm(NULL, "download golden/mistral_untied", &out, &err), 5);
    cr_assert(strstr(err, "does not match the Hub's X-Linked-Etag"), "%s", err);
    cr_assert(!partial_left(), "the corrupt partial file was kept");
    free(out);
    free(err);
}

/*
** A disk that fills in the middle of a write (here RLIMIT_FSIZE: the write that crosses it is short, the next one
** fails) stops the download with one line naming the file and the reason; the partial file holds a prefix of the
** file, exactly, and the next run completes it to the right bytes (a resume after a short write had appended at a
** position that no longer matched its count: a blob whose bytes were not its name's, linked and trusted).
*/
Test(hub, a_disk_that_fills_mid_write_stops_with_the_reason_and_the_next_run_completes_the_file)
{
    hub_start(NULL);
    char *out = NULL, *err = NULL, cmd[9000];
    const int rc = gm_after("ulimit -f 300; trap '' XFSZ;", NULL, "download golden/llama_untied", &out, &err);
    cr_assert_eq(rc, 4, "exit %d: %s", rc, err);
    cr_assert(strstr(err, ".incomplete: cannot write: File too large; ") &&
                  strstr(err, " bytes stay there for the next run to resume") && tu_lines(err) == 1, "%s", err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "cd '%s/hub/models--golden--llama_untied/blobs' && p=$(ls *.incomplete) && "
             "n=$(stat -c %%s $p) && test $n -gt 0 && cmp -s -n $n $p '%s/golden/llama_untied/model.safetensors'",
             hub.home, GM_SHARED_DIR);
    cr_assert_eq(system(cmd), 0, "the partial file is not a prefix of the file");
    cr_assert_eq(gm(NULL, "download golden/llama_untied", &out, &err), 0, "%s", err);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "llama_untied");
    free(dir);
    free(out);
    free(err);
}

/* A resume answered with another part of the file than the one asked for: none of it is appended, and it says so. */
Test(hub, a_resume_answered_from_another_offset_is_refused_and_the_partial_file_kept)
{
    const char *args[] = {"--mode", "wrong-range", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL, cmd[9000];
    plant_partial("head -c 1000 $b > $b.incomplete");
    cr_assert_eq(gm(NULL, "download golden/mistral_untied", &out, &err), 5);
    cr_assert(strstr(err, "/model.safetensors: asked for the bytes from 1000 on, the server sent Content-Range "
                          "'bytes 0-") && tu_lines(err) == 1, "%s", err);
    snprintf(cmd, sizeof cmd, "test $(stat -c %%s '%s'/hub/models--golden--mistral_untied/blobs/*.incomplete) = 1000",
             hub.home);
    cr_assert_eq(system(cmd), 0, "the partial file changed");
    free(out);
    free(err);
}

/*
** A server whose body runs past the file (here endless: no Content-Length, the file, then zeros) is cut off at
** X-Linked-Size: one line naming the URL, what was expected and what came, and nothing kept (it wrote until the
** disk was full, here until RLIMIT_FSIZE, and then said that 100 MB "of 489664 bytes" stayed to resume).
*/
Test(hub, a_body_longer_than_the_file_is_cut_off_at_its_size_and_nothing_kept)
{
    const char *args[] = {"--mode", "endless", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL, cmd[9000];
    const int rc = gm_after("ulimit -f 200000; trap '' XFSZ;", NULL, "download golden/qwen2_tied", &out, &err);
    cr_assert_eq(rc, 5, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "/golden/qwen2_tied/resolve/") && strstr(err, "/model.safetensors: expected the ") &&
              strstr(err, " bytes of X-Linked-Size, the server sent more (status 200, Content-Length none)") &&
              tu_lines(err) == 1, "%s", err);
    snprintf(cmd, sizeof cmd, "ls -A '%s'/hub/models--golden--qwen2_tied/blobs | grep -v '^[0-9a-f]\\{40\\}$'; "
             "ls -A '%s'/hub/models--golden--qwen2_tied/snapshots/*", hub.home, hub.home);
    free(out);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0);
    cr_assert_str_eq(out, "config.json\n", "only config.json is kept:\n%s", out);
    free(out);
    free(err);
}

/*
** A download's own GET rate limited (429, Retry-After: 1) after its HEAD passed: each retry waits what
** Retry-After asks, and the last says it was rate limited (it retried within 0.3 s and said "server error").
*/
Test(hub, a_rate_limited_download_waits_for_retry_after_and_says_so)
{
    const char *args[] = {"--mode", "fail-lfs", "--fail-first", "50", "--fail-status", "429", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(gm(NULL, "download golden/qwen2_tied", &out, &err), 5, "%s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert(strstr(err, "/model.safetensors: 0 of ") && strstr(err, " after 5 attempts (HTTP 429: rate limited)") &&
              tu_lines(err) == 1, "%s", err);
    cr_assert_eq(log_count("\"status\": 429", NULL), 5);
    cr_assert_geq(took, 3.9, "4 waits of Retry-After's 1 s took %.2f s", took);
    free(out);
    free(err);
}

/*
** An error page that never ends (no Content-Length, then bytes without end), to a download's own GET (into the
** file) or to the Hub's API (into memory): read no further than a little of it, then retried as any error; it had
** been read until the server gave up, or memory ran out.
*/
Test(hub, an_endless_error_page_is_cut_off_and_the_request_retried)
{
    const char *const modes[] = {"fail-lfs", "fail-first"};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {"--mode", modes[i], "--mode", "endless-error", "--fail-first", "1", "--fail-status",
                              "500", "--max-seconds", "30", NULL};
        hub_start(args);
        char *out = NULL, *err = NULL;
        cr_assert_eq(gm(NULL, "download golden/qwen2_tied", &out, &err), 0, "%s: %s", modes[i], err);
        cr_assert_eq(log_count("\"status\": 500", NULL), 1, "%s", modes[i]);
        cr_assert_lt(log_bytes(), 32l << 20, "%s: the fake Hub sent %ld bytes", modes[i], log_bytes());
        free(out), free(err);
        hub_stop();
        tu_rm_rf(hub.home); /* the next download fetches it again */
    }
}

/*
** A blob cut short after it was linked (a disk that filled under a copy, a truncate) is found by the next
** download, single file or shard alike: offline it says so and what mends it, online it is fetched again from
** its own bytes on.
*/
Test(hub, a_cached_file_cut_short_is_named_offline_and_completed_online)
{
    hub_start(NULL);
    const char *const repos[][2] = {{"golden/llama_untied", "model.safetensors"},
                                    {"golden/llama_untied_sharded", "model-00002-of-00003.safetensors"}};
    for (size_t i = 0; i < 2; i++) {
        char args[256], *out = NULL, *err = NULL, cmd[9000];
        snprintf(args, sizeof args, "download %s", repos[i][0]);
        cr_assert_eq(gm(NULL, args, &out, &err), 0, "%s", err);
        char *dir = downloaded_dir(out);
        free(out);
        free(err);
        snprintf(cmd, sizeof cmd, "truncate -s 1000 \"$(readlink -f '%s/%s')\"", dir, repos[i][1]);
        cr_assert_eq(system(cmd), 0);
        cr_assert_eq(gm("HF_HUB_OFFLINE=1", args, &out, &err), 1, "%s: %s", repos[i][0], err);
        cr_assert(strstr(err, repos[i][1]) && strstr(err, "the file is incomplete (an interrupted download or copy)") &&
                      strstr(err, "; HF_HUB_OFFLINE=1: unset it to fetch the file again") && tu_lines(err) == 1,
                  "%s", err);
        free(out);
        free(err);
        const int resumed = log_count("\"server\": \"cdn\"", "\"range\": \"bytes=1000-");
        cr_assert_eq(gm(NULL, args, &out, &err), 0, "%s: %s", repos[i][0], err);
        assert_golden_files(dir, strchr(repos[i][0], '/') + 1);
        cr_assert_eq(log_count("\"server\": \"cdn\"", "\"range\": \"bytes=1000-") - resumed, 1, "%s: not resumed",
                     repos[i][0]);
        free(dir);
        free(out);
        free(err);
    }
}

/*
** A cache that already holds every file, read-only to the user who runs (a shared cache a team fills once):
** scaffold and download change nothing there and take no lock, online as offline, as huggingface_hub does.
*/
Test(hub, a_complete_read_only_cache_serves_another_user_online)
{
    hub_start(NULL);
    char *out = NULL, *err = NULL, cmd[16384], first[4400];
    cr_assert_eq(gm(NULL, "download golden/llama_untied", &out, &err), 0, "%s", err);
    free(out), free(err);
    snprintf(first, sizeof first, "'golden/llama_untied' --out '%s/first'", hub.work);
    cr_assert_eq(gm(NULL, first, &out, &err), 0, "%s", err);
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "chmod 755 '%s' && chmod -R a-w,a+rX '%s' && mkdir -m 777 '%s/theirs'", hub.work, hub.home,
             hub.work);
    cr_assert_eq(system(cmd), 0);
    char *before = tu_tree_hash(hub.home);
    const char *const runs[] = {"download golden/llama_untied", "golden/llama_untied --out '%s/theirs'"};
    for (size_t i = 0; i < 2; i++) {
        char args[4600];
        snprintf(args, sizeof args, runs[i], hub.work);
        const int rc = gm_after("setpriv --reuid=65534 --regid=65534 --clear-groups", NULL, args, &out, &err);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", args, rc, err);
        free(out), free(err);
    }
    char *after = tu_tree_hash(hub.home);
    cr_assert_str_eq(after, before, "the read-only cache changed");
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", hub.home); /* for the teardown */
    cr_assert_eq(system(cmd), 0);
    free(before), free(after);
}

/*
** An X-Linked-Size past the file's end (the server's 416 gives the real size): the file whose sha256 is the Hub's is
** kept, with a note naming both sizes (every run had said "unexpected HTTP status 416"); and a blob already cached
** is used as it is, never moved aside or removed for the header's sake.
*/
Test(hub, a_linked_size_past_the_files_end_keeps_the_verified_file_and_says_so)
{
    for (int cached = 0; cached < 2; cached++) {
        const char *args[] = {"--mode", "size-plus", NULL};
        if (cached) { /* the file downloaded from a sound Hub first, then asked for again */
            hub_start(NULL);
            char *out = NULL, *err = NULL;
            cr_assert_eq(gm(NULL, "download golden/qwen3_tied", &out, &err), 0, "%s", err);
            free(out), free(err);
            hub_stop();
        }
        hub_start(args);
        char *out = NULL, *err = NULL;
        cr_assert_eq(gm(NULL, "download golden/qwen3_tied", &out, &err), 0, "%s", err);
        char *dir = downloaded_dir(out);
        assert_golden_files(dir, "qwen3_tied");
        if (!cached)
            cr_assert(strstr(err, "note: model.safetensors: the server's file has 347584 bytes where X-Linked-Size says "
                                  "347684; its sha256 is the Hub's, so it is kept"), "%s", err);
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "ls '%s/hub/models--golden--qwen3_tied/blobs' | grep -q incomplete", hub.home);
        cr_assert_neq(system(cmd), 0, "a partial file was left");
        free(dir), free(out), free(err);
        hub_stop();
        if (!cached) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", hub.home);
            cr_assert_eq(system(cmd), 0);
        }
    }
}

/* A server that answers with the file itself (no CDN, no X-Linked headers): its Content-Length and ETag serve. */
Test(hub, a_server_that_sends_the_file_directly_is_downloaded_by_its_content_length)
{
    const char *args[] = {"--mode", "direct", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download golden/qwen3_tied", &out, &err), 0, "%s", err);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "qwen3_tied");
    free(dir), free(out), free(err);
}

Test(hub, a_partial_download_that_has_every_byte_is_checked_and_moved_into_place)
{
    hub_start(NULL);
    char *out = NULL, *err = NULL;
    /* as a run killed after its last byte and before its rename leaves it (gen-model's or huggingface_hub's) */
    plant_partial("mv $b $b.incomplete");
    hub_stop();
    hub_start(NULL);
    cr_assert_eq(gm(NULL, "download golden/mistral_untied", &out, &err), 0, "%s", err);
    cr_assert_eq(log_count("\"server\": \"cdn\"", "\"method\": \"GET\""), 0, "the complete file was fetched again");
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "mistral_untied");
    cr_assert(!partial_left(), "the .incomplete was left");
    free(dir);
    free(out);
    free(err);
}

Test(hub, a_cache_of_plain_files_serves_offline_downloads_and_scaffolds)
{
    hub_start(NULL);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download golden/llama_untied_sharded", &out, &err), 0, "%s", err);
    free(out);
    free(err);
    hub_stop();
    /* a cache on a file system without symlinks, or copied with cp -rL: each snapshot file is the file itself */
    char cmd[9000], plain[4400];
    snprintf(plain, sizeof plain, "%s/plain", hub.work);
    snprintf(cmd, sizeof cmd, "cp -rL '%s' '%s' && test ! -L \"$(ls -d '%s'/hub/models--golden--llama_untied_sharded/"
             "snapshots/*)/model-00001-of-00003.safetensors\"", hub.home, plain, plain);
    cr_assert_eq(system(cmd), 0);
    snprintf(hub.home, sizeof hub.home, "%s", plain);
    hub.port = 9; /* nothing listens there, and nothing may be asked */
    cr_assert_eq(gm("HF_HUB_OFFLINE=1", "download golden/llama_untied_sharded", &out, &err), 0, "%s", err);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "llama_untied_sharded");
    free(dir);
    free(out);
    free(err);
    cr_assert_eq(scaffold("HF_HUB_OFFLINE=1", "golden/llama_untied_sharded", &err), 0, "%s", err);
    free(err);
}

Test(hub, download_draws_a_progress_bar_on_a_terminal)
{
    hub_start(NULL);
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "script -qec \"env -u HF_TOKEN HF_HOME='%s' HF_ENDPOINT=http://127.0.0.1:%d '%s' download "
             "golden/llama_untied\" /dev/null",
             hub.home, hub.port, GM_GEN_MODEL);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s", out);
    cr_assert(strstr(out, "model.safetensors") && strstr(out, "100%"), "no progress bar:\n%s", out);
    free(out);
    /* huggingface_hub's HF_HUB_DISABLE_PROGRESS_BARS=1 turns it off */
    snprintf(cmd, sizeof cmd,
             "script -qec \"env -u HF_TOKEN HF_HOME='%s' HF_ENDPOINT=http://127.0.0.1:%d "
             "HF_HUB_DISABLE_PROGRESS_BARS=1 '%s' download golden/qwen2_tied\" /dev/null",
             hub.home, hub.port, GM_GEN_MODEL);
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s", out);
    cr_assert(!strstr(out, "model.safetensors") && !strstr(out, "%"), "a progress bar:\n%s", out);
    free(out);
}

/* Lines of text that start with `start` and hold `also` too. */
static int lines_with(const char *text, const char *start, const char *also)
{
    int n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const size_t len = strcspn(p, "\n");
        const char *a = strstr(p, also);
        n += strncmp(p, start, strlen(start)) == 0 && a && a < p + len;
    }
    return n;
}

/*
** Where stderr is a log (a CI job's, a script's 2>file), a download says how far it has got in plain lines, never
** a \r: at most one a file every 10 s (GM_HUB_PROGRESS_MS: 200 ms here), and one when the file is complete, with
** the bytes, the percent and the rate. With huggingface_hub's HF_HUB_DISABLE_PROGRESS_BARS=1, none.
*/
Test(hub, download_to_a_log_says_how_far_it_has_got_in_plain_lines)
{
    const char *args[] = {"--mode", "slow-body", "--slow", "1.5", NULL}; /* each file's body takes 1.5 s */
    hub_start(args);
    char *out = NULL, *err = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(gm("GM_HUB_PROGRESS_MS=200", "download golden/llama_untied", &out, &err), 0, "%s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert(!strchr(err, '\r'), "a carriage return in a log:\n%s", err);
    const int during = lines_with(err, "gen-model: downloading model.safetensors: ", " of 742 kB (");
    cr_assert_geq(during, 2, "no lines while it downloads:\n%s", err);
    cr_assert_leq(during, (int)(took / 0.2) + 1, "more than one line each 200 ms in %.2f s:\n%s", took, err);
    cr_assert_eq(lines_with(err, "gen-model: downloading model.safetensors: ", "B/s\n"), during,
                 "a line without its rate:\n%s", err);
    cr_assert_eq(lines_with(err, "gen-model: downloaded model.safetensors: 742 of 742 kB (100%), ", "B/s\n"), 1,
                 "no line when the file is complete:\n%s", err);
    cr_assert_eq(lines_with(err, "gen-model: ", "100%"), 1, "100%% said more than once:\n%s", err);
    free(out);
    free(err);

    cr_assert_eq(gm("GM_HUB_PROGRESS_MS=200 HF_HUB_DISABLE_PROGRESS_BARS=1", "download golden/qwen2_tied", &out, &err),
                 0, "%s", err);
    cr_assert(!strstr(err, "model.safetensors") && tu_lines(err) == 1 && strstr(err, " bytes in "),
              "progress with HF_HUB_DISABLE_PROGRESS_BARS=1:\n%s", err);
    free(out);
    free(err);
}

/* A storage host's 403 (a signed link that expired) is one line naming the URL and saying what to do. */
Test(hub, a_cdn_refusal_says_to_run_again)
{
    const char *args[] = {"--mode", "cdn-403", NULL};
    char *err = refused(args, NULL, "Qwen/Qwen2-0.5B", 5);
    cr_assert(strstr(err, "GET http://127.0.0.1:") && strstr(err, "refused (403: Request has expired); a signed "
              "download link may have expired: run again") && tu_lines(err) == 1, "%s", err);
    free(err);
}

/* A safetensors header that says it is longer than the whole file is bad input (exit 1), named so, not a network error. */
Test(hub, a_header_longer_than_its_file_is_bad_input)
{
    char dir[4400], cmd[16384], serve[4500];
    snprintf(dir, sizeof dir, "%s/over", hub.work);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/golden/qwen2_tied/config.json' '%s/' && /usr/bin/python3 -c \""
             "import struct; b = open('%s/golden/qwen2_tied/model.safetensors', 'rb').read(); "
             "open('%s/model.safetensors', 'wb').write(struct.pack('<Q', len(b) + 1000) + b[8:])\"",
             dir, GM_SHARED_DIR, dir, GM_SHARED_DIR, dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(serve, sizeof serve, "test/over=%s", dir);
    const char *args[] = {"--serve", serve, NULL};
    char *err = refused(args, NULL, "test/over", 1);
    cr_assert(strstr(err, "model.safetensors: the safetensors header says ") &&
              strstr(err, "more than the whole file's") && tu_lines(err) == 1, "%s", err);
    free(err);
    /* download fetches it whole (its sha256 is the Hub's), then reads it as the gates will: no folder printed */
    char *out = NULL;
    cr_assert_eq(gm(NULL, "download test/over", &out, &err), 1, "%s%s", out, err);
    cr_assert(strstr(err, "/snapshots/") && strstr(err, "/model.safetensors: ") && strstr(err, ": file ends after ") &&
              tu_lines(err) == 1 && !*out, "%s%s", out, err);
    free(out);
    free(err);
}

Test(hub, download_keeps_the_tokenizer_with_the_weights_and_phase0_passes_on_them)
{
    char serve[4400];
    snprintf(serve, sizeof serve, "test/tiny_qwen=%s", GM_TINY_DIR);
    const char *args[] = {"--serve", serve, NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download test/tiny_qwen", &out, &err), 0, "%s", err);
    char *dir = downloaded_dir(out), path[4400];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    cr_assert(tu_exists(path), "no tokenizer.json in %s", dir);
    free(out);
    free(err);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' tiny_qwen --weights '%s' --no-record", GM_PHASE0_TINY, dir);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s%s", out, err);
    cr_assert(strstr(out, "tokens (5): 785 6722 315 9625 374") && strstr(out, "Phase 0: PASS"), "%s", out);
    free(out);
    free(err);
    free(dir);
}

/* A file in LFS that is not weights (a large tokenizer.json) is held to its sha256 and size as the weights are. */
Test(hub, a_small_file_in_lfs_that_is_not_its_sha256_is_never_cached)
{
    char serve[4400];
    snprintf(serve, sizeof serve, "test/tiny_qwen=%s", GM_TINY_DIR);
    const char *args[] = {"--serve", serve, "--mode", "short-lfs", NULL};
    hub_start(args);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm(NULL, "download test/tiny_qwen", &out, &err), 5, "%s", err);
    /* the error's one line, after the log's line of the weights, which came whole before it */
    cr_assert(strstr(err, "gen-model: test/tiny_qwen: tokenizer.json: GET ") && strstr(err, "is not the file the Hub announced "
              "(X-Linked-Etag ") && tu_lines(err) == 2 &&
              !strncmp(err, "gen-model: downloaded model.safetensors: ", 41), "%s", err);
    free(out);
    free(err);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "test -z \"$(find '%s/hub/models--test--tiny_qwen' -name tokenizer.json)\"", hub.home);
    cr_assert_eq(system(cmd), 0, "the cut tokenizer.json was cached");
}

/* ---------------------------------------------------------------------- */
/* one cache, many processes */

/*
** Run n gen-model commands at once (args[i % n_args] each, with the Hub
** environment of gm()), started together; each one's exit status in rc[],
** its stdout and stderr in the files <work>/par.<i>.{out,err}.
*/
static void together(int n, const char *env, const char *const *args, int n_args, int *rc)
{
    char cmd[65536];
    int k = snprintf(cmd, sizeof cmd, "cd '%s' || exit 1; ", hub.work);
    for (int i = 0; i < n; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k,
                      "( env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_HUB_CACHE -u XDG_CACHE_HOME HF_HOME='%s' "
                      "HF_ENDPOINT=http://127.0.0.1:%d GM_HUB_RETRY_MS=20 %s '%s' %s > par.%d.out 2> par.%d.err; "
                      "echo $? > par.%d.rc ) & ",
                      hub.home, hub.port, env ? env : "", GM_GEN_MODEL, args[i % n_args], i, i, i);
    snprintf(cmd + k, sizeof cmd - (size_t)k, "wait");
    cr_assert_eq(system(cmd), 0);
    for (int i = 0; i < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/par.%d.rc", hub.work, i);
        char *text = tu_read(path, NULL);
        cr_assert_not_null(text);
        rc[i] = atoi(text);
        free(text);
    }
}

static char *par_file(int i, const char *what)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/par.%d.%s", hub.work, i, what);
    char *text = tu_read(path, NULL);
    return text ? text : strdup("");
}

static void fresh_cache(void)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hub.home);
    cr_assert_eq(system(cmd), 0);
}

/* Every file of the golden model `id` in dir is byte for byte the original. */
static void assert_golden_files(const char *dir, const char *id)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cd '%s/golden/%s' && for f in *.safetensors *.json; do cmp -s \"$f\" '%s'/\"$f\" "
             "|| { echo \"$f\"; exit 1; }; done", GM_SHARED_DIR, id, dir);
    char *out = NULL;
    cr_assert_eq(tu_run(cmd, &out, NULL), 0, "%s/%s differs from the original", dir, out);
    free(out);
}

Test(hub, many_downloads_and_scaffolds_of_one_model_into_one_cache_all_succeed)
{
    hub_start(NULL);
    char scaffold_args[8800];
    snprintf(scaffold_args, sizeof scaffold_args, "golden/llama_untied_sharded --out '%s'", hub.out);
    const char *args[] = {"download golden/llama_untied_sharded", scaffold_args,
                          "download golden/llama_untied_sharded", "download golden/llama_untied_sharded"};
    for (int round = 0; round < 5; round++) {
        fresh_cache();
        int rc[4];
        together(4, NULL, args, 4, rc);
        char *first = NULL;
        for (int i = 0; i < 4; i++) {
            char *err = par_file(i, "err"), *out = par_file(i, "out");
            cr_assert_eq(rc[i], 0, "round %d, run %d (%s): exit %d: %s", round, i, args[i], rc[i], err);
            if (i != 1) { /* the downloads name one snapshot, which holds the whole model */
                char *dir = downloaded_dir(out);
                if (!first)
                    first = strdup(dir);
                cr_assert_str_eq(dir, first);
                assert_golden_files(dir, "llama_untied_sharded");
                free(dir);
            }
            free(err);
            free(out);
        }
        char cmd[9000], *left = NULL;
        snprintf(cmd, sizeof cmd, "find '%s' -name '*.tmp' -o -name '*.incomplete' | wc -l", hub.home);
        tu_run(cmd, &left, NULL);
        cr_assert_eq(atoi(left), 0, "temporary files left in the cache: %s", left);
        free(left);
        free(first);
    }
}

Test(hub, many_scaffolds_into_one_folder_leave_the_one_complete_model)
{
    hub_start(NULL);
    char ref[4400], args[8800], *err = NULL;
    snprintf(ref, sizeof ref, "%s/ref", hub.work);
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --out '%s'", ref);
    cr_assert_eq(gm(NULL, args, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --out '%s'", hub.out);
    const char *list[] = {args};
    for (int round = 0; round < 5; round++) {
        fresh_cache();
        int rc[4];
        together(4, NULL, list, 1, rc);
        for (int i = 0; i < 4; i++) {
            char *e = par_file(i, "err");
            cr_assert_eq(rc[i], 0, "round %d, run %d: exit %d: %s", round, i, rc[i], e);
            free(e);
        }
        char a[4500], b[4500];
        snprintf(a, sizeof a, "%s/qwen2_0_5b", ref);
        snprintf(b, sizeof b, "%s/qwen2_0_5b", hub.out);
        assert_same_tree(a, b);
        /* nothing beside it: no temporary folder, no lock file */
        char cmd[9000], *left = NULL;
        snprintf(cmd, sizeof cmd, "ls -A '%s'", hub.out);
        tu_run(cmd, &left, NULL);
        cr_assert_str_eq(left, "qwen2_0_5b\n", "round %d: %s holds more than the model", round, hub.out);
        free(left);
    }
}

/*
** A python3 holding fcntl.flock on path (a file, or a folder opened read-only)
** for `seconds`, as huggingface_hub's filelock does; returns its pid.
*/
static pid_t python_holds(const char *path, double seconds)
{
    char ready[4400], secs[32];
    snprintf(ready, sizeof ready, "%s/python-holds", hub.work);
    unlink(ready);
    snprintf(secs, sizeof secs, "%g", seconds);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        execlp("python3", "python3", "-c",
               "import fcntl, os, sys, time\n"
               "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
               "f = os.open(sys.argv[1], os.O_RDONLY) if os.path.isdir(sys.argv[1]) else open(sys.argv[1], 'w')\n"
               "fcntl.flock(f, fcntl.LOCK_EX)\n"
               "open(sys.argv[2], 'w').close()\n"
               "time.sleep(float(sys.argv[3]))\n",
               path, ready, secs, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400 && !tu_exists(ready); i++)
        usleep(10000);
    cr_assert(tu_exists(ready), "python3 did not take the lock");
    return pid;
}

Test(hub, a_blob_locked_by_python_is_waited_for_then_a_bound_gives_up_in_one_line)
{
    hub_start(NULL);
    /* the blob of model.safetensors is named by its sha256 */
    char cmd[9000], *sha = NULL, lock[4400];
    snprintf(cmd, sizeof cmd, "sha256sum '%s/golden/qwen2_tied/model.safetensors' | cut -c1-64", GM_SHARED_DIR);
    cr_assert_eq(tu_run(cmd, &sha, NULL), 0);
    sha[strcspn(sha, "\n")] = '\0';
    snprintf(lock, sizeof lock, "%s/hub/.locks/models--golden--qwen2_tied/%s.lock", hub.home, sha);
    free(sha);

    /* held for a few seconds: gen-model says what it waits on, then downloads */
    pid_t py = python_holds(lock, 4.0);
    char *out = NULL, *err = NULL;
    cr_assert_eq(gm("GM_LOCK_TIMEOUT=60", "download golden/qwen2_tied", &out, &err), 0, "%s", err);
    cr_assert(strstr(err, "waiting for the blob") && strstr(err, lock), "no line on the wait:\n%s", err);
    waitpid(py, NULL, 0);
    char *dir = downloaded_dir(out);
    assert_golden_files(dir, "qwen2_tied");
    free(dir);
    free(out);
    free(err);

    /* held past the bound: one line naming the lock and the variable, exit 4 (file system) */
    fresh_cache();
    py = python_holds(lock, 30.0);
    cr_assert_eq(gm("GM_LOCK_TIMEOUT=1", "download golden/qwen2_tied", &out, &err), 4, "%s", err);
    kill(py, SIGKILL);
    waitpid(py, NULL, 0);
    cr_assert(strstr(err, lock) && strstr(err, "GM_LOCK_TIMEOUT") && strstr(err, "still locked"), "%s", err);
    /* one line of error, no transfer report beside it */
    cr_assert_eq(tu_lines(err), 1, "one line, not:\n%s", err);
    free(out);
    free(err);
}

Test(hub, a_scaffold_waits_while_another_process_holds_the_out_folder)
{
    hub_start(NULL);
    char *err = NULL;
    mkdir(hub.out, 0755);
    /* the lock of models/<id>/ is a flock on models/ itself (phase0's records take it too) */
    pid_t py = python_holds(hub.out, 30.0);
    cr_assert_eq(scaffold("GM_LOCK_TIMEOUT=1", "Qwen/Qwen2-0.5B", &err), 4, "%s", err);
    cr_assert(strstr(err, "still locked") && strstr(err, hub.out) && strstr(err, "qwen2_0_5b/"), "%s", err);
    free(err);
    /* a bound mistyped is one line at the start, not a wait for ever */
    cr_assert_eq(scaffold("GM_LOCK_TIMEOUT=30s", "Qwen/Qwen2-0.5B", &err), 2, "%s", err);
    cr_assert(strstr(err, "GM_LOCK_TIMEOUT: expected a whole number of seconds in [0, 31536000], found '30s'") &&
              tu_lines(err) == 1, "%s", err);
    kill(py, SIGKILL);
    waitpid(py, NULL, 0);
    free(err);
    char cmd[9000], *ls = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s'", hub.out);
    tu_run(cmd, &ls, NULL);
    cr_assert_str_eq(ls, "", "written while the folder was locked: %s", ls);
    free(ls);
    /* its holder gone, the lock is free: no stale lock, and no lock file beside the model */
    cr_assert_eq(scaffold(NULL, "Qwen/Qwen2-0.5B", &err), 0, "%s", err);
    tu_run(cmd, &ls, NULL);
    cr_assert_str_eq(ls, "qwen2_0_5b\n");
    free(ls);
    free(err);
}

/* Start gen-model (argv-style args after the Hub environment) and SIGKILL it after `us` microseconds. */
static void kill_after(const char *args, long us)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        char cmd[16384], port[32];
        snprintf(port, sizeof port, "%d", hub.port);
        snprintf(cmd, sizeof cmd,
                 "exec env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_HUB_CACHE -u XDG_CACHE_HOME HF_HOME='%s' "
                 "HF_ENDPOINT=http://127.0.0.1:%s GM_HUB_RETRY_MS=20 '%s' %s >/dev/null 2>&1",
                 hub.home, port, GM_GEN_MODEL, args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    usleep((useconds_t)us);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(hub, a_download_killed_at_random_points_is_completed_by_the_next_run)
{
    const char *slow[] = {"--mode", "slow", "--slow", "0.05", NULL};
    hub_start(slow);
    srand(1234);
    for (int i = 0; i < 20; i++) {
        kill_after("download golden/llama_untied_sharded", 1000 + rand() % 400000);
        /* whatever the kill left, the next run completes and verifies */
        char *out = NULL, *err = NULL;
        cr_assert_eq(gm(NULL, "download golden/llama_untied_sharded", &out, &err), 0, "after kill %d: %s", i, err);
        char *dir = downloaded_dir(out);
        assert_golden_files(dir, "llama_untied_sharded");
        free(dir);
        free(out);
        free(err);
        if (i % 4 == 3)
            fresh_cache();
    }
}

Test(hub, a_scaffold_killed_at_random_points_leaves_the_old_model_or_the_new_never_a_mixture)
{
    const char *slow[] = {"--mode", "slow", "--slow", "0.05", NULL};
    hub_start(slow);
    char ref[4400], args[8800], *err = NULL;
    snprintf(ref, sizeof ref, "%s/ref", hub.work);
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --out '%s'", ref);
    cr_assert_eq(gm(NULL, args, NULL, &err), 0, "%s", err);
    free(err);
    char a[4500], b[4500];
    snprintf(a, sizeof a, "%s/qwen2_0_5b", ref);
    snprintf(b, sizeof b, "%s/qwen2_0_5b", hub.out);
    char *want = tu_tree_hash(a);
    snprintf(args, sizeof args, "Qwen/Qwen2-0.5B --out '%s'", hub.out);
    srand(4321);
    for (int i = 0; i < 20; i++) {
        kill_after(args, 1000 + rand() % 300000);
        /* the folder is absent or whole: a kill never leaves a part of one */
        char *got = tu_tree_hash(b);
        cr_assert(strcmp(got, "(absent)") == 0 || strcmp(got, want) == 0, "after kill %d, %s is partial", i, b);
        free(got);
        cr_assert_eq(gm(NULL, args, NULL, &err), 0, "after kill %d: %s", i, err);
        free(err);
        got = tu_tree_hash(b);
        cr_assert_str_eq(got, want, "after kill %d, the next run did not complete the model", i);
        free(got);
        char cmd[9000], *left = NULL;
        snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c tmp", hub.out);
        tu_run(cmd, &left, NULL);
        cr_assert_eq(atoi(left), 0, "a killed run's temporary folder was kept by the next one");
        free(left);
        if (i % 4 == 3)
            fresh_cache();
    }
    free(want);
}

/*
** gm_tokenizer (gm/tokenizer.h): every case of ../shared/tokenizers/<name>/goldens.json
** for the six tokenizers there (ids, ids with special tokens added, ids with
** special tokens not parsed, the three decodes), plus hand-made bad files.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "gm/io.h"
#include "gm/tokenizer.h"
#include "normalize.h"
#include <utf8proc.h>

/* ------------------------------------------------------------------------ */
/* helpers */

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
    if (p != NULL && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p != NULL) {
        p[n] = 0;
        if (len)
            *len = (size_t)n;
    }
    return p;
}

static void write_all(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "cannot write %s", path);
    cr_assert(fwrite(s, 1, n, f) == n);
    fclose(f);
}

static unsigned char *from_hex(const char *hex, size_t *n)
{
    size_t len = strlen(hex) / 2;
    unsigned char *p = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        p[i] = (unsigned char)v;
    }
    p[len] = 0;
    *n = len;
    return p;
}

/* Do ids equal the JSON array a? On a difference, describe it in msg. */
static int same_ids(const int32_t *ids, size_t n, const cJSON *a, char *msg, size_t cap)
{
    size_t k = (size_t)cJSON_GetArraySize(a);
    size_t i = 0;
    const cJSON *e;

    cJSON_ArrayForEach(e, a)
    {
        if (i >= n || ids[i] != (int32_t)e->valuedouble) {
            snprintf(msg, cap, "at %zu: got %d, want %d (got %zu ids, want %zu)", i, i < n ? ids[i] : -1,
                     (int)e->valuedouble, n, k);
            return 0;
        }
        i++;
    }
    if (n != k) {
        snprintf(msg, cap, "got %zu ids, want %zu", n, k);
        return 0;
    }
    return 1;
}

static int32_t *json_ids(const cJSON *a, size_t *n)
{
    size_t k = (size_t)cJSON_GetArraySize(a), i = 0;
    int32_t *p = malloc((k + 1) * sizeof *p);
    const cJSON *e;
    cJSON_ArrayForEach(e, a) p[i++] = (int32_t)e->valuedouble;
    *n = k;
    return p;
}

static int check_decode(const gm_tokenizer *t, const cJSON *ids, int skip, const cJSON *want, char *msg, size_t cap)
{
    size_t n, len;
    int32_t *v = json_ids(ids, &n);
    char *text = NULL;
    gm_status st = {0};
    int ok;

    if (gm_tokenizer_decode(t, v, n, skip, &text, &len, &st) != 0) {
        snprintf(msg, cap, "decode failed: %s", st.msg);
        free(v);
        return 0;
    }
    ok = strlen(want->valuestring) == len && memcmp(want->valuestring, text, len) == 0;
    if (!ok)
        snprintf(msg, cap, "decoded '%.80s', want '%.80s'", text, want->valuestring);
    free(text);
    free(v);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* the goldens */

/* Does text hold a special: false added token? */
static int has_nonspecial_added(const gm_tokenizer *t, const char *text)
{
    for (int32_t id = 0; id < gm_tokenizer_vocab_size(t); id++) {
        size_t len;
        const char *s;
        char tok[256];
        if (!gm_tokenizer_is_added(t, id) || gm_tokenizer_is_special(t, id))
            continue;
        s = gm_tokenizer_token(t, id, &len);
        if (s == NULL || len >= sizeof tok)
            continue;
        memcpy(tok, s, len);
        tok[len] = 0;
        if (strstr(text, tok) != NULL)
            return 1;
    }
    return 0;
}

/*
** quirks: emulate tokenizers 0.23.2 (gm_tokenizer_set_reference_quirks), and
** every check must agree. Without: the token's own id for special: false
** tokens when special tokens are not parsed, so ids_no_parse_special may
** differ, but only where the text holds such a token.
*/
static void run_goldens(const char *name, int quirks)
{
    char path[1024], gpath[1024];
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    size_t glen;
    int bad = 0, checks = 0;

    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", GM_SHARED_DIR, name);
    snprintf(gpath, sizeof gpath, "%s/tokenizers/%s/goldens.json", GM_SHARED_DIR, name);
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "load %s: %s", name, st.msg);
    gm_tokenizer_set_reference_quirks(t, quirks);
    char *gtext = read_all(gpath, &glen);
    cr_assert(gtext != NULL, "cannot read %s", gpath);
    cJSON *g = cJSON_ParseWithLength(gtext, glen);
    cr_assert(g != NULL, "%s: malformed JSON", gpath);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g, "cases"), *c;
    cr_assert(cJSON_GetArraySize(cases) >= 93, "%s: %d cases", gpath, cJSON_GetArraySize(cases));

    cJSON_ArrayForEach(c, cases)
    {
        const char *cname = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        size_t n;
        unsigned char *text = from_hex(cJSON_GetObjectItemCaseSensitive(c, "utf8_hex")->valuestring, &n);
        static const struct {
            const char *field;
            int add_special, parse_special;
        } enc[] = {{"ids", 0, 1}, {"ids_special", 1, 1}, {"ids_no_parse_special", 0, 0}};
        static const struct {
            const char *field, *ids;
            int skip;
        } dec[] = {{"decoded", "ids", 0}, {"decoded_special", "ids_special", 0}, {"decoded_skip_special", "ids_special", 1}};
        char msg[512];

        for (size_t k = 0; k < sizeof enc / sizeof *enc; k++) {
            const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, enc[k].field);
            int32_t *ids = NULL;
            size_t m = 0;
            if (want == NULL)
                continue;
            if (!quirks && !enc[k].parse_special && has_nonspecial_added(t, (const char *)text)) {
                // the reference's ids here are the quirk's, checked by the run with quirks
                continue;
            }
            checks++;
            if (gm_tokenizer_encode(t, (const char *)text, n, enc[k].add_special, enc[k].parse_special, &ids, &m, &st) != 0) {
                fprintf(stderr, "%s/%s %s: encode failed: %s\n", name, cname, enc[k].field, st.msg);
                bad++;
            } else if (!same_ids(ids, m, want, msg, sizeof msg)) {
                fprintf(stderr, "%s/%s %s: %s\n", name, cname, enc[k].field, msg);
                bad++;
            }
            free(ids);
        }
        for (size_t k = 0; k < sizeof dec / sizeof *dec; k++) {
            const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, dec[k].field);
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, dec[k].ids);
            if (want == NULL || ids == NULL)
                continue;
            checks++;
            if (!check_decode(t, ids, dec[k].skip, want, msg, sizeof msg)) {
                fprintf(stderr, "%s/%s %s: %s\n", name, cname, dec[k].field, msg);
                bad++;
            }
        }
        free(text);
    }
    cr_assert(checks >= (quirks ? 93 * 6 : 93 * 5), "%s: only %d checks ran", name, checks);
    cr_expect(bad == 0, "%s: %d of %d checks differ from the reference", name, bad, checks);
    cJSON_Delete(g);
    free(gtext);
    gm_tokenizer_free(t);
}

Test(tokenizer, qwen3_matches_every_golden) { run_goldens("qwen3", 1); }
Test(tokenizer, qwen2_5_matches_every_golden) { run_goldens("qwen2_5", 1); }
Test(tokenizer, llama3_matches_every_golden) { run_goldens("llama3", 1); }
Test(tokenizer, llama3_1_matches_every_golden) { run_goldens("llama3_1", 1); }
Test(tokenizer, llama3_2_matches_every_golden) { run_goldens("llama3_2", 1); }
Test(tokenizer, mistral7b_spm_matches_every_golden) { run_goldens("mistral7b_spm", 1); }
Test(tokenizer, qwen3_matches_the_goldens_without_quirks) { run_goldens("qwen3", 0); }
Test(tokenizer, llama3_1_matches_the_goldens_without_quirks) { run_goldens("llama3_1", 0); }

Test(tokenizer, non_special_added_tokens_keep_their_ids_without_quirks)
{
    char path[1024];
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    int32_t *ids = NULL;
    size_t n;
    const char *text = "<think>x</think><|im_end|>";

    snprintf(path, sizeof path, "%s/tokenizers/qwen3/tokenizer.json", GM_SHARED_DIR);
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    cr_assert(gm_tokenizer_encode(t, text, strlen(text), 0, 0, &ids, &n, &st) == 0, "%s", st.msg);
    cr_assert(n > 3 && ids[0] == 151667 && ids[2] == 151668, "got %d %d", ids[0], n > 2 ? ids[2] : -1);
    for (size_t i = 0; i < n; i++)
        cr_assert(ids[i] != 151645, "<|im_end|> was parsed");
    free(ids);
    gm_tokenizer_set_reference_quirks(t, 1);
    cr_assert(gm_tokenizer_encode(t, text, strlen(text), 0, 0, &ids, &n, &st) == 0, "%s", st.msg);
    cr_assert(ids[0] == 151653 && ids[2] == 151654, "got %d %d", ids[0], ids[2]);
    free(ids);
    gm_tokenizer_free(t);
}

/* ------------------------------------------------------------------------ */
/* encode_mt gives encode's ids on a large mixed text */

static char *mixed_text(const char *name, size_t min_len, size_t *len)
{
    char gpath[1024];
    size_t glen, n = 0, cap = min_len + 65536;
    char *out = malloc(cap);

    snprintf(gpath, sizeof gpath, "%s/tokenizers/%s/goldens.json", GM_SHARED_DIR, name);
    char *gtext = read_all(gpath, &glen);
    cr_assert(gtext != NULL);
    cJSON *g = cJSON_ParseWithLength(gtext, glen);
    const cJSON *c;
    while (n < min_len) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g, "cases"))
        {
            size_t k;
            unsigned char *s = from_hex(cJSON_GetObjectItemCaseSensitive(c, "utf8_hex")->valuestring, &k);
            if (n + k + 1 < cap) {
                memcpy(out + n, s, k);
                n += k;
                out[n++] = '\n';
            }
            free(s);
        }
    }
    cJSON_Delete(g);
    free(gtext);
    *len = n;
    return out;
}

static void check_mt(const char *name)
{
    char path[1024];
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    size_t len, n1, n2;
    int32_t *a = NULL, *b = NULL;

    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", GM_SHARED_DIR, name);
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    char *text = mixed_text(name, 400000, &len);
    cr_assert(gm_tokenizer_encode(t, text, len, 1, 1, &a, &n1, &st) == 0, "%s", st.msg);
    cr_assert(gm_tokenizer_encode_mt(t, text, len, 1, 1, 2, &b, &n2, &st) == 0, "%s", st.msg);
    cr_assert(n1 == n2, "%s: %zu ids single-threaded, %zu with 2 threads", name, n1, n2);
    cr_assert(memcmp(a, b, n1 * sizeof *a) == 0, "%s: ids differ with 2 threads", name);
    free(a);
    free(b);
    free(text);
    gm_tokenizer_free(t);
}

Test(tokenizer, encode_mt_gives_the_same_ids_qwen3) { check_mt("qwen3"); }
Test(tokenizer, encode_mt_gives_the_same_ids_llama3_1) { check_mt("llama3_1"); }
Test(tokenizer, encode_mt_gives_the_same_ids_mistral) { check_mt("mistral7b_spm"); }

/* ------------------------------------------------------------------------ */
/* small hand-made files */

static const char tiny[] =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false,"
    " \"rstrip\": false, \"normalized\": false, \"special\": true}],"
    " \"normalizer\": null, \"pre_tokenizer\": null,"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
    " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [3],"
    " \"tokens\": [\"<s>\"]}}}, \"decoder\": {\"type\": \"Fuse\"},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"fuse_unk\": false, \"byte_fallback\": false,"
    " \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}";

static char *tiny_file(const char *content, size_t len)
{
    static char path[256];
    char dir[] = "/tmp/gm_tok_XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_all(path, content, len);
    return path;
}

/* tiny_file's file and folder, once it is loaded (each test made one in /tmp) */
static void drop_tiny(const char *path)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    unlink(path);
    rmdir(dir);
}

static char *replace_once(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    cr_assert(at != NULL, "fixture: '%s' not found", from);
    size_t n = strlen(s) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    size_t head = (size_t)(at - s);
    memcpy(out, s, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

/* Loading content fails with code, and the one-line message names the file and holds want. */
static void expect_load_error(const char *content, size_t len, int code, const char *want)
{
    char *path = tiny_file(content, len);
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    int rc = gm_tokenizer_load(&t, path, &st);
    drop_tiny(path);
    cr_assert(rc == code, "load gave %d (%s), want %d", rc, st.msg, code);
    cr_assert(t == NULL);
    cr_assert(strstr(st.msg, path) != NULL, "message does not name the file: %s", st.msg);
    cr_assert(strstr(st.msg, want) != NULL, "message '%s' does not say '%s'", st.msg, want);
    cr_assert(strchr(st.msg, '\n') == NULL);
}

/* The tiny tokenizer with its first `from` made `to` fails to load as expect_load_error says. */
static void expect_edit_error(const char *from, const char *to, int code, const char *want)
{
    char *json = replace_once(tiny, from, to);
    expect_load_error(json, strlen(json), code, want);
    free(json);
}

Test(tokenizer, tiny_file_encodes_merges_and_bos)
{
    char *path = tiny_file(tiny, strlen(tiny));
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    int32_t *ids = NULL;
    size_t n, len;
    char *text = NULL;

    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    drop_tiny(path);
    cr_assert(gm_tokenizer_vocab_size(t) == 4);
    cr_assert(gm_tokenizer_is_special(t, 3) && !gm_tokenizer_is_special(t, 2));
    cr_assert(gm_tokenizer_encode(t, "ab<s>ba", 7, 1, 1, &ids, &n, &st) == 0, "%s", st.msg);
    cr_assert(n == 5 && ids[0] == 3 && ids[1] == 2 && ids[2] == 3 && ids[3] == 1 && ids[4] == 0);
    cr_assert(gm_tokenizer_decode(t, ids, n, 1, &text, &len, &st) == 0);
    cr_assert_str_eq(text, "abba");
    free(ids);
    free(text);
    gm_tokenizer_free(t);
}

/* A FIFO for the optional tokenizer_config.json beside it is refused at once, not waited on. */
Test(tokenizer, refuses_a_fifo_for_tokenizer_config_without_blocking, .timeout = 20)
{
    char *path = tiny_file(tiny, strlen(tiny)), cfg[300];
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    snprintf(cfg, sizeof cfg, "%.*s/tokenizer_config.json", (int)(strrchr(path, '/') - path), path);
    cr_assert_eq(mkfifo(cfg, 0600), 0);
    cr_assert_eq(gm_tokenizer_load(&t, path, &st), GM_EIO);
    cr_assert(strstr(st.msg, "tokenizer_config.json: expected a regular file"), "%s", st.msg);
    unlink(cfg);
    drop_tiny(path);
}

Test(tokenizer, rejects_invalid_utf8_text)
{
    char *path = tiny_file(tiny, strlen(tiny));
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    int32_t *ids = NULL;
    size_t n;

    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    drop_tiny(path);
    cr_assert(gm_tokenizer_encode(t, "a\xC3(b", 4, 0, 1, &ids, &n, &st) == GM_EFORMAT);
    cr_assert(strstr(st.msg, "invalid UTF-8 at byte 1") != NULL, "%s", st.msg);
    gm_tokenizer_free(t);
}

Test(tokenizer, decode_replaces_invalid_utf8_like_the_reference)
{
    char path[1024];
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    char *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizers/qwen3/tokenizer.json", GM_SHARED_DIR);
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    // byte-level ids of 0xE4 0xBD (a cut 3-byte sequence), then 'a': one U+FFFD for the maximal subpart
    int32_t ids[3];
    ids[0] = gm_tokenizer_token_id(t, "\xC3\xA4"); // U+00E4 stands for byte 0xE4
    ids[1] = gm_tokenizer_token_id(t, "\xC2\xBD"); // U+00BD stands for byte 0xBD
    ids[2] = gm_tokenizer_token_id(t, "a");
    cr_assert(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
    cr_assert(gm_tokenizer_decode(t, ids, 3, 0, &text, &len, &st) == 0);
    cr_assert_str_eq(text, "\xEF\xBF\xBD" "a");
    free(text);
    gm_tokenizer_free(t);

    // SentencePiece byte fallback: an invalid run of byte tokens gives one U+FFFD per byte
    snprintf(path, sizeof path, "%s/tokenizers/mistral7b_spm/tokenizer.json", GM_SHARED_DIR);
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    int32_t b[3] = {0xE4 + 3, 0xBD + 3, gm_tokenizer_token_id(t, "a")};
    cr_assert(gm_tokenizer_decode(t, b, 3, 0, &text, &len, &st) == 0);
    cr_assert_str_eq(text, "\xEF\xBF\xBD\xEF\xBF\xBD" "a");
    free(text);
    gm_tokenizer_free(t);
}

Test(tokenizer, rejects_a_truncated_file)
{
    expect_load_error(tiny, strlen(tiny) / 2, GM_EFORMAT, "truncated");
}

Test(tokenizer, rejects_a_truncated_real_file)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizers/mistral7b_spm/tokenizer.json", GM_SHARED_DIR);
    char *s = read_all(path, &len);
    cr_assert(s != NULL);
    expect_load_error(s, len - 1000, GM_EFORMAT, "truncated");
    free(s);
}

Test(tokenizer, rejects_malformed_json)
{
    expect_edit_error("\"ab\": 2}", "\"ab\": 2,}", GM_EFORMAT, "model.vocab");
    expect_edit_error("\"version\": \"1.0\",", "\"version\": \"1.0\"", GM_EFORMAT, "malformed JSON");
}

Test(tokenizer, rejects_an_unknown_model_type)
{
    expect_edit_error("\"type\": \"BPE\"", "\"type\": \"WordPiece\"", GM_EUNSUPPORTED,
                      "model.type: 'WordPiece' is not supported");
}

Test(tokenizer, rejects_a_merge_naming_a_missing_token)
{
    expect_edit_error("[\"a b\"]", "[\"a b\", \"b c\"]", GM_EFORMAT,
                      "model.merges[1]: token 'c' is not in model.vocab");
}

/* A bad entry of model.vocab or model.merges is named at its byte in the file, where an editor finds it. */
Test(tokenizer, a_bad_vocab_or_merges_entry_is_named_at_its_byte_in_the_file)
{
    const char *bad[][2] = {{"\"ab\": 2}", "\"ab\": 2.5}"}, {"[\"a b\"]", "[\"a b\", 7]"}};
    for (int i = 0; i < 2; i++) {
        char *json = replace_once(tiny, bad[i][0], bad[i][1]), want[64];
        snprintf(want, sizeof want, "at byte %zu", (size_t)(strstr(json, i ? "7]" : "2.5") - json));
        expect_load_error(json, strlen(json), GM_EFORMAT, want);
        free(json);
    }
}

/* A value of the wrong kind is named with what was found, and a step of a Sequence with its index. */
Test(tokenizer, a_malformed_value_says_what_it_found)
{
    const char *cases[][3] = {
        {"\"fuse_unk\": false", "\"fuse_unk\": \"false\"", "model.fuse_unk: expected true or false, found the string \"false\""},
        {"\"special\": true", "\"special\": 1", "added_tokens[0].special: expected true or false, found 1"},
        {"\"content\": \"<s>\"", "\"content\": null", "added_tokens[0].content: expected a non-empty string, found null"},
        {"\"decoder\": {\"type\": \"Fuse\"}",
         "\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Fuse\"}, {\"type\": \"Strip\", "
         "\"content\": \" \", \"start\": \"1\", \"stop\": 0}]}",
         "decoder.decoders[1].start: expected a whole number from 0 to 1000000, found the string \"1\""},
        {"\"normalizer\": null", "\"normalizer\": [{\"type\": \"NFC\"}]",
         "normalizer: expected an object with a \"type\", found an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_edit_error(cases[i][0], cases[i][1], GM_EFORMAT, cases[i][2]);
    /* a clone made without git-lfs: the pointer, not the file */
    const char lfs[] = "version https://git-lfs.github.com/spec/v1\noid sha256:4b1c0e\nsize 11422654\n";
    expect_load_error(lfs, strlen(lfs), GM_EFORMAT, "found a Git LFS pointer file");
}

/*
** What the reference tokenizes otherwise than gen-model would is refused, never run: BPE dropout
** (merges skipped at random on each encode), and a pre-tokenizer step after ByteLevel (which sees
** the byte-level alphabet there, Ġ for a space).
*/
Test(tokenizer, refuses_bpe_dropout_and_a_step_after_byte_level)
{
    expect_edit_error("\"dropout\": null", "\"dropout\": 0.1", GM_EUNSUPPORTED,
                      "model.dropout: expected null or 0, found 0.1");
    expect_edit_error("\"dropout\": null", "\"dropout\": 1.5", GM_EFORMAT,
                      "model.dropout: expected null or a number from 0 to 1, found 1.5");

    static const char split[] = "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Isolated\", "
                                "\"invert\": false}";
    static const char byte_level[] = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
                                     "\"use_regex\": false}";
    char pre[512];
    snprintf(pre, sizeof pre, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [%s, %s]}", byte_level, split);
    expect_edit_error("\"pre_tokenizer\": null", pre, GM_EUNSUPPORTED,
                      "pre_tokenizer.pretokenizers[1]: expected no step after ByteLevel, found Split");

    /* the usual order, and dropout 0, load */
    snprintf(pre, sizeof pre, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [%s, %s]}", split, byte_level);
    char *ok = replace_once(tiny, "\"pre_tokenizer\": null", pre);
    char *json = replace_once(ok, "\"dropout\": null", "\"dropout\": 0");
    char *path = tiny_file(json, strlen(json));
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    drop_tiny(path);
    gm_tokenizer_free(t);
    free(json);
    free(ok);
}

/* ------------------------------------------------------------------------ */
/* Metaspace: the SentencePiece files newer converters write (Mistral-7B-v0.3's kind) */

/*
** mistral7b_spm's tokenizer.json with its normalizer, pre_tokenizer and
** decoder replaced by the JSON given ("null" for none), loaded.
*/
static gm_tokenizer *mistral_edited(const char *normalizer, const char *pre, const char *decoder)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizers/mistral7b_spm/tokenizer.json", GM_SHARED_DIR);
    char *text = read_all(path, &len);
    cr_assert(text != NULL, "cannot read %s", path);
    cJSON *j = cJSON_ParseWithLength(text, len);
    cr_assert(j != NULL);
    free(text);
    const char *keys[] = {"normalizer", "pre_tokenizer", "decoder"}, *values[] = {normalizer, pre, decoder};
    for (int k = 0; k < 3; k++) {
        cJSON *v = cJSON_Parse(values[k]);
        cr_assert(v != NULL, "fixture: %s", values[k]);
        cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(j, keys[k], v));
    }
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char *file = tiny_file(out, strlen(out));
    free(out);
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    cr_assert(gm_tokenizer_load(&t, file, &st) == 0, "%s", st.msg);
    drop_tiny(file);
    return t;
}

static const char metaspace_first[] =
    "{\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"prepend_scheme\": \"first\", \"split\": false}";

/* ids of text (special tokens added as the flag says, parsed), which must encode */
static int32_t *ids_of(const gm_tokenizer *t, const char *text, size_t len, int add_special, size_t *n)
{
    int32_t *ids = NULL;
    gm_status st = {0};
    cr_assert(gm_tokenizer_encode(t, text, len, add_special, 1, &ids, n, &st) == 0, "%s", st.msg);
    return ids;
}

/*
** Llama-2's and Mistral-7B-v0.1's files spell SentencePiece as a normalizer
** (Prepend "\u2581", then Replace " " with it); newer ones as a Metaspace
** pre-tokenizer with prepend_scheme first and no split. The two agree but at
** a leading space, which the normalizer keeps and Metaspace takes for the
** prefix ("\u2581\u2581a" against "\u2581a"), and after an added token (the
** normalizer prefixes every stretch, Metaspace the text's first only). So on
** every golden input with no added token in it, the Metaspace file gives the
** golden ids, or, where the text starts with a space, the ids the proven
** normalizer file gives for the text without that space; and decodes alike.
*/
Test(tokenizer, metaspace_first_is_the_sentencepiece_normalizer_but_at_a_leading_space)
{
    char path[1024], gpath[1024];
    gm_status st = {0};
    size_t glen;
    snprintf(path, sizeof path, "%s/tokenizers/mistral7b_spm/tokenizer.json", GM_SHARED_DIR);
    snprintf(gpath, sizeof gpath, "%s/tokenizers/mistral7b_spm/goldens.json", GM_SHARED_DIR);
    gm_tokenizer *legacy = NULL;
    cr_assert(gm_tokenizer_load(&legacy, path, &st) == 0, "%s", st.msg);
    gm_tokenizer *meta = mistral_edited("null", metaspace_first,
                                        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Metaspace\", "
                                        "\"replacement\": \"\u2581\", \"prepend_scheme\": \"first\", \"split\": false}, "
                                        "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}");
    char *gtext = read_all(gpath, &glen);
    cJSON *g = cJSON_ParseWithLength(gtext, glen);
    cr_assert(g != NULL);
    const cJSON *c;
    int same = 0, shifted = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g, "cases"))
    {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        size_t n, m, k;
        char *text = (char *)from_hex(cJSON_GetObjectItemCaseSensitive(c, "utf8_hex")->valuestring, &n);
        if (strstr(text, "<s>") || strstr(text, "</s>") || strstr(text, "<unk>")) {
            free(text);
            continue;
        }
        for (int add = 0; add < 2; add++) {
            int32_t *got = ids_of(meta, text, n, add, &m), *want;
            char msg[512];
            if (text[0] == ' ') {
                want = ids_of(legacy, text + 1, n - 1, add, &k);
                cr_expect(m == k && memcmp(got, want, k * sizeof *got) == 0, "%s (add_special %d): %zu ids, want %zu",
                          name, add, m, k);
                free(want);
                shifted += add;
            } else {
                cr_expect(same_ids(got, m, cJSON_GetObjectItemCaseSensitive(c, add ? "ids_special" : "ids"), msg,
                                   sizeof msg), "%s (add_special %d): %s", name, add, msg);
                same += add;
            }
            free(got);
        }
        if (text[0] != ' ') {
            char msg[512];
            cr_expect(check_decode(meta, cJSON_GetObjectItemCaseSensitive(c, "ids"), 0,
                                   cJSON_GetObjectItemCaseSensitive(c, "decoded"), msg, sizeof msg), "%s: %s", name,
                      msg);
        }
        free(text);
    }
    cr_assert(same >= 80 && shifted >= 4, "only %d inputs compared to the goldens, %d shifted", same, shifted);
    cJSON_Delete(g);
    free(gtext);
    gm_tokenizer_free(meta);
    gm_tokenizer_free(legacy);
}

/* ids = the concatenation of pieces, each the bare model's ids for it, or the added token's id where it is "<s>" */
static void expect_pieces(const gm_tokenizer *t, const gm_tokenizer *bare, const char *text, const char *const *pieces)
{
    size_t n, k = 0, m;
    int32_t *got = ids_of(t, text, strlen(text), 0, &n), want[256];
    for (const char *const *p = pieces; *p; p++) {
        if (strcmp(*p, "<s>") == 0) {
            want[k++] = gm_tokenizer_token_id(bare, "<s>");
            continue;
        }
        int32_t *ids = ids_of(bare, *p, strlen(*p), 0, &m);
        cr_assert(k + m <= 256);
        memcpy(want + k, ids, m * sizeof *ids);
        k += m;
        free(ids);
    }
    cr_assert(n == k && memcmp(got, want, k * sizeof *got) == 0, "'%s': %zu ids, want %zu", text, n, k);
    free(got);
}

/*
** The pieces the reference's own tests give (its metaspace.rs), here with
** "<s>" an added token: "first" prefixes only the piece that starts the
** text, and only where it does not already start with a space; "always"
** every stretch; split cuts before each "\u2581".
*/
Test(tokenizer, metaspace_prefixes_and_splits_the_pieces_as_the_reference_does)
{
    gm_tokenizer *bare = mistral_edited("null", "null", "null");
    gm_tokenizer *first = mistral_edited("null", metaspace_first, "null");
    expect_pieces(first, bare, " Hey <s>how <s>are <s> you",
                  (const char *const[]){"\u2581Hey\u2581", "<s>", "how\u2581", "<s>", "are\u2581", "<s>", "\u2581you", NULL});
    expect_pieces(first, bare, "Hey my friend <s>how",
                  (const char *const[]){"\u2581Hey\u2581my\u2581friend\u2581", "<s>", "how", NULL});
    expect_pieces(first, bare, "<s>how are", (const char *const[]){"<s>", "how\u2581are", NULL});
    gm_tokenizer *always = mistral_edited(
        "null", "{\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"add_prefix_space\": true}", "null");
    /* split (true when absent): "\u2581\u2581" is a token of this vocabulary, so the cut shows */
    expect_pieces(always, bare, "Hey  friend <s>how",
                  (const char *const[]){"\u2581Hey", "\u2581", "\u2581friend", "\u2581", "<s>", "\u2581how", NULL});
    expect_pieces(always, bare, "Hey  ", (const char *const[]){"\u2581Hey", "\u2581", "\u2581", NULL});
    size_t n;
    int32_t *ids = ids_of(always, " ", 1, 0, &n);
    cr_assert(n == 1 && ids[0] == gm_tokenizer_token_id(bare, "\u2581"), "a lone space is one \u2581");
    free(ids);
    ids = ids_of(always, "<s>", 3, 0, &n);
    cr_assert(n == 1, "an empty stretch gets no prefix");
    free(ids);
    gm_tokenizer_free(always);
    gm_tokenizer_free(first);
    gm_tokenizer_free(bare);
}

/* The decoder: a space for each "\u2581", none in the first token unless the scheme is never. */
Test(tokenizer, the_metaspace_decoder_drops_the_first_tokens_replacements)
{
    static const struct {
        const char *decoder, *want;
    } cases[] = {
        {"{\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"prepend_scheme\": \"always\"}", "Hey friend!"},
        {"{\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"add_prefix_space\": false}", " Hey friend!"},
    };
    gm_tokenizer *bare = mistral_edited("null", "null", "null");
    const int32_t ids[] = {gm_tokenizer_token_id(bare, "\u2581Hey"), gm_tokenizer_token_id(bare, "\u2581friend"),
                           gm_tokenizer_token_id(bare, "!")};
    cr_assert(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gm_tokenizer *t = mistral_edited("null", "null", cases[i].decoder);
        char *text = NULL;
        size_t len;
        gm_status st = {0};
        cr_assert(gm_tokenizer_decode(t, ids, 3, 0, &text, &len, &st) == 0, "%s", st.msg);
        cr_assert_str_eq(text, cases[i].want);
        free(text);
        /* every replacement of the first token goes, not only its first */
        const int32_t two = gm_tokenizer_token_id(bare, "\u2581\u2581");
        cr_assert(gm_tokenizer_decode(t, &two, 1, 0, &text, &len, &st) == 0, "%s", st.msg);
        cr_assert_str_eq(text, i == 0 ? "" : "  ");
        free(text);
        gm_tokenizer_free(t);
    }
    gm_tokenizer_free(bare);
}

Test(tokenizer, a_malformed_metaspace_is_named)
{
    static const struct {
        const char *step;
        int code;
        const char *want;
    } cases[] = {
        {"{\"type\": \"Metaspace\", \"replacement\": \"ab\"}", GM_EFORMAT,
         "pre_tokenizer.replacement: expected one character, found the string \"ab\""},
        {"{\"type\": \"Metaspace\", \"replacement\": \"_\", \"prepend_scheme\": \"sometimes\"}", GM_EFORMAT,
         "pre_tokenizer.prepend_scheme: expected always, first or never, found 'sometimes'"},
        {"{\"type\": \"Metaspace\", \"replacement\": \"_\", \"add_prefix_space\": false, \"prepend_scheme\": \"first\"}",
         GM_EFORMAT, "pre_tokenizer: add_prefix_space false does not match prepend_scheme 'first'"},
        {"{\"type\": \"Metaspace\", \"replacement\": \"_\", \"split\": 1}", GM_EFORMAT,
         "pre_tokenizer.split: expected true or false, found 1"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Metaspace\", \"replacement\": \"_\"}, "
         "{\"type\": \"Metaspace\", \"replacement\": \"_\"}]}",
         GM_EUNSUPPORTED, "pre_tokenizer.pretokenizers[1]: a second Metaspace step is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char pre[512];
        snprintf(pre, sizeof pre, "\"pre_tokenizer\": %s", cases[i].step);
        expect_edit_error("\"pre_tokenizer\": null", pre, cases[i].code, cases[i].want);
    }
}

Test(tokenizer, rejects_a_missing_file)
{
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    cr_assert(gm_tokenizer_load(&t, "/nonexistent/tokenizer.json", &st) == GM_EIO);
    cr_assert(strstr(st.msg, "/nonexistent/tokenizer.json") != NULL, "%s", st.msg);
}

/*
** A Split regex that backtracks past Oniguruma's limits on a text: the encode fails with
** GM_EUNSUPPORTED, one line naming the file, the regex and Oniguruma's reason, not "out of memory".
*/
Test(tokenizer, a_split_regex_the_engine_gives_up_on_is_named_not_out_of_memory)
{
    char *json = replace_once(tiny, "\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": "
                              "{\"Regex\": \"(((a+)+)+)+$\"}, \"behavior\": \"Isolated\", \"invert\": false}");
    char *path = tiny_file(json, strlen(json));
    gm_tokenizer *t = NULL;
    gm_status st = {0};
    int32_t *ids = NULL;
    size_t n;
    char text[32];

    cr_assert(gm_tokenizer_load(&t, path, &st) == 0, "%s", st.msg);
    drop_tiny(path);
    cr_assert(gm_tokenizer_encode(t, "ab", 2, 0, 1, &ids, &n, &st) == 0, "%s", st.msg);
    free(ids);
    memset(text, 'a', 20);
    text[20] = 'b';
    for (int mt = 0; mt < 2; mt++) {
        memset(&st, 0, sizeof st);
        int rc = mt ? gm_tokenizer_encode_mt(t, text, 21, 0, 1, 2, &ids, &n, &st)
                    : gm_tokenizer_encode(t, text, 21, 0, 1, &ids, &n, &st);
        cr_assert(rc == GM_EUNSUPPORTED, "encode gave %d (%s), want GM_EUNSUPPORTED", rc, st.msg);
        cr_assert(strstr(st.msg, path) && strstr(st.msg, "pre_tokenizer: Split regex '(((a+)+)+)+$' failed to match") &&
                      strstr(st.msg, "retry-limit-in-match over") && !strstr(st.msg, "out of memory") &&
                      !strchr(st.msg, '\n'), "%s", st.msg);
        cr_assert(ids == NULL);
    }
    gm_tokenizer_free(t);
    free(json);
}

/*
** The four Unicode forms agree with utf8proc_map's, byte for byte, on text
** made to exercise them: marks of many classes out of order and in long runs,
** Hangul jamo and syllables, compatibility characters with long
** decompositions (U+FDFA, 18 code points), singletons, letters and ASCII.
*/
Test(tokenizer, the_unicode_forms_agree_with_utf8proc_map_on_marks_hangul_and_compatibility_text)
{
    static const int32_t pool[] = {'a', 'e', 'o', ' ', 0xe9, 0xc5, 0x1e9b, 0x0301, 0x0316, 0x0323, 0x0327, 0x0345,
                                   0x05b0, 0x05c1, 0x0591, 0x0f71, 0x0f72, 0x0f73, 0x0f80, 0x1100, 0x1161, 0x11a8,
                                   0xac00, 0xd4db, 0xfb01, 0xfdfa, 0x2460, 0x212b, 0x2126, 0x0344, 0x1f80, 0x0958,
                                   0x3099, 0x304b, 0x309a, 0x1d15e, 0x0300, 0x0315, 0x031b, 0x0334};
    const int forms[] = {TK_NORM_NFC, TK_NORM_NFD, TK_NORM_NFKC, TK_NORM_NFKD};
    const utf8proc_option_t opts[] = {UTF8PROC_COMPOSE, UTF8PROC_DECOMPOSE, UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                                      UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
    unsigned seed = 12345;
    for (int round = 0; round < 3000; round++) {
        char text[4 * 200];
        size_t n = 0;
        const int len = round < 2900 ? 1 + round % 40 : 150; /* the last ones: runs long enough for the buckets */
        for (int i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            int32_t c = pool[(seed >> 16) % (sizeof pool / sizeof pool[0])];
            if (round >= 2900 && i > 0) { /* marks two a class (230, 220, 10): the sort must keep each pair's order */
                static const int32_t marks[] = {0x0300, 0x0301, 0x0316, 0x0317, 0x05b0, 0x05b1};
                c = marks[(seed >> 20) % 6];
            }
            n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)text + n);
        }
        for (int f = 0; f < 4; f++) {
            const tk_norm step = {.kind = forms[f]};
            gm_buf got = {0};
            utf8proc_uint8_t *want = NULL;
            const utf8proc_ssize_t wn =
                utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &want, UTF8PROC_STABLE | opts[f]);
            cr_assert_geq(wn, 0);
            cr_assert_eq(tk_normalize(&step, 1, text, n, &got), 0);
            cr_assert(got.n == (size_t)wn && memcmp(got.p, want, (size_t)wn) == 0, "round %d, form %d: %zu bytes, "
                      "utf8proc_map %zd", round, f, got.n, wn);
            free(want);
            free(got.p);
        }
    }
}

/* A NULL status is allowed (gm/status.h): a failure is still its code, and nothing crashes. */
Test(tokenizer, a_null_status_still_gets_the_failure_code)
{
    gm_tokenizer *t = (gm_tokenizer *)1;
    cr_assert_neq(gm_tokenizer_load(&t, "/nonexistent/tokenizer.json", NULL), 0);
    cr_assert_null(t);
    char *data = (char *)1;
    size_t len = 1;
    cr_assert_neq(gm_read_file("/nonexistent/x", 10, &data, &len, NULL), 0);
    cr_assert_null(data);
}

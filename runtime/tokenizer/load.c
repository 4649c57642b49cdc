/*
** Loading tokenizer.json: the model (BPE), added tokens, normalizer,
** pre-tokenizer, post-processor and decoder, plus tokenizer_config.json's
** bos/eos names when the file sits beside it. Everything the pipeline does
** not implement is refused at load time with GM_EUNSUPPORTED, so a tokenizer
** that loads encodes as the reference does. Also gm_tokenizer_free and the
** public getters, which read the tables built here.
**
** The top level and "model" are scanned with gm/json.h so that the two big
** arrays go to vocab_merges.c without a tree; every other section is small
** and read with cJSON.
*/
#include "tokenizer_types.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe.h"
#include "gm/io.h"
#include "gm/json.h"
#include "gm/utf8.h"
#include "maps.h"
#include "normalize.h"
#include "pretokenize.h"
#include "unicode.h"
#include "vocab_merges.h"

/* ------------------------------------------------------------------ helpers */

/* tokenizer.json is 2-33 MB for the models in scope; the cap bounds what a hostile file costs. */
#define TK_MAX_FILE ((size_t)1 << 30)

static int arena_add(gm_tokenizer *t, const char *s, size_t n, uint32_t *off, gm_status *st)
{
    if (t->arena.n > UINT32_MAX / 2 || n > UINT32_MAX / 2)
        return gm_fail(st, GM_EFORMAT, "%s: token strings too large", t->path);
    *off = (uint32_t)t->arena.n;
    if (gm_buf_put(&t->arena, s, n) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    return 0;
}

static int dup_str(const char *s, size_t n, char **out, size_t *len)
{
    char *p = malloc(n + 1);
    if (p == NULL)
        return -1;
    memcpy(p, s, n);
    p[n] = 0;
    *out = p;
    *len = n;
    return 0;
}

/*
** What a value of the file is, for the "found ..." of a message: null, true, 1.5, the string "abc" (its
** first 40 bytes, control characters escaped), an array, an object; "none" when the key is absent.
*/
typedef struct shown {
    char s[200]; /* "the string \"", 40 bytes each as \xNN at most, "...\"" */
} shown;

static shown found(const cJSON *v)
{
    shown out = {{0}};
    if (v == NULL) {
        snprintf(out.s, sizeof out.s, "none");
    } else if (cJSON_IsNull(v)) {
        snprintf(out.s, sizeof out.s, "null");
    } else if (cJSON_IsBool(v)) {
        snprintf(out.s, sizeof out.s, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNumber(v)) {
        snprintf(out.s, sizeof out.s, "%.15g", v->valuedouble);
    } else if (cJSON_IsString(v) && v->valuestring != NULL) {
        const unsigned char *p = (const unsigned char *)v->valuestring;
        size_t k = (size_t)snprintf(out.s, sizeof out.s, "the string \"");
        size_t i = 0;
        for (; p[i] && i < 40 && k + 8 < sizeof out.s; i++) {
            if (p[i] < 0x20 || p[i] == 0x7F)
                k += (size_t)snprintf(out.s + k, sizeof out.s - k, "\\x%02x", p[i]);
            else
                out.s[k++] = (char)p[i];
        }
        while (p[i] && k > 0 && (p[i] & 0xC0) == 0x80) { /* cut at a character, not inside one */
            k--;
            i--;
        }
        snprintf(out.s + k, sizeof out.s - k, "%s\"", p[i] ? "..." : "");
    } else {
        snprintf(out.s, sizeof out.s, "%s", cJSON_IsArray(v) ? "an array" : "an object");
    }
    return out;
}

static const char *type_of(const cJSON *o)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) && ty->valuestring != NULL ? ty->valuestring : NULL;
}

/* The one line for a pipeline step that is not an object with a "type" (or is nested too deep). */
static int bad_step(const gm_tokenizer *t, const cJSON *o, const char *where, int depth, gm_status *st)
{
    if (depth > 16)
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected at most 16 nested Sequences, found more", t->path, where);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (cJSON_IsObject(o))
        return gm_fail(st, GM_EFORMAT, "%s: %s.type: expected a string, found %s", t->path, where, found(ty).s);
    return gm_fail(st, GM_EFORMAT, "%s: %s: expected an object with a \"type\", found %s", t->path, where, found(o).s);
}

static int get_bool(const gm_tokenizer *t, const cJSON *o, const char *key, const char *where, int dflt, int *out,
                    gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v == NULL || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return gm_fail(st, GM_EFORMAT, "%s: %s.%s: expected true or false, found %s", t->path, where, key,
                       found(v).s);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_string(const gm_tokenizer *t, const cJSON *o, const char *key, const char *where, const char **out,
                      gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return gm_fail(st, GM_EFORMAT, "%s: %s.%s: expected a string, found %s", t->path, where, key, found(v).s);
    *out = v->valuestring;
    return 0;
}

/* pattern: {"String": s} or {"Regex": s} */
static int get_pattern(const gm_tokenizer *t, const cJSON *o, const char *where, const char **s, int *is_regex,
                       gm_status *st)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *v;

    if ((v = cJSON_GetObjectItemCaseSensitive(p, "String")) != NULL && cJSON_IsString(v)) {
        *s = v->valuestring;
        *is_regex = 0;
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(p, "Regex")) != NULL && cJSON_IsString(v)) {
        *s = v->valuestring;
        *is_regex = 1;
        return 0;
    }
    return gm_fail(st, GM_EFORMAT, "%s: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}, found %s", t->path,
                   where, cJSON_IsObject(p) && p->child ? "an object with another key" : found(p).s);
}

/* -------------------------------------------------------------- normalizer */

static int add_norm(gm_tokenizer *t, const tk_norm *n, gm_status *st)
{
    tk_norm *p = realloc(t->norm, (t->n_norm + 1) * sizeof *p);
    if (p == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    t->norm = p;
    t->norm[t->n_norm++] = *n;
    return 0;
}

static int load_normalizer(gm_tokenizer *t, const cJSON *o, const char *where, int depth, gm_status *st)
{
    const char *ty;
    tk_norm n = {0};

    if (o == NULL || cJSON_IsNull(o))
        return 0;
    if (depth > 16 || (ty = type_of(o)) == NULL)
        return bad_step(t, o, where, depth, st);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers"), *e;
        if (!cJSON_IsArray(list))
            return gm_fail(st, GM_EFORMAT, "%s: %s.normalizers: expected an array, found %s", t->path, where, found(list).s);
        int i = 0;
        cJSON_ArrayForEach(e, list)
        {
            char sub[256]; /* the step's own name in messages: pre_tokenizer.pretokenizers[1] */
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", where, i++);
            if (load_normalizer(t, e, sub, depth + 1, st) != 0)
                return st->code;
        }
        return 0;
    }
    if (strcmp(ty, "NFC") == 0)
        n.kind = TK_NORM_NFC;
    else if (strcmp(ty, "NFD") == 0)
        n.kind = TK_NORM_NFD;
    else if (strcmp(ty, "NFKC") == 0)
        n.kind = TK_NORM_NFKC;
    else if (strcmp(ty, "NFKD") == 0)
        n.kind = TK_NORM_NFKD;
    else if (strcmp(ty, "Prepend") == 0) {
        const char *s = NULL;
        n.kind = TK_NORM_PREPEND;
        if (get_string(t, o, "prepend", where, &s, st) != 0)
            return st->code;
        if (dup_str(s, strlen(s), &n.a, &n.alen) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    } else if (strcmp(ty, "Replace") == 0) {
        const char *pat = NULL, *with = NULL;
        int is_regex = 0;
        n.kind = TK_NORM_REPLACE;
        if (get_pattern(t, o, where, &pat, &is_regex, st) != 0 || get_string(t, o, "content", where, &with, st) != 0)
            return st->code;
        if (is_regex)
            return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: Replace with a Regex pattern is not supported", t->path,
                           where);
        if (dup_str(pat, strlen(pat), &n.a, &n.alen) != 0 || dup_str(with, strlen(with), &n.b, &n.blen) != 0) {
            free(n.a);
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
        }
    } else {
        return gm_fail(st, GM_EUNSUPPORTED,
                       "%s: %s: type '%s' is not supported (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)",
                       t->path, where, ty);
    }
    if (add_norm(t, &n, st) != 0) {
        free(n.a);
        free(n.b);
        return st->code;
    }
    return 0;
}

/* ----------------------------------------------------------- pre-tokenizer */

/*
** Metaspace's settings, as the pre-tokenizer and the decoder of that name
** both read them: "replacement", one character; "prepend_scheme" (always,
** first or never; always when absent); the older "add_prefix_space", whose
** false means never and which the reference refuses beside another scheme;
** "split" (true when absent) where split is not NULL.
*/
static int get_metaspace(const gm_tokenizer *t, const cJSON *o, const char *where, char **rep, size_t *replen,
                         int *prepend, int *split, gm_status *st)
{
    const char *r = NULL, *scheme = "always";
    int prefix = 1;
    size_t adv = 0;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(o, "prepend_scheme");
    if (get_string(t, o, "replacement", where, &r, st) != 0 ||
        get_bool(t, o, "add_prefix_space", where, 1, &prefix, st) != 0 ||
        (split && get_bool(t, o, "split", where, 1, split, st) != 0) ||
        (ps && !cJSON_IsNull(ps) && get_string(t, o, "prepend_scheme", where, &scheme, st) != 0))
        return st->code;
    if (!*r || (gm_utf8_decode(r, strlen(r), &adv), adv != strlen(r)))
        return gm_fail(st, GM_EFORMAT, "%s: %s.replacement: expected one character, found %s", t->path, where,
                       found(cJSON_GetObjectItemCaseSensitive(o, "replacement")).s);
    if (strcmp(scheme, "always") == 0)
        *prepend = TK_PREPEND_ALWAYS;
    else if (strcmp(scheme, "first") == 0)
        *prepend = TK_PREPEND_FIRST;
    else if (strcmp(scheme, "never") == 0)
        *prepend = TK_PREPEND_NEVER;
    else
        return gm_fail(st, GM_EFORMAT, "%s: %s.prepend_scheme: expected always, first or never, found '%s'", t->path,
                       where, scheme);
    if (!prefix && *prepend != TK_PREPEND_NEVER && ps && !cJSON_IsNull(ps))
        return gm_fail(st, GM_EFORMAT, "%s: %s: add_prefix_space false does not match prepend_scheme '%s' (the "
                       "reference refuses the two together): remove add_prefix_space", t->path, where, scheme);
    if (!prefix)
        *prepend = TK_PREPEND_NEVER;
    if (dup_str(r, strlen(r), rep, replen) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    return 0;
}

/* GPT-2's pattern, which ByteLevel applies when use_regex is true. */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* The Split regexes for which encode_mt's cut rule ("\n" + ASCII graphic) is proven safe. */
static const char *const mt_safe_patterns[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

static int add_pre(gm_tokenizer *t, const tk_pre *p, gm_status *st)
{
    tk_pre *v = realloc(t->pre, (t->n_pre + 1) * sizeof *v);
    if (v == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    t->pre = v;
    t->pre[t->n_pre++] = *p;
    return 0;
}

static int escape_literal(const char *s, gm_buf *b)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ' ')) {
            char e[8];
            int k = snprintf(e, sizeof e, "\\x{%X}", c);
            if (gm_buf_put(b, e, (size_t)k) != 0)
                return -1;
        } else if (gm_buf_put(b, s, 1) != 0) {
            return -1;
        }
    }
    return gm_buf_put(b, "", 1);
}

static int load_pre_tokenizer(gm_tokenizer *t, const cJSON *o, const char *where, int depth, int *mt_ok,
                              gm_status *st)
{
    const char *ty;
    tk_pre p = {0};

    if (o == NULL || cJSON_IsNull(o))
        return 0;
    if (depth > 16 || (ty = type_of(o)) == NULL)
        return bad_step(t, o, where, depth, st);
    // ByteLevel maps the text to its alphabet (a space becomes Ġ) and every later step sees that text; here the
    // mapping happens in BPE, after all the steps, so a step after ByteLevel would see the text itself
    if (t->bpe.byte_level && strcmp(ty, "Sequence") != 0)
        return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: expected no step after ByteLevel, found %s: a step there splits the "
                       "byte-level alphabet (Ġ for a space), which is not supported", t->path, where, ty);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers"), *e;
        if (!cJSON_IsArray(list))
            return gm_fail(st, GM_EFORMAT, "%s: %s.pretokenizers: expected an array, found %s", t->path, where, found(list).s);
        int i = 0;
        cJSON_ArrayForEach(e, list)
        {
            char sub[256]; /* the step's own name in messages: pre_tokenizer.pretokenizers[1] */
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", where, i++);
            if (load_pre_tokenizer(t, e, sub, depth + 1, mt_ok, st) != 0)
                return st->code;
        }
        return 0;
    }
    if (strcmp(ty, "ByteLevel") == 0) {
        int use_regex = 1, prefix = 0;
        if (get_bool(t, o, "use_regex", where, 1, &use_regex, st) != 0 ||
            get_bool(t, o, "add_prefix_space", where, 1, &prefix, st) != 0)
            return st->code;
        if (prefix)
            return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: ByteLevel with add_prefix_space true is not supported",
                           t->path, where);
        p.kind = TK_PRE_BYTE_LEVEL;
        p.behavior = TK_SPLIT_ISOLATED;
        t->bpe.byte_level = 1;
        if (use_regex) {
            *mt_ok = 0;
            if (tk_regex_compile(&p.regex, gpt2_pattern, strlen(gpt2_pattern), t->path, where, st) != 0)
                return st->code;
        }
        return add_pre(t, &p, st);
    }
    if (strcmp(ty, "Split") == 0) {
        const char *pat = NULL, *beh = NULL;
        int is_regex = 0, invert = 0;
        gm_buf lit = {0};
        if (get_pattern(t, o, where, &pat, &is_regex, st) != 0 || get_string(t, o, "behavior", where, &beh, st) != 0 ||
            get_bool(t, o, "invert", where, 0, &invert, st) != 0)
            return st->code;
        p.kind = TK_PRE_SPLIT;
        p.invert = invert;
        if (strcmp(beh, "Removed") == 0)
            p.behavior = TK_SPLIT_REMOVED;
        else if (strcmp(beh, "Isolated") == 0)
            p.behavior = TK_SPLIT_ISOLATED;
        else if (strcmp(beh, "MergedWithPrevious") == 0)
            p.behavior = TK_SPLIT_MERGED_WITH_PREVIOUS;
        else if (strcmp(beh, "MergedWithNext") == 0)
            p.behavior = TK_SPLIT_MERGED_WITH_NEXT;
        else if (strcmp(beh, "Contiguous") == 0)
            p.behavior = TK_SPLIT_CONTIGUOUS;
        else
            return gm_fail(st, GM_EFORMAT, "%s: %s.behavior: expected Removed, Isolated, MergedWithPrevious, "
                           "MergedWithNext or Contiguous, found '%s'", t->path, where, beh);
        int safe = 0;
        for (size_t i = 0; i < sizeof mt_safe_patterns / sizeof *mt_safe_patterns; i++)
            if (is_regex && strcmp(pat, mt_safe_patterns[i]) == 0)
                safe = 1;
        if (!safe || invert || p.behavior != TK_SPLIT_ISOLATED)
            *mt_ok = 0;
        /* the pattern as written, for the message of a match the regex engine gives up on */
        p.is_regex = is_regex;
        if ((p.pattern = strdup(pat)) == NULL)
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
        if (!is_regex) {
            if (escape_literal(pat, &lit) != 0) {
                free(p.pattern);
                return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
            }
            pat = lit.p;
        }
        int rc = tk_regex_compile(&p.regex, pat, strlen(pat), t->path, where, st);
        free(lit.p);
        if (rc != 0) {
            free(p.pattern);
            return rc;
        }
        if (add_pre(t, &p, st) != 0) {
            tk_regex_free(p.regex);
            free(p.pattern);
            return st->code;
        }
        return 0;
    }
    if (strcmp(ty, "Metaspace") == 0) {
        for (size_t i = 0; i < t->n_pre; i++)
            if (t->pre[i].kind == TK_PRE_METASPACE)
                return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: a second Metaspace step is not supported", t->path, where);
        p.kind = TK_PRE_METASPACE;
        if (get_metaspace(t, o, where, &p.rep, &p.replen, &p.prepend, &p.split, st) != 0)
            return st->code;
        *mt_ok = 0; /* "first" holds for the text's first piece only, not for the first of each thread's part */
        if (add_pre(t, &p, st) != 0) {
            free(p.rep);
            return st->code;
        }
        return 0;
    }
    return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: type '%s' is not supported (supported: ByteLevel, Split, Metaspace, "
                   "Sequence)", t->path, where, ty);
}

/* ---------------------------------------------------------- post-processor */

static int put_ids(gm_tokenizer *t, int32_t **v, size_t *n, const int32_t *ids, size_t k, int front, gm_status *st)
{
    int32_t *p = realloc(*v, (*n + k + 1) * sizeof *p);
    if (p == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    if (k > 0 && front) {
        memmove(p + k, p, *n * sizeof *p);
        memcpy(p, ids, k * sizeof *p);
    } else if (k > 0) {
        memcpy(p + *n, ids, k * sizeof *p);
    }
    *v = p;
    *n += k;
    return 0;
}

static int template_ids(gm_tokenizer *t, const cJSON *o, const cJSON *item, int32_t *buf, size_t cap, size_t *k,
                        const char *where, gm_status *st)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(item, "SpecialToken");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
    const cJSON *table = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    const cJSON *entry, *ids, *e;

    if (!cJSON_IsString(name))
        return gm_fail(st, GM_EFORMAT, "%s: %s.single: expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}, "
                       "found %s", t->path, where, sp ? found(name).s : found(item).s);
    entry = cJSON_GetObjectItemCaseSensitive(table, name->valuestring);
    ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
    if (!cJSON_IsArray(ids))
        return gm_fail(st, GM_EFORMAT, "%s: %s.special_tokens: no entry with ids for '%s'", t->path, where,
                       name->valuestring);
    *k = 0;
    cJSON_ArrayForEach(e, ids)
    {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (d < 0 || d > INT32_MAX || d != (double)(int32_t)d)
            return gm_fail(st, GM_EFORMAT, "%s: %s.special_tokens['%s'].ids: expected non-negative integers, found %s",
                           t->path, where, name->valuestring, found(e).s);
        if (*k == cap)
            return gm_fail(st, GM_EFORMAT, "%s: %s.special_tokens['%s'].ids: more than %zu ids", t->path, where,
                           name->valuestring, cap);
        buf[(*k)++] = (int32_t)d;
    }
    return 0;
}

static int pair_id(gm_tokenizer *t, const cJSON *o, const char *key, const char *where, int32_t *id, gm_status *st)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const cJSON *n = cJSON_GetArrayItem(v, 1);
    if (!cJSON_IsArray(v) || !cJSON_IsNumber(n) || n->valuedouble < 0 || n->valuedouble > INT32_MAX)
        return gm_fail(st, GM_EFORMAT, "%s: %s.%s: expected [\"token\", id], found %s", t->path, where, key,
                       cJSON_IsArray(v) ? "another array" : found(v).s);
    *id = (int32_t)n->valuedouble;
    return 0;
}

static int load_post_processor(gm_tokenizer *t, const cJSON *o, const char *where, int depth, gm_status *st)
{
    const char *ty;

    if (o == NULL || cJSON_IsNull(o))
        return 0;
    if (depth > 16 || (ty = type_of(o)) == NULL)
        return bad_step(t, o, where, depth, st);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors"), *e;
        if (!cJSON_IsArray(list))
            return gm_fail(st, GM_EFORMAT, "%s: %s.processors: expected an array, found %s", t->path, where, found(list).s);
        int i = 0;
        cJSON_ArrayForEach(e, list)
        {
            char sub[256]; /* the step's own name in messages: pre_tokenizer.pretokenizers[1] */
            snprintf(sub, sizeof sub, "%s.processors[%d]", where, i++);
            if (load_post_processor(t, e, sub, depth + 1, st) != 0)
                return st->code;
        }
        return 0;
    }
    if (strcmp(ty, "ByteLevel") == 0)
        return 0; // only trims offsets
    if (strcmp(ty, "TemplateProcessing") == 0) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single"), *item;
        int32_t *before = NULL, *after = NULL;
        size_t nb = 0, na = 0;
        int seen = 0, rc = 0;
        if (!cJSON_IsArray(single))
            return gm_fail(st, GM_EFORMAT, "%s: %s.single: expected an array, found %s", t->path, where, found(single).s);
        cJSON_ArrayForEach(item, single)
        {
            int32_t buf[64];
            size_t k = 0;
            if (cJSON_GetObjectItemCaseSensitive(item, "Sequence") != NULL) {
                seen = 1;
                continue;
            }
            if ((rc = template_ids(t, o, item, buf, 64, &k, where, st)) != 0)
                goto tp_out;
            if ((rc = put_ids(t, seen ? &after : &before, seen ? &na : &nb, buf, k, 0, st)) != 0)
                goto tp_out;
        }
        if (!seen) {
            rc = gm_fail(st, GM_EFORMAT, "%s: %s.single: no {\"Sequence\": ...} item", t->path, where);
            goto tp_out;
        }
        // a later processor wraps what the earlier ones produced
        if ((rc = put_ids(t, &t->pp_before, &t->n_before, before, nb, 1, st)) == 0)
            rc = put_ids(t, &t->pp_after, &t->n_after, after, na, 0, st);
    tp_out:
        free(before);
        free(after);
        return rc;
    }
    if (strcmp(ty, "BertProcessing") == 0 || strcmp(ty, "RobertaProcessing") == 0) {
        int32_t cls = 0, sep = 0;
        if (pair_id(t, o, "cls", where, &cls, st) != 0 || pair_id(t, o, "sep", where, &sep, st) != 0)
            return st->code;
        if (put_ids(t, &t->pp_before, &t->n_before, &cls, 1, 1, st) != 0)
            return st->code;
        return put_ids(t, &t->pp_after, &t->n_after, &sep, 1, 0, st);
    }
    return gm_fail(st, GM_EUNSUPPORTED,
                   "%s: %s: type '%s' is not supported (supported: TemplateProcessing, ByteLevel, BertProcessing, "
                   "RobertaProcessing, Sequence)",
                   t->path, where, ty);
}

/* ----------------------------------------------------------------- decoder */

static int add_dec(gm_tokenizer *t, const tk_dec *d, gm_status *st)
{
    tk_dec *v = realloc(t->dec, (t->n_dec + 1) * sizeof *v);
    if (v == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    t->dec = v;
    t->dec[t->n_dec++] = *d;
    return 0;
}

static int load_decoder(gm_tokenizer *t, const cJSON *o, const char *where, int depth, gm_status *st)
{
    const char *ty;
    tk_dec d = {0};

    if (o == NULL || cJSON_IsNull(o))
        return 0;
    t->has_decoder = 1;
    if (depth > 16 || (ty = type_of(o)) == NULL)
        return bad_step(t, o, where, depth, st);
    if (strcmp(ty, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders"), *e;
        if (!cJSON_IsArray(list))
            return gm_fail(st, GM_EFORMAT, "%s: %s.decoders: expected an array, found %s", t->path, where, found(list).s);
        int i = 0;
        cJSON_ArrayForEach(e, list)
        {
            char sub[256]; /* the step's own name in messages: pre_tokenizer.pretokenizers[1] */
            snprintf(sub, sizeof sub, "%s.decoders[%d]", where, i++);
            if (load_decoder(t, e, sub, depth + 1, st) != 0)
                return st->code;
        }
        return 0;
    }
    if (strcmp(ty, "ByteLevel") == 0)
        d.kind = TK_DEC_BYTE_LEVEL;
    else if (strcmp(ty, "ByteFallback") == 0)
        d.kind = TK_DEC_BYTE_FALLBACK;
    else if (strcmp(ty, "Fuse") == 0)
        d.kind = TK_DEC_FUSE;
    else if (strcmp(ty, "Replace") == 0) {
        const char *pat = NULL, *with = NULL;
        int is_regex = 0;
        d.kind = TK_DEC_REPLACE;
        if (get_pattern(t, o, where, &pat, &is_regex, st) != 0 || get_string(t, o, "content", where, &with, st) != 0)
            return st->code;
        if (is_regex)
            return gm_fail(st, GM_EUNSUPPORTED, "%s: %s: Replace with a Regex pattern is not supported", t->path,
                           where);
        if (dup_str(pat, strlen(pat), &d.a, &d.alen) != 0 || dup_str(with, strlen(with), &d.b, &d.blen) != 0) {
            free(d.a);
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
        }
    } else if (strcmp(ty, "Strip") == 0) {
        const char *c = NULL;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "start"), *b = cJSON_GetObjectItemCaseSensitive(o, "stop");
        d.kind = TK_DEC_STRIP;
        if (get_string(t, o, "content", where, &c, st) != 0)
            return st->code;
        for (int k = 0; k < 2; k++) {
            const cJSON *v = k ? b : a;
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (int)v->valuedouble)
                return gm_fail(st, GM_EFORMAT, "%s: %s.%s: expected a whole number from 0 to 1000000, found %s", t->path,
                               where, k ? "stop" : "start", found(v).s);
        }
        d.start = (int)a->valuedouble;
        d.stop = (int)b->valuedouble;
        if (dup_str(c, strlen(c), &d.a, &d.alen) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    } else if (strcmp(ty, "Metaspace") == 0) {
        d.kind = TK_DEC_METASPACE;
        if (get_metaspace(t, o, where, &d.a, &d.alen, &d.start, NULL, st) != 0)
            return st->code;
    } else {
        return gm_fail(st, GM_EUNSUPPORTED,
                       "%s: %s: type '%s' is not supported (supported: ByteLevel, ByteFallback, Fuse, Replace, Strip, "
                       "Metaspace, Sequence)",
                       t->path, where, ty);
    }
    if (add_dec(t, &d, st) != 0) {
        free(d.a);
        free(d.b);
        return st->code;
    }
    return 0;
}

/* ------------------------------------------------------------ added tokens */

static int load_added(gm_tokenizer *t, const cJSON *list, gm_status *st)
{
    const cJSON *e;
    size_t i = 0, n;

    if (list == NULL || cJSON_IsNull(list))
        return 0;
    if (!cJSON_IsArray(list))
        return gm_fail(st, GM_EFORMAT, "%s: added_tokens: expected an array, found %s", t->path, found(list).s);
    n = (size_t)cJSON_GetArraySize(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (t->added == NULL || tk_str_map_init(&t->added_map, n + 1) != 0)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    cJSON_ArrayForEach(e, list)
    {
        tk_added *a = &t->added[i];
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        int special = 0, lstrip = 0, rstrip = 0, single = 0, normalized = 0;
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > TK_MAX_ID ||
            id->valuedouble != (double)(int32_t)id->valuedouble)
            return cJSON_IsNumber(id) ? gm_fail(st, GM_EFORMAT, "%s: %s.id: expected an integer from 0 to %d, found "
                                                "%.17g", t->path, where, TK_MAX_ID, id->valuedouble)
                                      : gm_fail(st, GM_EFORMAT, "%s: %s.id: expected an integer from 0 to %d, found "
                                                "%s", t->path, where, TK_MAX_ID, found(id).s);
        if (!cJSON_IsString(c) || c->valuestring == NULL || c->valuestring[0] == 0)
            return gm_fail(st, GM_EFORMAT, "%s: %s.content: expected a non-empty string, found %s", t->path, where,
                           found(c).s);
        if (get_bool(t, e, "special", where, 0, &special, st) != 0 || get_bool(t, e, "lstrip", where, 0, &lstrip, st) ||
            get_bool(t, e, "rstrip", where, 0, &rstrip, st) || get_bool(t, e, "single_word", where, 0, &single, st) ||
            get_bool(t, e, "normalized", where, !special, &normalized, st))
            return st->code;
        a->id = (int32_t)id->valuedouble;
        if (arena_add(t, c->valuestring, strlen(c->valuestring), &a->off, st) != 0)
            return st->code;
        a->len = (uint32_t)strlen(c->valuestring);
        a->special = (unsigned)special;
        a->lstrip = (unsigned)lstrip;
        a->rstrip = (unsigned)rstrip;
        a->single_word = (unsigned)single;
        a->normalized = (unsigned)normalized;
        if (tk_str_map_put(&t->added_map, t->arena.p, a->off, a->len, a->id) != 0)
            return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
        if (a->id + 1 > t->n_ids)
            t->n_ids = a->id + 1;
        i++;
    }
    t->n_added = i;
    // the reference's 0.23.2 id mix-up (gm_tokenizer_set_reference_quirks): within each
    // matcher (normalized false / true), the j-th non-special token takes the id of the
    // j-th entry of "special tokens, then the others", in file order
    int32_t *full = malloc((i ? i : 1) * sizeof *full);
    if (full == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    for (unsigned norm = 0; norm < 2; norm++) {
        size_t m = 0, j = 0;
        for (unsigned pass = 0; pass < 2; pass++)
            for (size_t k = 0; k < i; k++)
                if (t->added[k].normalized == norm && t->added[k].special == (pass == 0))
                    full[m++] = t->added[k].id;
        for (size_t k = 0; k < i; k++)
            if (t->added[k].normalized == norm && !t->added[k].special)
                t->added[k].quirk_id = full[j++];
    }
    free(full);
    return 0;
}

static const tk_added *matcher_token(const gm_tokenizer *t, const tk_matcher *m, size_t k, const char **s, size_t *n)
{
    const tk_added *a = &t->added[m->order[k]];
    int norm = m == &t->match_norm;
    *s = t->arena.p + (norm ? a->noff : a->off);
    *n = norm ? a->nlen : a->len;
    return a;
}

static int by_first_then_longest(const void *x, const void *y, void *ctx)
{
    const gm_tokenizer *t = ctx;
    const char *a, *b;
    size_t na, nb;
    size_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    const tk_added *ta = &t->added[i], *tb = &t->added[j];
    int norm = ta->normalized;

    a = t->arena.p + (norm ? ta->noff : ta->off);
    b = t->arena.p + (norm ? tb->noff : tb->off);
    na = norm ? ta->nlen : ta->len;
    nb = norm ? tb->nlen : tb->len;
    if ((unsigned char)a[0] != (unsigned char)b[0])
        return (unsigned char)a[0] < (unsigned char)b[0] ? -1 : 1;
    if (na != nb)
        return na > nb ? -1 : 1;
    // equal first byte and length: the reference's order (special tokens, then the others, by position)
    if (ta->special != tb->special)
        return ta->special ? -1 : 1;
    return i < j ? -1 : i > j ? 1 : 0;
}

/* Index the added tokens with normalized == norm by first byte, longest first (leftmost-longest matching). */
static int build_matcher(gm_tokenizer *t, tk_matcher *m, int norm, gm_status *st)
{
    gm_buf nb = {0};
    size_t k = 0;

    m->order = malloc((t->n_added ? t->n_added : 1) * sizeof *m->order);
    if (m->order == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    for (size_t i = 0; i < t->n_added; i++) {
        tk_added *a = &t->added[i];
        if ((int)a->normalized != norm)
            continue;
        if (norm) {
            // the reference matches normalized tokens by their normalized content
            if (tk_normalize(t->norm, t->n_norm, t->arena.p + a->off, a->len, &nb) != 0) {
                free(nb.p);
                return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
            }
            if (nb.n == 0)
                continue;
            if (arena_add(t, nb.p, nb.n, &a->noff, st) != 0) {
                free(nb.p);
                return st->code;
            }
            a->nlen = (uint32_t)nb.n;
        }
        m->order[k++] = (uint32_t)i;
    }
    free(nb.p);
    m->count = k;
    qsort_r(m->order, k, sizeof *m->order, by_first_then_longest, t);
    size_t j = 0;
    for (int c = 0; c < 256; c++) {
        m->first[c] = (uint32_t)j;
        while (j < k) {
            const char *s;
            size_t n;
            matcher_token(t, m, j, &s, &n);
            if ((unsigned char)s[0] != c)
                break;
            j++;
        }
    }
    m->first[256] = (uint32_t)k;
    return 0;
}

/* ------------------------------------------------------------------- model */

typedef struct span {
    const char *p, *end;
} span;

enum { M_TYPE, M_VOCAB, M_MERGES, M_UNK, M_FUSE, M_FALLBACK, M_IGNORE, M_PREFIX, M_SUFFIX, M_DROPOUT, M_NKEYS };
static const char *const model_keys[M_NKEYS] = {"type", "vocab", "merges", "unk_token", "fuse_unk", "byte_fallback",
                                                "ignore_merges", "continuing_subword_prefix", "end_of_word_suffix",
                                                "dropout"};

/*
** A hook may consume the value of key index k at vs itself: it returns 1 with
** *after set past the value, 0 to let the value be skipped, or an error code.
*/
typedef int (*value_hook)(gm_tokenizer *t, size_t k, const char *base, const char *vs, const char *end,
                          const char **after, gm_status *st);

/* Read the keys of the object at p: each value's span, checked for duplicates. */
static int scan_object(gm_tokenizer *t, const char *where, const char *base, const char *p, const char *end,
                       const char *const *keys, span *spans, size_t nkeys, value_hook hook, const char **after,
                       gm_status *st)
{
    const char *err = NULL;
    gm_buf key = {0};
    int rc = 0;

    p = gm_json_ws(p, end);
    if (p >= end || *p != '{') {
        int n = 0; /* what is there instead: up to 24 printable ASCII bytes */
        while (p + n < end && n < 24 && p[n] >= 0x20 && p[n] < 0x7F)
            n++;
        rc = gm_fail(st, GM_EFORMAT, "%s: %s%s%s at byte %zu%s%.*s%s", t->path, where ? where : "", where ? ": " : "",
                     p >= end ? "truncated JSON" : "expected a JSON object", (size_t)(p - base),
                     p >= end ? "" : ", found '", n, p, p >= end ? "" : p + n < end ? "...'" : "'");
        goto out;
    }
    p = gm_json_ws(p + 1, end);
    if (p < end && *p == '}') {
        *after = p + 1;
        goto out;
    }
    for (;;) {
        key.n = 0;
        if (gm_json_string(p, end, &key, &p, &err) != 0)
            goto bad;
        p = gm_json_ws(p, end);
        if (p >= end || *p != ':') {
            err = p >= end ? "truncated" : "expected ':'";
            goto bad;
        }
        p = gm_json_ws(p + 1, end);
        const char *vs = p;
        size_t k = nkeys;
        for (size_t i = 0; i < nkeys; i++)
            if (strlen(keys[i]) == key.n && memcmp(keys[i], key.p, key.n) == 0)
                k = i;
        if (k < nkeys && spans[k].p != NULL) {
            rc = gm_fail(st, GM_EFORMAT, "%s: %s%sduplicate key '%s'", t->path, where ? where : "", where ? ": " : "",
                         keys[k]);
            goto out;
        }
        int h = k < nkeys && hook != NULL ? hook(t, k, base, vs, end, &p, st) : 0;
        if (h < 0) {
            rc = st->code;
            goto out;
        }
        if (h == 0 && gm_json_skip(p, end, &p, &err) != 0) {
            if (gm_buf_put(&key, "", 1) != 0) {
                rc = gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
                goto out;
            }
            rc = gm_fail(st, GM_EFORMAT, "%s: %s%s%.64s: malformed JSON (%s) at byte %zu", t->path, where ? where : "",
                         where ? "." : "", key.p, err, (size_t)(p - base));
            goto out;
        }
        if (k < nkeys) {
            spans[k].p = vs;
            spans[k].end = p;
        }
        p = gm_json_ws(p, end);
        if (p < end && *p == ',') {
            p = gm_json_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            break;
        err = p >= end ? "truncated" : "expected ',' or '}'";
        goto bad;
    }
    *after = p + 1;
    goto out;
bad:
    rc = gm_fail(st, GM_EFORMAT, "%s: %s%smalformed JSON (%s) at byte %zu", t->path, where ? where : "", where ? ": " : "",
                 err, (size_t)(p - base));
out:
    free(key.p);
    return rc;
}

static cJSON *parse_span(const span *s)
{
    if (s->p == NULL)
        return NULL;
    return cJSON_ParseWithLength(s->p, (size_t)(s->end - s->p));
}

/* Inside "model": check the type early, read vocab (and merges after it) in place. */
static int model_hook(gm_tokenizer *t, size_t k, const char *base, const char *vs, const char *end,
                      const char **after, gm_status *st)
{
    if (k == M_TYPE) {
        gm_buf ty = {0};
        const char *err = NULL, *a;
        int rc = 0;
        if (gm_json_string(vs, end, &ty, &a, &err) == 0 && gm_buf_put(&ty, "", 1) == 0 && strcmp(ty.p, "BPE") != 0)
            rc = gm_fail(st, GM_EUNSUPPORTED, "%s: model.type: '%.64s' is not supported (supported: BPE)", t->path,
                         ty.p);
        free(ty.p);
        return rc != 0 ? -1 : 0; // the value is checked again, and skipped, by the caller
    }
    if (k == M_VOCAB)
        return tk_read_vocab(t->path, base, vs, end, after, &t->arena, &t->bpe.vocab, &t->n_ids, st) != 0 ? -1 : 1;
    if (k == M_MERGES && t->bpe.vocab.slots != NULL)
        return tk_read_merges(t->path, base, vs, end, after, &t->bpe.vocab, t->arena.p, &t->bpe.merges, st) != 0 ? -1 : 1;
    return 0;
}

static int load_model(gm_tokenizer *t, const char *base, const char *p, const char *end, const char **after,
                      gm_status *st)
{
    span s[M_NKEYS] = {0};
    cJSON *small[M_NKEYS] = {0};
    int rc;

    if ((rc = scan_object(t, "model", base, p, end, model_keys, s, M_NKEYS, model_hook, after, st)) != 0)
        return rc;
    for (int k = 0; k < M_NKEYS; k++)
        if (k != M_VOCAB && k != M_MERGES && s[k].p != NULL && (small[k] = parse_span(&s[k])) == NULL) {
            rc = gm_fail(st, GM_ENOMEM, "%s: model.%s: out of memory", t->path, model_keys[k]);
            goto out;
        }
    if (small[M_TYPE] != NULL) {
        if (!cJSON_IsString(small[M_TYPE])) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.type: expected a string, found %s", t->path, found(small[M_TYPE]).s);
            goto out;
        }
        if (strcmp(small[M_TYPE]->valuestring, "BPE") != 0) {
            rc = gm_fail(st, GM_EUNSUPPORTED, "%s: model.type: '%s' is not supported (supported: BPE)", t->path,
                         small[M_TYPE]->valuestring);
            goto out;
        }
    }
    if (s[M_VOCAB].p == NULL || s[M_MERGES].p == NULL) {
        rc = gm_fail(st, GM_EMISSING, "%s: model: missing '%s'", t->path, s[M_VOCAB].p == NULL ? "vocab" : "merges");
        goto out;
    }
    for (int k = M_PREFIX; k <= M_SUFFIX; k++)
        if (small[k] != NULL && !cJSON_IsNull(small[k]) &&
            !(cJSON_IsString(small[k]) && small[k]->valuestring[0] == 0)) {
            rc = gm_fail(st, GM_EUNSUPPORTED, "%s: model.%s: a non-empty value is not supported", t->path,
                         model_keys[k]);
            goto out;
        }
    if (small[M_DROPOUT] != NULL && !cJSON_IsNull(small[M_DROPOUT])) {
        // BPE dropout: the reference skips each merge at random with this probability, on every encode
        const cJSON *d = small[M_DROPOUT];
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= 1)) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.dropout: expected null or a number from 0 to 1, found %s", t->path,
                         found(d).s);
            goto out;
        }
        if (d->valuedouble > 0) {
            rc = gm_fail(st, GM_EUNSUPPORTED, "%s: model.dropout: expected null or 0, found %g: BPE dropout (merges "
                         "skipped at random, for training) is not supported", t->path, d->valuedouble);
            goto out;
        }
    }
    for (int k = M_FUSE; k <= M_IGNORE; k++) {
        int v = 0;
        if (small[k] != NULL && !cJSON_IsNull(small[k])) {
            if (!cJSON_IsBool(small[k])) {
                rc = gm_fail(st, GM_EFORMAT, "%s: model.%s: expected true or false, found %s", t->path, model_keys[k],
                             found(small[k]).s);
                goto out;
            }
            v = cJSON_IsTrue(small[k]);
        }
        if (k == M_FUSE)
            t->bpe.fuse_unk = v;
        else if (k == M_FALLBACK)
            t->bpe.byte_fallback = v;
        else
            t->bpe.ignore_merges = v;
    }
    if (t->bpe.merges.slots == NULL) {
        // merges came before vocab in the file
        const char *a;
        if ((rc = tk_read_merges(t->path, base, s[M_MERGES].p, s[M_MERGES].end, &a, &t->bpe.vocab, t->arena.p,
                                 &t->bpe.merges, st)) != 0)
            goto out;
    }
    t->bpe.unk_id = -1;
    if (small[M_UNK] != NULL && !cJSON_IsNull(small[M_UNK])) {
        if (!cJSON_IsString(small[M_UNK])) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.unk_token: expected a string, found %s", t->path,
                         found(small[M_UNK]).s);
            goto out;
        }
        const char *unk = small[M_UNK]->valuestring;
        t->bpe.unk_id = tk_str_map_get(&t->bpe.vocab, t->arena.p, unk, strlen(unk));
        if (t->bpe.unk_id < 0) {
            rc = gm_fail(st, GM_EFORMAT, "%s: model.unk_token: '%s' is not in model.vocab", t->path,
                         small[M_UNK]->valuestring);
            goto out;
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->bpe.fallback_ids[b] = t->bpe.byte_fallback ? tk_str_map_get(&t->bpe.vocab, t->arena.p, name, 6) : -1;
    }
out:
    for (int k = 0; k < M_NKEYS; k++)
        cJSON_Delete(small[k]);
    return rc;
}

/* ------------------------------------------------------------------ config */

static int32_t config_token(const gm_tokenizer *t, const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return -1;
    return gm_tokenizer_token_id(t, v->valuestring);
}

static int load_config(gm_tokenizer *t, gm_status *st)
{
    const char *slash = strrchr(t->path, '/');
    size_t dir = slash ? (size_t)(slash - t->path + 1) : 0;
    char *path = malloc(dir + sizeof "tokenizer_config.json");
    char *buf = NULL;
    size_t len;
    cJSON *cfg = NULL;
    int rc = 0;

    t->eos_id = t->bos_id = -1;
    if (path == NULL)
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", t->path);
    memcpy(path, t->path, dir);
    memcpy(path + dir, "tokenizer_config.json", sizeof "tokenizer_config.json");
    struct stat sb; // optional; where it is, gm_read_file holds it to a regular file (a FIFO's open would block)
    if (stat(path, &sb) != 0)
        goto out;
    if ((rc = gm_read_file(path, TK_MAX_FILE, &buf, &len, st)) != 0)
        goto out;
    const char *end = NULL;
    cfg = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (cfg == NULL || !cJSON_IsObject(cfg)) {
        rc = gm_fail(st, GM_EFORMAT, "%s: malformed JSON%s at byte %zu", path, cfg ? " (expected an object)" : "",
                     end ? (size_t)(end - buf) : (size_t)0);
        goto out;
    }
    t->eos_id = config_token(t, cfg, "eos_token");
    t->bos_id = config_token(t, cfg, "bos_token");
out:
    cJSON_Delete(cfg);
    free(buf);
    free(path);
    return rc;
}

/* -------------------------------------------------------------------- load */

enum { K_MODEL, K_ADDED, K_NORM, K_PRE, K_POST, K_DEC, K_NKEYS };
static const char *const top_keys[K_NKEYS] = {"model", "added_tokens", "normalizer", "pre_tokenizer",
                                              "post_processor", "decoder"};

static int top_hook(gm_tokenizer *t, size_t k, const char *base, const char *vs, const char *end, const char **after,
                    gm_status *st)
{
    if (k != K_MODEL)
        return 0;
    return load_model(t, base, vs, end, after, st) != 0 ? -1 : 1;
}

int gm_tokenizer_load(gm_tokenizer **out, const char *path, gm_status *st)
{
    GM_STATUS_OR_LOCAL(st);
    gm_tokenizer *t = calloc(1, sizeof *t);
    span s[K_NKEYS] = {0};
    cJSON *j[K_NKEYS] = {0};
    char *buf = NULL;
    size_t len = 0;
    int rc = 0, mt_ok = 1;

    *out = NULL;
    // the arena gets its buffer now: every token string is arena.p + offset, and a
    // tokenizer whose strings are all empty must not offset a NULL pointer
    if (t == NULL || (t->path = strdup(path)) == NULL || gm_buf_reserve(&t->arena, 1) != 0) {
        if (t != NULL)
            free(t->path);
        free(t);
        return gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
    }
    t->bpe.unk_id = t->eos_id = t->bos_id = -1;
    if ((rc = gm_read_file(path, TK_MAX_FILE, &buf, &len, st)) != 0)
        goto out;
    // a clone without git-lfs leaves the pointer file where tokenizer.json (in LFS on the Hub) should be
    static const char lfs[] = "version https://git-lfs.github.com/spec/";
    if (len >= sizeof lfs - 1 && memcmp(buf, lfs, sizeof lfs - 1) == 0) {
        rc = gm_fail(st, GM_EFORMAT, "%s: expected tokenizer.json, found a Git LFS pointer file (%zu bytes): the file "
                     "itself was never fetched; run git lfs pull in that clone, or gen-model download ORG/NAME", path, len);
        goto out;
    }
    const char *after = NULL;
    if ((rc = scan_object(t, NULL, buf, buf, buf + len, top_keys, s, K_NKEYS, top_hook, &after, st)) != 0)
        goto out;
    {
        // only whitespace may follow the top-level object
        after = gm_json_ws(after, buf + len);
        if (after != buf + len) {
            rc = gm_fail(st, GM_EFORMAT, "%s: unexpected data after the JSON object at byte %zu", path,
                         (size_t)(after - buf));
            goto out;
        }
    }
    if (s[K_MODEL].p == NULL) {
        rc = gm_fail(st, GM_EMISSING, "%s: missing 'model'", path);
        goto out;
    }
    for (int k = K_ADDED; k < K_NKEYS; k++)
        if (s[k].p != NULL && (j[k] = parse_span(&s[k])) == NULL) {
            rc = gm_fail(st, GM_ENOMEM, "%s: %s: out of memory", path, top_keys[k]);
            goto out;
        }
    if ((rc = load_added(t, j[K_ADDED], st)) != 0)
        goto out;
    // id -> string: the vocab, then added tokens (which win, as in the reference's id_to_token)
    t->id_off = malloc((size_t)(t->n_ids ? t->n_ids : 1) * sizeof *t->id_off);
    t->id_len = malloc((size_t)(t->n_ids ? t->n_ids : 1) * sizeof *t->id_len);
    t->id_flags = calloc((size_t)(t->n_ids ? t->n_ids : 1), 1);
    if (t->id_off == NULL || t->id_len == NULL || t->id_flags == NULL) {
        rc = gm_fail(st, GM_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    for (int32_t i = 0; i < t->n_ids; i++)
        t->id_off[i] = UINT32_MAX;
    for (size_t i = 0; i < t->bpe.vocab.cap; i++) {
        const tk_str_slot *e = &t->bpe.vocab.slots[i];
        if (e->len != UINT32_MAX) {
            t->id_off[e->id] = e->off;
            t->id_len[e->id] = e->len;
        }
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const tk_added *a = &t->added[i];
        t->id_off[a->id] = a->off;
        t->id_len[a->id] = a->len;
        t->id_flags[a->id] = (uint8_t)(TK_ID_ADDED | (a->special ? TK_ID_SPECIAL : 0));
    }
    if ((rc = load_normalizer(t, j[K_NORM], "normalizer", 0, st)) != 0 ||
        (rc = load_pre_tokenizer(t, j[K_PRE], "pre_tokenizer", 0, &mt_ok, st)) != 0 ||
        (rc = load_post_processor(t, j[K_POST], "post_processor", 0, st)) != 0 ||
        (rc = load_decoder(t, j[K_DEC], "decoder", 0, st)) != 0)
        goto out;
    for (int b = 0; b < 256; b++) {
        char u[2];
        size_t n = tk_byte_char((unsigned char)b, u);
        t->bpe.byte_ids[b] = tk_str_map_get(&t->bpe.vocab, t->arena.p, u, n);
    }
    if ((rc = build_matcher(t, &t->match_raw, 0, st)) != 0 || (rc = build_matcher(t, &t->match_norm, 1, st)) != 0)
        goto out;
    // encode_mt's cut is safe for the known Split regexes when no added token
    // spans a newline and the normalizer is a Unicode form (or none)
    t->mt_safe = mt_ok && t->bpe.byte_level && t->n_pre > 0;
    for (size_t i = 0; i < t->n_norm; i++)
        if (t->norm[i].kind == TK_NORM_PREPEND || t->norm[i].kind == TK_NORM_REPLACE)
            t->mt_safe = 0;
    for (size_t i = 0; i < t->n_added; i++)
        if (memchr(t->arena.p + t->added[i].off, '\n', t->added[i].len) != NULL || t->added[i].lstrip ||
            t->added[i].rstrip || t->added[i].single_word)
            t->mt_safe = 0;
    if ((rc = load_config(t, st)) != 0)
        goto out;
out:
    for (int k = 0; k < K_NKEYS; k++)
        cJSON_Delete(j[k]);
    free(buf);
    if (rc != 0) {
        gm_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void gm_tokenizer_free(gm_tokenizer *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    for (size_t i = 0; i < t->n_pre; i++) {
        tk_regex_free(t->pre[i].regex);
        free(t->pre[i].pattern);
        free(t->pre[i].rep);
    }
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    free(t->norm);
    free(t->pre);
    free(t->dec);
    free(t->pp_before);
    free(t->pp_after);
    free(t->added);
    free(t->match_raw.order);
    free(t->match_norm.order);
    tk_str_map_free(&t->bpe.vocab);
    tk_str_map_free(&t->added_map);
    tk_pair_map_free(&t->bpe.merges);
    free(t->id_off);
    free(t->id_len);
    free(t->id_flags);
    free(t->arena.p);
    free(t->path);
    free(t);
}

void gm_tokenizer_set_reference_quirks(gm_tokenizer *t, int on)
{
    t->quirks = on != 0;
}

size_t gm_tokenizer_memory(const gm_tokenizer *t)
{
    size_t n = sizeof *t + t->arena.cap + (size_t)t->n_ids * (2 * sizeof(uint32_t) + 1);
    n += t->bpe.vocab.cap * sizeof(tk_str_slot) + t->added_map.cap * sizeof(tk_str_slot);
    n += t->bpe.merges.cap * sizeof(tk_pair_slot) + t->n_added * (sizeof(tk_added) + 2 * sizeof(uint32_t));
    return n;
}

int gm_tokenizer_is_added(const gm_tokenizer *t, int32_t id)
{
    return t != NULL && id >= 0 && id < t->n_ids && (t->id_flags[id] & TK_ID_ADDED) != 0;
}

int gm_tokenizer_is_special(const gm_tokenizer *t, int32_t id)
{
    return t != NULL && id >= 0 && id < t->n_ids && (t->id_flags[id] & TK_ID_SPECIAL) != 0;
}

int32_t gm_tokenizer_vocab_size(const gm_tokenizer *t)
{
    return t ? t->n_ids : 0;
}

int32_t gm_tokenizer_token_id(const gm_tokenizer *t, const char *token)
{
    size_t n = strlen(token);
    int32_t id = tk_str_map_get(&t->added_map, t->arena.p, token, n);
    return id >= 0 ? id : tk_str_map_get(&t->bpe.vocab, t->arena.p, token, n);
}

const char *gm_tokenizer_token(const gm_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_ids || t->id_off[id] == UINT32_MAX)
        return NULL;
    *len = t->id_len[id];
    return t->arena.p + t->id_off[id];
}

int32_t gm_tokenizer_eos_id(const gm_tokenizer *t)
{
    return t->eos_id;
}

int32_t gm_tokenizer_bos_id(const gm_tokenizer *t)
{
    return t->bos_id;
}

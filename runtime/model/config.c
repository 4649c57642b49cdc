/*
** gm_config: an independent C reader of config.json (see gm/config.h).
**
** cJSON parses the text, but it turns every number into a double, so
** `"hidden_size": 896.0` and `896` look alike. To enforce "integer fields are
** JSON integers" we go back to the number's text: cJSON keeps an object's
** members (and an array's elements) in document order, so the value of the
** i-th member is found by skipping i members of the same container in the
** raw text with the runtime's validating scanner (gm/json.h), which has
** checked the whole text first (RFC 8259, nesting at most 256 deep). The
** lexeme found must match -?(0|[1-9][0-9]*): no fraction, no exponent, no
** leading zeros. This works at any depth (top-level keys,
** rope_scaling/rope_parameters members and eos_token_id elements) and never
** compares key spellings in the raw text, so escaped keys and duplicate keys
** cannot mislead it.
**
** Duplicate keys in an object we read are errors (cJSON would silently take
** the first, Python's json the last). For optional keys, null means absent.
*/
#include "gm/config.h"

#include <errno.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gm/io.h"
#include "gm/json.h"

#define CONFIG_MAX_BYTES (16u << 20)

/* A JSON value and where its text begins. */
typedef struct node {
    const cJSON *json;
    const char *text;
} node;

typedef struct reader {
    const char *what; /* file name for messages */
    const char *end;  /* one past the text */
    gm_status *st;
} reader;

/* ------------------------------------------------------------------------ */
/* the raw text, walked with the validating scanner */

/*
** Where the value of `item`, a member or element of `parent`, begins. The
** whole text has passed gm_json_skip, so every step here succeeds.
*/
static node child(const reader *r, node parent, const cJSON *item)
{
    const char *end = r->end, *err = NULL;
    const char *p = gm_json_ws(parent.text + 1, end); /* past '{' or '[' */
    int is_object = cJSON_IsObject(parent.json);
    int idx = 0;

    for (const cJSON *c = parent.json->child; c != NULL && c != item; c = c->next)
        idx++;
    for (int i = 0; p < end; i++) {
        if (is_object) { /* skip "key" : */
            gm_json_string(p, end, NULL, &p, &err);
            p = gm_json_ws(gm_json_ws(p, end) + 1, end);
        }
        if (i == idx)
            break;
        gm_json_skip(p, end, &p, &err);
        p = gm_json_ws(gm_json_ws(p, end) + 1, end); /* ',' */
    }
    return (node){item, p < end ? p : end};
}

/* The number's lexeme as text, at most n-1 bytes. */
static const char *lexeme(const reader *r, node v, char *buf, size_t n)
{
    size_t len = 0;
    while (v.text + len < r->end && len + 1 < n && strchr("+-.eE0123456789", v.text[len]) &&
           v.text[len] != '\0')
        len++;
    memcpy(buf, v.text, len);
    buf[len] = '\0';
    return buf;
}

/* -?(0|[1-9][0-9]*) */
static int is_integer_lexeme(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        return s[1] == '\0';
    if (*s < '1' || *s > '9')
        return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '\0';
}

/* ------------------------------------------------------------------------ */
/* typed member access */

/* "found ..." for messages: a number's own text, else its JSON type. */
static const char *found(const reader *r, node v, char *buf, size_t n)
{
    if (cJSON_IsNumber(v.json)) return lexeme(r, v, buf, n);
    if (cJSON_IsString(v.json)) return "a string";
    if (cJSON_IsBool(v.json)) return "a boolean";
    if (cJSON_IsNull(v.json)) return "null";
    if (cJSON_IsArray(v.json)) return "an array";
    return "an object";
}

/* Member `key` of object o; .json is NULL when absent. */
static node member(const reader *r, node o, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(o.json, key);
    if (item == NULL)
        return (node){NULL, NULL};
    return child(r, o, item);
}

static int absent_or_null(node v)
{
    return v.json == NULL || cJSON_IsNull(v.json);
}

/* "rope_scaling.factor" style names for messages. */
static const char *key_path(const char *prefix, const char *key, char *buf, size_t n)
{
    if (prefix == NULL)
        return key;
    snprintf(buf, n, "%s.%s", prefix, key);
    return buf;
}

/*
** An integer value named `name` in messages, in [lo, INT_MAX], into *out.
** v must be present (callers decide what absence means).
*/
static int as_int(const reader *r, node v, const char *name, int lo, int *out)
{
    char buf[48];
    const char *text;

    if (!cJSON_IsNumber(v.json) || !is_integer_lexeme(lexeme(r, v, buf, sizeof buf)))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be an integer, found %s", r->what,
                       name, found(r, v, buf, sizeof buf));
    text = buf;
    if (v.json->valuedouble < lo || v.json->valuedouble > INT_MAX)
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be %s, found %s", r->what, name,
                       lo == 1 ? "positive" : "non-negative", text);
    *out = (int)v.json->valuedouble;
    return GM_OK;
}

/* Integer member; absent (or null when optional) leaves *out unchanged. */
static int read_int(const reader *r, node o, const char *prefix, const char *key,
                    int required, int lo, int *out)
{
    char name[96];
    node v = member(r, o, key);
    const char *shown = key_path(prefix, key, name, sizeof name);

    if (v.json == NULL || (!required && cJSON_IsNull(v.json))) {
        if (required)
            return gm_fail(r->st, GM_EMISSING, "%s: required key '%s' is missing", r->what,
                           shown);
        return GM_OK;
    }
    return as_int(r, v, shown, lo, out);
}

/* A finite positive number member (integer or float text); same absence rules. */
static int read_positive(const reader *r, node o, const char *prefix, const char *key,
                         int required, double *out)
{
    char name[96], buf[48];
    node v = member(r, o, key);
    const char *shown = key_path(prefix, key, name, sizeof name);

    if (v.json == NULL || (!required && cJSON_IsNull(v.json))) {
        if (required)
            return gm_fail(r->st, GM_EMISSING, "%s: required key '%s' is missing", r->what,
                           shown);
        return GM_OK;
    }
    if (!cJSON_IsNumber(v.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a number, found %s", r->what, shown,
                       found(r, v, buf, sizeof buf));
    /* used in fp32 (RoPE, RMSNorm): it must be a positive normal fp32 value there */
    if (!isfinite(v.json->valuedouble) || v.json->valuedouble < FLT_MIN || v.json->valuedouble > FLT_MAX)
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a positive normal fp32 value, found %s",
                       r->what, shown, lexeme(r, v, buf, sizeof buf));
    *out = v.json->valuedouble;
    return GM_OK;
}

/* An object may not repeat a key (cJSON would keep both and find the first). */
static int check_unique_keys(const reader *r, node o)
{
    for (const cJSON *a = o.json->child; a != NULL; a = a->next)
        for (const cJSON *b = a->next; b != NULL; b = b->next)
            if (strcmp(a->string, b->string) == 0)
                return gm_fail(r->st, GM_EFORMAT, "%s: duplicate key '%s'", r->what, a->string);
    return GM_OK;
}

/* ------------------------------------------------------------------------ */
/* the composite fields */

/* rope_scaling (4.x) or rope_parameters (5.x): "default" or "llama3". */
static int read_rope_scaling(const reader *r, node root, gm_rope_scaling *rs)
{
    char buf[48];
    const char *prefix = "rope_scaling";
    node o = member(r, root, prefix);
    node type;
    int rc;

    if (absent_or_null(o)) {
        prefix = "rope_parameters";
        o = member(r, root, prefix);
    }
    rs->type = GM_ROPE_DEFAULT;
    if (absent_or_null(o))
        return GM_OK;
    if (!cJSON_IsObject(o.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be an object, found %s", r->what, prefix,
                       found(r, o, buf, sizeof buf));
    if ((rc = check_unique_keys(r, o)) != GM_OK)
        return rc;

    // HF reads rope_type first and falls back to the legacy "type"
    type = member(r, o, "rope_type");
    if (type.json == NULL)
        type = member(r, o, "type");
    if (type.json == NULL) {
        if (strcmp(prefix, "rope_parameters") == 0)
            return GM_OK; /* 5.x may hold just rope_theta */
        return gm_fail(r->st, GM_EMISSING, "%s: required key '%s.rope_type' is missing",
                       r->what, prefix);
    }
    if (!cJSON_IsString(type.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s.rope_type must be a string, found %s", r->what,
                       prefix, found(r, type, buf, sizeof buf));
    if (strcmp(type.json->valuestring, "default") == 0)
        return GM_OK;
    if (strcmp(type.json->valuestring, "llama3") != 0)
        return gm_fail(r->st, GM_EUNSUPPORTED,
                       "%s: %s type '%s' is not supported (supported: llama3)", r->what, prefix,
                       type.json->valuestring);

    rs->type = GM_ROPE_LLAMA3;
    if ((rc = read_positive(r, o, prefix, "factor", 1, &rs->factor)) != GM_OK ||
        (rc = read_positive(r, o, prefix, "low_freq_factor", 1, &rs->low_freq_factor)) != GM_OK ||
        (rc = read_positive(r, o, prefix, "high_freq_factor", 1, &rs->high_freq_factor)) != GM_OK ||
        (rc = read_int(r, o, prefix, "original_max_position_embeddings", 1, 1,
                       &rs->original_max_position_embeddings)) != GM_OK)
        return rc;
    return GM_OK;
}

/* rope_theta, or rope_parameters.rope_theta; both present must agree. */
static int read_rope_base(const reader *r, node root, double *base)
{
    double top = 0, nested = 0;
    node params = member(r, root, "rope_parameters");
    int rc;

    if ((rc = read_positive(r, root, NULL, "rope_theta", 0, &top)) != GM_OK)
        return rc;
    if (cJSON_IsObject(params.json) &&
        (rc = read_positive(r, params, "rope_parameters", "rope_theta", 0, &nested)) != GM_OK)
        return rc;
    if (top > 0 && nested > 0 && top != nested)
        return gm_fail(r->st, GM_EFORMAT,
                       "%s: rope_theta %.17g and rope_parameters.rope_theta %.17g disagree",
                       r->what, top, nested);
    *base = top > 0 ? top : nested > 0 ? nested : 10000.0;
    return GM_OK;
}

/* An int or a list of at most GM_MAX_EOS ints; absent, null or [] is none. */
static int read_eos(const reader *r, node root, gm_config *c)
{
    node v = member(r, root, "eos_token_id");
    char name[48];
    int rc;

    c->n_eos_token_ids = 0;
    if (absent_or_null(v))
        return GM_OK;
    if (!cJSON_IsArray(v.json)) {
        c->n_eos_token_ids = 1;
        return as_int(r, v, "eos_token_id", 0, &c->eos_token_ids[0]);
    }
    if (cJSON_GetArraySize(v.json) > GM_MAX_EOS)
        return gm_fail(r->st, GM_EUNSUPPORTED,
                       "%s: eos_token_id has %d entries, at most %d are supported", r->what,
                       cJSON_GetArraySize(v.json), GM_MAX_EOS);
    for (const cJSON *e = v.json->child; e != NULL; e = e->next) {
        snprintf(name, sizeof name, "eos_token_id[%d]", c->n_eos_token_ids);
        if ((rc = as_int(r, child(r, v, e), name, 0, &c->eos_token_ids[c->n_eos_token_ids])))
            return rc;
        c->n_eos_token_ids++;
    }
    return GM_OK;
}

static int parse_dtype(const reader *r, node v, const char *key, gm_dtype *out)
{
    char buf[48];

    if (absent_or_null(v)) {
        *out = GM_DTYPE_NONE;
        return GM_OK;
    }
    if (!cJSON_IsString(v.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a string, found %s", r->what, key,
                       found(r, v, buf, sizeof buf));
    if (strcmp(v.json->valuestring, "bfloat16") == 0) *out = GM_DTYPE_BF16;
    else if (strcmp(v.json->valuestring, "float16") == 0) *out = GM_DTYPE_F16;
    else if (strcmp(v.json->valuestring, "float32") == 0) *out = GM_DTYPE_F32;
    else
        return gm_fail(r->st, GM_EUNSUPPORTED,
                       "%s: %s '%s' is not supported (supported: bfloat16, float16, float32)",
                       r->what, key, v.json->valuestring);
    return GM_OK;
}

/* torch_dtype (4.x) or dtype (5.x); both present must agree. */
static int read_dtype(const reader *r, node root, gm_dtype *out)
{
    gm_dtype a = GM_DTYPE_NONE, b = GM_DTYPE_NONE;
    int rc;

    if ((rc = parse_dtype(r, member(r, root, "torch_dtype"), "torch_dtype", &a)) != GM_OK ||
        (rc = parse_dtype(r, member(r, root, "dtype"), "dtype", &b)) != GM_OK)
        return rc;
    if (a != GM_DTYPE_NONE && b != GM_DTYPE_NONE && a != b)
        return gm_fail(r->st, GM_EFORMAT, "%s: torch_dtype '%s' and dtype '%s' disagree",
                       r->what, gm_dtype_name(a), gm_dtype_name(b));
    *out = a != GM_DTYPE_NONE ? a : b;
    return GM_OK;
}

/* ------------------------------------------------------------------------ */
/* public entry points */

/* cJSON's whitespace: every byte <= 0x20. */
static const char *skip_cjson_ws(const char *p, const char *end)
{
    while (p < end && (unsigned char)*p <= 0x20)
        p++;
    return p;
}

/* Line and column (1-based, bytes) of p, for JSON syntax errors. */
static void position(const char *start, const char *p, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = start; q < p; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int gm_config_parse(gm_config *c, const char *json, size_t len, const char *what,
                    gm_status *st)
{
    reader r = {what ? what : "config.json", json + len, st};
    gm_config cfg = {0};
    cJSON *doc = NULL;
    const char *parse_end = NULL, *err = NULL;
    const char *p;
    node root, v;
    char buf[48];
    int line, col, rc;

    if (json == NULL || len == 0) {
        rc = gm_fail(st, GM_EFORMAT, "%s: empty file", r.what);
        goto out;
    }
    // cJSON would take a NUL byte for whitespace or the end of a string
    p = memchr(json, '\0', len);
    if (p != NULL) {
        position(json, p, &line, &col);
        rc = gm_fail(st, GM_EFORMAT, "%s: NUL byte at line %d, column %d", r.what, line, col);
        goto out;
    }
    doc = cJSON_ParseWithLengthOpts(json, len, &parse_end, 0);
    p = parse_end ? skip_cjson_ws(parse_end, r.end) : json;
    if (doc == NULL || p < r.end) {
        position(json, p, &line, &col);
        rc = gm_fail(st, GM_EFORMAT, "%s: %s at line %d, column %d", r.what,
                     doc == NULL ? "invalid JSON" : "unexpected data after the JSON value",
                     line, col);
        goto out;
    }
    // the root's text: cJSON skips a UTF-8 byte order mark, then whitespace
    p = json;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    root = (node){doc, gm_json_ws(p, r.end)};
    // cJSON is lenient where RFC 8259 is not (any byte <= 0x20 as space, 01,
    // lone surrogates): the scanner that finds the lexemes must accept the text
    if (gm_json_skip(root.text, r.end, &p, &err) != 0 || gm_json_ws(p, r.end) != r.end) {
        position(json, p, &line, &col);
        rc = gm_fail(st, GM_EFORMAT, "%s: invalid JSON: %s at line %d, column %d", r.what,
                     err ? err : "unexpected data after the JSON value", line, col);
        goto out;
    }
    if (!cJSON_IsObject(doc)) {
        rc = gm_fail(st, GM_EFORMAT, "%s: the top level must be an object, found %s", r.what,
                     found(&r, root, buf, sizeof buf));
        goto out;
    }
    if ((rc = check_unique_keys(&r, root)) != GM_OK)
        goto out;

    if ((rc = read_int(&r, root, NULL, "num_hidden_layers", 1, 1, &cfg.n_layers)) ||
        (rc = read_int(&r, root, NULL, "hidden_size", 1, 1, &cfg.emb_dim)) ||
        (rc = read_int(&r, root, NULL, "num_attention_heads", 1, 1, &cfg.n_heads)) ||
        (rc = read_int(&r, root, NULL, "intermediate_size", 1, 1, &cfg.hidden_dim)) ||
        (rc = read_int(&r, root, NULL, "vocab_size", 1, 1, &cfg.vocab_size)) ||
        (rc = read_int(&r, root, NULL, "max_position_embeddings", 1, 1,
                       &cfg.max_position_embeddings)) ||
        (rc = read_positive(&r, root, NULL, "rms_norm_eps", 1, &cfg.rms_norm_eps)))
        goto out;

    cfg.n_kv_heads = cfg.n_heads;
    if ((rc = read_int(&r, root, NULL, "num_key_value_heads", 0, 1, &cfg.n_kv_heads)))
        goto out;
    if (cfg.n_heads % cfg.n_kv_heads != 0) {
        rc = gm_fail(st, GM_EFORMAT,
                     "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                     r.what, cfg.n_heads, cfg.n_kv_heads);
        goto out;
    }
    if (absent_or_null(member(&r, root, "head_dim"))) {
        if (cfg.emb_dim % cfg.n_heads != 0) {
            rc = gm_fail(st, GM_EFORMAT,
                         "%s: head_dim is absent and hidden_size %d is not divisible by "
                         "num_attention_heads %d", r.what, cfg.emb_dim, cfg.n_heads);
            goto out;
        }
        cfg.head_dim = cfg.emb_dim / cfg.n_heads;
    } else if ((rc = read_int(&r, root, NULL, "head_dim", 0, 1, &cfg.head_dim))) {
        goto out;
    }

    v = member(&r, root, "tie_word_embeddings"); /* null counts as absent: false */
    if (v.json != NULL && !cJSON_IsNull(v.json) && !cJSON_IsBool(v.json)) {
        rc = gm_fail(st, GM_EFORMAT, "%s: tie_word_embeddings must be a boolean, found %s",
                     r.what, found(&r, v, buf, sizeof buf));
        goto out;
    }
    cfg.tie_word_embeddings = cJSON_IsTrue(v.json);

    cfg.bos_token_id = -1;
    if ((rc = read_int(&r, root, NULL, "bos_token_id", 0, 0, &cfg.bos_token_id)) ||
        (rc = read_eos(&r, root, &cfg)) ||
        (rc = read_rope_base(&r, root, &cfg.rope_base)) ||
        (rc = read_rope_scaling(&r, root, &cfg.rope_scaling)) ||
        (rc = read_dtype(&r, root, &cfg.dtype)))
        goto out;

    *c = cfg;
    rc = GM_OK;
out:
    cJSON_Delete(doc);
    return rc;
}

int gm_config_read(gm_config *c, const char *path, gm_status *st)
{
    char *text = NULL;
    size_t n = 0;
    int rc = gm_read_file(path, CONFIG_MAX_BYTES, &text, &n, st);
    if (rc == GM_OK)
        rc = gm_config_parse(c, text, n, path, st);
    free(text);
    return rc;
}

const char *gm_dtype_name(gm_dtype d)
{
    switch (d) {
    case GM_DTYPE_BF16: return "bfloat16";
    case GM_DTYPE_F16: return "float16";
    case GM_DTYPE_F32: return "float32";
    default: return "none";
    }
}

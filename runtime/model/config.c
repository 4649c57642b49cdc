/*
** gm_config: an independent C reader of config.json (see gm/config.h).
**
** cJSON parses the text, but it turns every number into a double, so
** `"hidden_size": 896.0` and `896` look alike. To enforce "integer fields are
** JSON integers" we go back to the number's text: cJSON keeps an object's
** members (and an array's elements) in document order, so the value of the
** i-th member is found by skipping i members of the same container in the
** raw text with the runtime's validating scanner (gm/json.h), which has
** checked the whole text first (RFC 8259's grammar, nesting at most 256
** deep; the bytes of strings are not checked for UTF-8, as cJSON does not). The
** lexeme found must match -?(0|[1-9][0-9]*): no fraction, no exponent, no
** leading zeros. This works at any depth (top-level keys,
** rope_scaling/rope_parameters members and eos_token_id elements) and never
** compares key spellings in the raw text, so escaped keys and duplicate keys
** cannot mislead it.
**
** cJSON's copy of a string ends at its first NUL (written \u0000), Python's
** does not: keys are compared as decoded from the text (one walk over the
** object per lookup, and a sort for the duplicate check, so that a hostile
** object of many keys costs no more than its size), and a name we compare is
** checked for a NUL: "torch_dtype\u0000x" is another key, as in
** transformers, and "bfloat16\u0000x" no dtype.
**
** Duplicate keys in an object we read are errors (cJSON would silently take
** the first, Python's json the last). For optional keys, null means absent.
*/
#include "gm/config.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "gm/buf.h"
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
    int *oom;         /* set when decoding a key ran out of memory */
} reader;

/* ------------------------------------------------------------------------ */
/* the raw text, walked with the validating scanner */

/*
** Where the value of `item`, an element of array `parent`, begins (an
** object's members are walked below). The whole text has passed
** gm_json_skip_py, so every step here succeeds. Linear in the elements before
** it: used on short arrays only.
*/
static node element(const reader *r, node parent, const cJSON *item)
{
    const char *end = r->end, *err = NULL;
    const char *p = gm_json_ws(parent.text + 1, end); /* past '[' */

    for (const cJSON *c = parent.json->child; c != NULL && c != item && p < end; c = c->next) {
        gm_json_skip_py(p, end, &p, &err);
        p = gm_json_ws(gm_json_ws(p, end) + 1, end); /* past ',' */
    }
    return (node){item, p < end ? p : end};
}

/*
** A walk over an object's members in document order, the text beside cJSON's
** children: each key decoded as the text has it (NUL bytes and all), each
** value where its text begins. One pass, linear in the object's size.
*/
typedef struct walk {
    const reader *r;
    const char *p;      /* the next member's key */
    const cJSON *item;  /* and its cJSON child */
    gm_buf key;         /* the current member's key, decoded */
} walk;

static void walk_start(walk *w, const reader *r, node o)
{
    *w = (walk){r, gm_json_ws(o.text + 1, r->end), o.json->child, {0}};
}

/* The next member: its key in w->key, its value in *v. 1, or 0 at the end, or -1 out of memory. */
static int walk_next(walk *w, node *v)
{
    const char *end = w->r->end, *err = NULL, *value;

    if (w->item == NULL)
        return 0;
    w->key.n = 0;
    if (gm_json_string(w->p, end, &w->key, &w->p, &err) != 0)
        return -1;
    value = gm_json_ws(gm_json_ws(w->p, end) + 1, end); /* past ':' */
    *v = (node){w->item, value};
    gm_json_skip_py(value, end, &w->p, &err);
    w->p = gm_json_ws(gm_json_ws(w->p, end) + 1, end); /* past ',' */
    w->item = w->item->next;
    return 1;
}

static int in_number(const reader *r, const char *p)
{
    return p < r->end && *p != '\0' && strchr("+-.eE0123456789", *p) != NULL;
}

/* The number's lexeme as text, at most n-1 bytes; a longer one ends in "...". */
static const char *lexeme(const reader *r, node v, char *buf, size_t n)
{
    const size_t word = gm_json_nonfinite(v.text, r->end);
    if (word > 0 && word < n) { /* NaN, Infinity, -Infinity */
        memcpy(buf, v.text, word);
        buf[word] = '\0';
        return buf;
    }
    size_t len = 0;
    while (len + 1 < n && in_number(r, v.text + len))
        len++;
    memcpy(buf, v.text, len);
    buf[len] = '\0';
    if (in_number(r, v.text + len) && len >= 3)
        memcpy(buf + len - 3, "...", 3);
    return buf;
}

/*
** -?(0|[1-9][0-9]*): the scanner has checked the number's grammar, so the
** whole lexeme (however long: lexeme() keeps only its start) is an integer
** unless it has a fraction or an exponent.
*/
static int is_integer_text(const reader *r, node v)
{
    if (gm_json_nonfinite(v.text, r->end) > 0)
        return 0;
    for (const char *p = v.text; in_number(r, p); p++)
        if (*p == '.' || *p == 'e' || *p == 'E')
            return 0;
    return 1;
}

/* A number's value: cJSON's double, or what Python's non-finite literal at its text means. */
static double value(const reader *r, node v)
{
    const char *p = v.text;
    if (gm_json_nonfinite(p, r->end) == 0)
        return v.json->valuedouble;
    return *p == 'N' ? (double)NAN : *p == 'I' ? HUGE_VAL : -HUGE_VAL;
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

/*
** Member `key` of object o; .json is NULL when absent. Keys compare as
** decoded from the text, since cJSON's copy of a key ends at its first NUL:
** "torch_dtype\u0000x" is another key, as in Python's json.
*/
static node member(const reader *r, node o, const char *key)
{
    const size_t n = strlen(key);
    node v, found = {NULL, NULL};
    walk w;
    int more;

    walk_start(&w, r, o);
    while ((more = walk_next(&w, &v)) > 0)
        if (w.key.n == n && (n == 0 || memcmp(w.key.p, key, n) == 0)) {
            found = v;
            break;
        }
    if (more < 0)
        *r->oom = 1;
    free(w.key.p);
    return found;
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

    if (!cJSON_IsNumber(v.json) || !is_integer_text(r, v))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be an integer, found %s", r->what,
                       name, found(r, v, buf, sizeof buf));
    text = lexeme(r, v, buf, sizeof buf);
    if (value(r, v) < lo || value(r, v) > INT_MAX)
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
    const double x = value(r, v);
    if (!isfinite(x))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a finite number, found %s", r->what, shown,
                       lexeme(r, v, buf, sizeof buf));
    if (x < FLT_MIN || x > FLT_MAX)
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a positive normal fp32 value, found %s",
                       r->what, shown, lexeme(r, v, buf, sizeof buf));
    *out = x;
    return GM_OK;
}

typedef struct key_ref {
    size_t off, len; /* in the arena of decoded keys */
    const char *p;   /* set once the arena is whole */
} key_ref;

static int cmp_key(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->len ? memcmp(x->p, y->p, x->len) : 0;
}

/*
** An object may not repeat a key (cJSON would keep both and find the first,
** Python's json the last). Keys compare as decoded, NUL bytes and all; they
** are sorted, so a hostile object of many keys costs n log n.
*/
static int check_unique_keys(const reader *r, node o)
{
    size_t n = 0, k = 0;
    gm_buf arena = {0};
    key_ref *keys = NULL;
    walk w;
    node v;
    int more = 0, rc = GM_OK;

    for (const cJSON *c = o.json->child; c != NULL; c = c->next)
        n++;
    if (n < 2)
        return GM_OK;
    if ((keys = malloc(n * sizeof *keys)) == NULL) {
        more = -1;
        goto out;
    }
    walk_start(&w, r, o);
    while (k < n && (more = walk_next(&w, &v)) > 0) {
        keys[k++] = (key_ref){arena.n, w.key.n, NULL};
        if (gm_buf_put(&arena, w.key.p, w.key.n) != 0) {
            more = -1;
            break;
        }
    }
    free(w.key.p);
    if (more < 0)
        goto out;
    for (size_t i = 0; i < k; i++)
        keys[i].p = arena.p ? arena.p + keys[i].off : "";
    qsort(keys, k, sizeof *keys, cmp_key);
    for (size_t i = 1; i < k; i++)
        if (cmp_key(&keys[i - 1], &keys[i]) == 0) {
            rc = gm_fail(r->st, GM_EFORMAT, "%s: duplicate key '%.*s'", r->what,
                         (int)strnlen(keys[i].p, keys[i].len), keys[i].p);
            break;
        }
out:
    if (more < 0)
        rc = gm_fail(r->st, GM_ENOMEM, "%s: out of memory", r->what);
    free(keys);
    free(arena.p);
    return rc;
}

/*
** A string value we compare with names, decoded from the text: cJSON's copy
** ends at its first NUL (written \u0000), so "bfloat16\u0000x" would pass for
** bfloat16; one that holds a NUL is none of the names.
*/
static int check_no_nul(const reader *r, node v, const char *name)
{
    const char *after = NULL, *err = NULL;
    gm_buf b = {0};
    int rc = GM_OK;

    if (gm_json_string(v.text, r->end, &b, &after, &err) != 0)
        rc = gm_fail(r->st, GM_ENOMEM, "%s: %s", r->what, err);
    else if (b.n > 0 && memchr(b.p, '\0', b.n) != NULL)
        rc = gm_fail(r->st, GM_EFORMAT, "%s: %s '%s\\u0000...' holds a NUL character", r->what, name,
                     v.json->valuestring);
    free(b.p);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the composite fields */

/* rope_scaling (4.x) or rope_parameters (5.x): "default" or "llama3". *key: the object read, or NULL. */
static int read_rope_scaling(const reader *r, node root, gm_rope_scaling *rs, const char **key)
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
    *key = NULL;
    if (absent_or_null(o))
        return GM_OK;
    *key = prefix;
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
    snprintf(buf, sizeof buf, "%s.rope_type", prefix);
    if ((rc = check_no_nul(r, type, buf)) != GM_OK)
        return rc;
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

/* rope_theta, or rope_parameters.rope_theta; both present must agree. *key: the one read, or NULL. */
static int read_rope_base(const reader *r, node root, double *base, const char **key)
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
    *key = top > 0 ? "rope_theta" : nested > 0 ? "rope_parameters.rope_theta" : NULL;
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
        if ((rc = as_int(r, element(r, v, e), name, 0, &c->eos_token_ids[c->n_eos_token_ids])))
            return rc;
        c->n_eos_token_ids++;
    }
    return GM_OK;
}

static int parse_dtype(const reader *r, node v, const char *key, gm_dtype *out)
{
    char buf[48];
    int rc;

    if (absent_or_null(v)) {
        *out = GM_DTYPE_NONE;
        return GM_OK;
    }
    if (!cJSON_IsString(v.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: %s must be a string, found %s", r->what, key,
                       found(r, v, buf, sizeof buf));
    if ((rc = check_no_nul(r, v, key)) != GM_OK)
        return rc;
    if (strcmp(v.json->valuestring, "bfloat16") == 0) *out = GM_DTYPE_BF16;
    else if (strcmp(v.json->valuestring, "float16") == 0) *out = GM_DTYPE_F16;
    else if (strcmp(v.json->valuestring, "float32") == 0) *out = GM_DTYPE_F32;
    else
        return gm_fail(r->st, GM_EUNSUPPORTED,
                       "%s: %s '%s' is not supported (supported: bfloat16, float16, float32)",
                       r->what, key, v.json->valuestring);
    return GM_OK;
}

/* torch_dtype (4.x) or dtype (5.x); both present must agree. *key: the one read, or NULL. */
static int read_dtype(const reader *r, node root, gm_dtype *out, const char **key)
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
    *key = a != GM_DTYPE_NONE ? "torch_dtype" : b != GM_DTYPE_NONE ? "dtype" : NULL;
    return GM_OK;
}

/* A boolean member of quantization_config; absent or null leaves *out unchanged. */
static int read_quant_bool(const reader *r, node o, const char *key, bool *out)
{
    char buf[48];
    node v = member(r, o, key);
    if (absent_or_null(v))
        return GM_OK;
    if (!cJSON_IsBool(v.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config.%s must be true or false, found %s", r->what,
                       key, found(r, v, buf, sizeof buf));
    *out = cJSON_IsTrue(v.json);
    return GM_OK;
}

/*
** A string member of quantization_config, compared without case (as
** transformers reads quant_method and AWQ's version): its index in names,
** or dflt when absent or null; any other value is one line naming them.
*/
static int read_quant_name(const reader *r, node o, const char *key, const char *const *names, int dflt, int *out)
{
    char buf[48], list[128] = "";
    node v = member(r, o, key);
    int rc;
    *out = dflt;
    if (absent_or_null(v)) {
        if (dflt >= 0)
            return GM_OK;
        return gm_fail(r->st, GM_EMISSING, "%s: required key 'quantization_config.%s' is missing", r->what, key);
    }
    if (!cJSON_IsString(v.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config.%s must be a string, found %s", r->what, key,
                       found(r, v, buf, sizeof buf));
    if ((rc = check_no_nul(r, v, key)) != GM_OK)
        return rc;
    for (int i = 0; names[i]; i++) {
        if (strcasecmp(v.json->valuestring, names[i]) == 0) {
            *out = i;
            return GM_OK;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    }
    return gm_fail(r->st, GM_EUNSUPPORTED, "%s: quantization_config.%s '%.40s' is not supported (supported: %s)",
                   r->what, key, v.json->valuestring, list);
}

/* group_size: a positive integer or, where one group takes every input (GPTQ), -1. */
static int read_group_size(const reader *r, node o, int minus_one, int *out)
{
    char buf[48];
    node v = member(r, o, "group_size");
    int g = 0, rc;
    if (absent_or_null(v))
        return GM_OK;
    if ((rc = as_int(r, v, "quantization_config.group_size", INT_MIN, &g)) != GM_OK)
        return rc;
    if (g < 1 && !(minus_one && g == -1))
        return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config.group_size must be positive%s, found %s", r->what,
                       minus_one ? " or -1" : "", lexeme(r, v, buf, sizeof buf));
    *out = g;
    return GM_OK;
}

/*
** quantization_config, read on its own terms (GM_CONFIG_FIELDS): the method
** and what the dequantized reference depends on, with transformers' defaults
** for absent keys (AwqConfig, GPTQConfig, FineGrainedFP8Config).
*/
static int read_quant(const reader *r, node root, gm_quant_config *q)
{
    static const char *const methods[] = {"awq", "gptq", "fp8", NULL};
    static const char *const gemm[] = {"gemm", NULL}, *const e4m3[] = {"e4m3", NULL};
    static const char *const dynamic[] = {"dynamic", NULL}, *const formats[] = {"gptq", "gptq_v2", NULL};
    char buf[48];
    node o = member(r, root, "quantization_config");
    int m, x, rc;
    memset(q, 0, sizeof *q);
    if (absent_or_null(o))
        return GM_OK;
    if (!cJSON_IsObject(o.json))
        return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config must be an object, found %s", r->what,
                       found(r, o, buf, sizeof buf));
    if ((rc = check_unique_keys(r, o)) || (rc = read_quant_name(r, o, "quant_method", methods, -1, &m)))
        return rc;
    if (m == 0) { /* AWQ */
        *q = (gm_quant_config){.method = GM_QUANT_AWQ, .bits = 4, .group_size = 128, .zero_point = true};
        if ((rc = read_int(r, o, "quantization_config", "bits", 0, 1, &q->bits)) ||
            (rc = read_group_size(r, o, 0, &q->group_size)) ||
            (rc = read_quant_bool(r, o, "zero_point", &q->zero_point)) ||
            (rc = read_quant_name(r, o, "version", gemm, 0, &x)))
            return rc;
        if (!q->zero_point)
            return gm_fail(r->st, GM_EUNSUPPORTED, "%s: quantization_config.zero_point false is not supported "
                           "(supported: true)", r->what);
    } else if (m == 1) { /* GPTQ */
        *q = (gm_quant_config){.method = GM_QUANT_GPTQ, .group_size = 128, .sym = true};
        if ((rc = read_int(r, o, "quantization_config", "bits", 1, 1, &q->bits)) ||
            (rc = read_group_size(r, o, 1, &q->group_size)) || (rc = read_quant_bool(r, o, "sym", &q->sym)) ||
            (rc = read_quant_bool(r, o, "desc_act", &q->desc_act)) ||
            (rc = read_quant_name(r, o, "checkpoint_format", formats, 0, &x)))
            return rc;
        q->gptq_v2 = x == 1;
    } else { /* FP8 */
        *q = (gm_quant_config){.method = GM_QUANT_FP8, .bits = 8, .group_size = 128, .block_out = 128};
        if ((rc = read_quant_name(r, o, "fmt", e4m3, 0, &x)) ||
            (rc = read_quant_name(r, o, "activation_scheme", dynamic, 0, &x)))
            return rc;
        /*
        ** null is refused, as transformers' FineGrainedFP8Config does (it takes len() of it); vLLM reads
        ** it as one scale a tensor, which the FP8 rule does not read. Absent: transformers' (128, 128).
        */
        node b = member(r, o, "weight_block_size");
        if (b.json != NULL && cJSON_IsNull(b.json))
            return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config.weight_block_size must be a list of two "
                           "positive integers, found null (gen-model reads FP8 with a scale a block: set it to the "
                           "[outputs, inputs] of the blocks weight_scale_inv was made with, or leave the key out for "
                           "transformers' default [128, 128])", r->what);
        if (b.json != NULL) {
            if (!cJSON_IsArray(b.json) || cJSON_GetArraySize(b.json) != 2)
                return gm_fail(r->st, GM_EFORMAT, "%s: quantization_config.weight_block_size must be a list of two "
                               "positive integers, found %s", r->what, found(r, b, buf, sizeof buf));
            if ((rc = as_int(r, element(r, b, b.json->child), "quantization_config.weight_block_size[0]", 1,
                             &q->block_out)) ||
                (rc = as_int(r, element(r, b, b.json->child->next), "quantization_config.weight_block_size[1]", 1,
                             &q->group_size)))
                return rc;
        }
    }
    if (q->bits != (q->method == GM_QUANT_FP8 ? 8 : 4))
        return gm_fail(r->st, GM_EUNSUPPORTED, "%s: quantization_config.bits %d is not supported (supported: 4)",
                       r->what, q->bits);
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

/*
** The whole text as JSON, checked as gm_config_parse promises (no NUL byte,
** RFC 8259, a top-level object without duplicate keys): *doc (to be freed
** with cJSON_Delete, also on failure) and its root node.
*/
static int open_doc(const reader *r, const char *json, size_t len, cJSON **doc, node *root)
{
    const char *parse_end = NULL, *err = NULL;
    const char *p;
    char buf[48];
    int line, col;

    *doc = NULL;
    if (json == NULL || len == 0)
        return gm_fail(r->st, GM_EFORMAT, "%s: empty file", r->what);
    // cJSON would take a NUL byte for whitespace or the end of a string
    p = memchr(json, '\0', len);
    if (p != NULL) {
        position(json, p, &line, &col);
        return gm_fail(r->st, GM_EFORMAT, "%s: NUL byte at line %d, column %d", r->what, line, col);
    }
    /*
    ** cJSON takes no NaN or Infinity: it parses a copy in which each such
    ** literal outside strings is a number of the same length, so that its
    ** tree matches the text; value() reads them from the text itself.
    */
    char *copy = malloc(len);
    if (copy == NULL)
        return gm_fail(r->st, GM_ENOMEM, "%s: out of memory", r->what);
    memcpy(copy, json, len);
    for (size_t i = 0, in_string = 0; i < len; i++) {
        if (in_string) {
            if (copy[i] == '\\')
                i++;
            else if (copy[i] == '"')
                in_string = 0;
        } else if (copy[i] == '"') {
            in_string = 1;
        } else {
            const size_t n = gm_json_nonfinite(copy + i, copy + len);
            if (n > 0) { /* "NaN" -> "0e0", "Infinity" -> "1e999999", "-Infinity" -> "-1e999999" */
                memcpy(copy + i, n == 3 ? "0e0" : n == 8 ? "1e999999" : "-1e999999", n);
                i += n - 1;
            }
        }
    }
    *doc = cJSON_ParseWithLengthOpts(copy, len, &parse_end, 0);
    parse_end = parse_end ? json + (parse_end - copy) : NULL;
    free(copy);
    p = parse_end ? skip_cjson_ws(parse_end, r->end) : json;
    if (*doc == NULL || p < r->end) {
        position(json, p, &line, &col);
        return gm_fail(r->st, GM_EFORMAT, "%s: %s at line %d, column %d", r->what,
                       *doc == NULL ? "invalid JSON" : "unexpected data after the JSON value",
                       line, col);
    }
    // the root's text: cJSON skips a UTF-8 byte order mark, then whitespace
    p = json;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    *root = (node){*doc, gm_json_ws(p, r->end)};
    // cJSON is lenient where RFC 8259 is not (any byte <= 0x20 as space, 01,
    // lone surrogates): the scanner that finds the lexemes must accept the text
    if (gm_json_skip_py(root->text, r->end, &p, &err) != 0 || gm_json_ws(p, r->end) != r->end) {
        position(json, p, &line, &col);
        return gm_fail(r->st, GM_EFORMAT, "%s: invalid JSON: %s at line %d, column %d", r->what,
                       err ? err : "unexpected data after the JSON value", line, col);
    }
    if (!cJSON_IsObject(*doc))
        return gm_fail(r->st, GM_EFORMAT, "%s: the top level must be an object, found %s", r->what,
                       found(r, *root, buf, sizeof buf));
    return check_unique_keys(r, *root);
}

int gm_config_parse(gm_config *c, const char *json, size_t len, const char *what,
                    gm_status *st)
{
    int oom = 0;
    reader r = {what ? what : "config.json", json + len, st, &oom};
    gm_config cfg = {0};
    cJSON *doc = NULL;
    node root, v;
    char buf[48];
    int rc;

    if ((rc = open_doc(&r, json, len, &doc, &root)) != GM_OK)
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
    if (!member(&r, root, "num_key_value_heads").json) /* a diff says where its value came from */
        cfg.json_key[GM_CONFIG_n_kv_heads] = "num_key_value_heads absent: num_attention_heads";
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
        (rc = read_rope_base(&r, root, &cfg.rope_base, &cfg.json_key[GM_CONFIG_rope_base])) ||
        (rc = read_rope_scaling(&r, root, &cfg.rope_scaling, &cfg.json_key[GM_CONFIG_rope_scaling])) ||
        (rc = read_dtype(&r, root, &cfg.dtype, &cfg.json_key[GM_CONFIG_dtype])) ||
        (rc = read_quant(&r, root, &cfg.quant)))
        goto out;

    if (oom)
        goto out;
    *c = cfg;
    rc = GM_OK;
out:
    if (oom) /* a key could not be decoded: whatever followed is unfounded */
        rc = gm_fail(st, GM_ENOMEM, "%s: out of memory", r.what);
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

int gm_config_parse_architecture(const char *json, size_t len, const char *what,
                                 char *out, size_t size, gm_status *st)
{
    int oom = 0;
    reader r = {what ? what : "config.json", json + len, st, &oom};
    cJSON *doc = NULL;
    node root, archs;
    int rc;

    if ((rc = open_doc(&r, json, len, &doc, &root)) != GM_OK)
        goto out;
    archs = member(&r, root, "architectures");
    if (archs.json == NULL) {
        rc = gm_fail(st, GM_EMISSING, "%s: required key 'architectures' is missing", r.what);
    } else if (!cJSON_IsArray(archs.json) || !cJSON_IsString(archs.json->child)) {
        rc = gm_fail(st, GM_EFORMAT, "%s: architectures must be a non-empty list of strings", r.what);
    } else if ((rc = check_no_nul(&r, element(&r, archs, archs.json->child), "architectures[0]")) != GM_OK) {
        /* holds a NUL: st says so */
    } else if (strlen(archs.json->child->valuestring) >= size) {
        rc = gm_fail(st, GM_EFORMAT, "%s: architectures[0] is longer than %zu bytes", r.what,
                     size ? size - 1 : 0);
    } else {
        memcpy(out, archs.json->child->valuestring, strlen(archs.json->child->valuestring) + 1);
    }
out:
    if (oom)
        rc = gm_fail(st, GM_ENOMEM, "%s: out of memory", r.what);
    cJSON_Delete(doc);
    return rc;
}

int gm_config_read_architecture(const char *path, char *out, size_t size, gm_status *st)
{
    char *text = NULL;
    size_t n = 0;
    int rc = gm_read_file(path, CONFIG_MAX_BYTES, &text, &n, st);
    if (rc == GM_OK)
        rc = gm_config_parse_architecture(text, n, path, out, size, st);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* comparing two Configs */

/* The line gm_config_diff writes: appends stop at the end and mark the cut. */
typedef struct diff_line {
    char *out;
    size_t size, used;
    int count;
} diff_line;

static void diff_put(diff_line *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void diff_put(diff_line *d, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (d->size == 0)
        return;
    if (d->used + 1 < d->size) {
        va_start(ap, fmt);
        n = vsnprintf(d->out + d->used, d->size - d->used, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < d->size - d->used) {
            d->used += (size_t)n;
            return;
        }
    }
    /* no room for all of it: vsnprintf kept what fits and the NUL; end on "..." */
    d->used = d->size - 1;
    d->out[d->used] = '\0';
    if (d->size >= 4)
        memcpy(d->out + d->size - 4, "...", 3);
}

/* One differing field: "name (key) is <got>, config.json says <want>". */
static void diff_field(diff_line *d, const char *field, const char *key, const char *got,
                       const char *want)
{
    diff_put(d, "%s%s%s%s%s is %s, config.json says %s", d->count ? "; " : "", field,
             key ? " (" : "", key ? key : "", key ? ")" : "", got, want);
    d->count++;
}

/*
** The shortest text that reads back as v: whole numbers in full (500000, not
** 5e+05), others the shortest %g (1e-06, not 9.9999999999999995e-07).
*/
static const char *show_double(double v, char *buf, size_t n)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return buf;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static const char *show_ids(int count, const int *ids, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < count && i < GM_MAX_EOS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? ", " : "", ids[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}

static const char *rope_type_name(gm_rope_type t)
{
    return t == GM_ROPE_LLAMA3 ? "llama3" : t == GM_ROPE_DEFAULT ? "default" : "unknown";
}

/* Two id lists, only their first count ids (the slots past it are not part of the Config). */
static int same_ids(int na, const int *a, int nb, const int *b)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na && i < GM_MAX_EOS; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* The key to name beside field i in a diff: the one want was read from, else the list's; NULL when it is the field's own name. */
static const char *shown_key(const gm_config *want, int i, const char *field, const char *key)
{
    if (want->json_key[i])
        key = want->json_key[i];
    return key && strcmp(key, field) != 0 ? key : NULL;
}

/* rope_scaling's type and, for llama3, its four numbers, named inside the object config.json used. */
static void diff_rope(diff_line *d, const char *field, const char *object, const gm_rope_scaling *got,
                      const gm_rope_scaling *want)
{
    char name[64], key[64], g[64], w[64];
    if (got->type != want->type) {
        snprintf(name, sizeof name, "%s.type", field);
        snprintf(key, sizeof key, "%s.rope_type", object);
        diff_field(d, name, key, rope_type_name(got->type), rope_type_name(want->type));
    }
#define ROPE_PART(part, fmt_got, fmt_want)                                                         \
    if (got->part != want->part) {                                                                 \
        snprintf(name, sizeof name, "%s.%s", field, #part);                                        \
        snprintf(key, sizeof key, "%s.%s", object, #part);                                         \
        diff_field(d, name, strcmp(name, key) ? key : NULL, fmt_got, fmt_want);                    \
    }
    ROPE_PART(factor, show_double(got->factor, g, sizeof g), show_double(want->factor, w, sizeof w))
    ROPE_PART(low_freq_factor, show_double(got->low_freq_factor, g, sizeof g),
              show_double(want->low_freq_factor, w, sizeof w))
    ROPE_PART(high_freq_factor, show_double(got->high_freq_factor, g, sizeof g),
              show_double(want->high_freq_factor, w, sizeof w))
    ROPE_PART(original_max_position_embeddings,
              (snprintf(g, sizeof g, "%d", got->original_max_position_embeddings), g),
              (snprintf(w, sizeof w, "%d", want->original_max_position_embeddings), w))
#undef ROPE_PART
}

/*
** The quantization, by the config.json key each field comes from:
** "quant.group_size (quantization_config.group_size) is 128, config.json says 64";
** a method that differs is all that is said.
*/
static void diff_quant(diff_line *d, const gm_quant_config *got, const gm_quant_config *want)
{
    char g[32], w[32];
    const int fp8 = want->method == GM_QUANT_FP8, q4nx = want->method == GM_QUANT_Q4NX;
    if (got->method != want->method) {
        diff_field(d, "quant.method", q4nx || got->method == GM_QUANT_Q4NX ? "quantization_config.quant_method, or "
                   "a model.q4nx bundle" : "quantization_config.quant_method", gm_quant_method_name(got->method),
                   gm_quant_method_name(want->method));
        return;
    }
#define QUANT_INT(f, key)                                                                          \
    if (got->f != want->f) {                                                                       \
        snprintf(g, sizeof g, "%d", got->f);                                                       \
        snprintf(w, sizeof w, "%d", want->f);                                                      \
        diff_field(d, "quant." #f, q4nx ? "model.q4nx" : key, g, w);                               \
    }
#define QUANT_BOOL(f, key)                                                                         \
    if (got->f != want->f)                                                                         \
        diff_field(d, "quant." #f, key, got->f ? "true" : "false", want->f ? "true" : "false");
    QUANT_INT(bits, "quantization_config.bits")
    QUANT_INT(group_size, fp8 ? "quantization_config.weight_block_size[1]" : "quantization_config.group_size")
    QUANT_INT(block_out, "quantization_config.weight_block_size[0]")
    QUANT_BOOL(zero_point, "quantization_config.zero_point")
    QUANT_BOOL(sym, "quantization_config.sym")
    QUANT_BOOL(desc_act, "quantization_config.desc_act")
    QUANT_BOOL(gptq_v2, "quantization_config.checkpoint_format gptq_v2")
#undef QUANT_INT
#undef QUANT_BOOL
}

/* Every field of GM_CONFIG_FIELDS compared by its kind. */
int gm_config_diff(const gm_config *got, const gm_config *want, char *out, size_t size)
{
    diff_line d = {out, out ? size : 0, 0, 0};
    char g[160], w[160];

    if (d.size)
        out[0] = '\0';
#define DIFF_INT(i, f, key)                                                                        \
    if (got->f != want->f) {                                                                       \
        snprintf(g, sizeof g, "%d", got->f);                                                       \
        snprintf(w, sizeof w, "%d", want->f);                                                      \
        diff_field(&d, #f, shown_key(want, i, #f, key), g, w);                                     \
    }
#define DIFF_TOKEN DIFF_INT
#define DIFF_DOUBLE(i, f, key)                                                                     \
    if (got->f != want->f)                                                                         \
        diff_field(&d, #f, shown_key(want, i, #f, key), show_double(got->f, g, sizeof g),          \
                   show_double(want->f, w, sizeof w));
#define DIFF_BOOL(i, f, key)                                                                       \
    if (got->f != want->f)                                                                         \
        diff_field(&d, #f, shown_key(want, i, #f, key), got->f ? "true" : "false", want->f ? "true" : "false");
#define DIFF_ARCH(i, f, key)                                                                       \
    if (got->f != want->f)                                                                         \
        diff_field(&d, #f, "from architectures[0]", got->f ? "true" : "false", want->f ? "true" : "false");
#define DIFF_ROPE(i, f, key) diff_rope(&d, #f, want->json_key[i] ? want->json_key[i] : key, &got->f, &want->f);
#define DIFF_EOS(i, f, key)                                                                        \
    if (!same_ids(got->n_##f, got->f, want->n_##f, want->f))                                       \
        diff_field(&d, #f, shown_key(want, i, #f, key), show_ids(got->n_##f, got->f, g, sizeof g),  \
                   show_ids(want->n_##f, want->f, w, sizeof w));
#define DIFF_DTYPE(i, f, key)                                                                      \
    if (got->f != want->f)                                                                         \
        diff_field(&d, #f, shown_key(want, i, #f, key), gm_dtype_name(got->f), gm_dtype_name(want->f));
#define DIFF_QUANT(i, f, key) diff_quant(&d, &got->f, &want->f);
#define DIFF(kind, field, key, key5, rule) DIFF_##kind(GM_CONFIG_##field, field, key)
    GM_CONFIG_FIELDS(DIFF)
#undef DIFF
#undef DIFF_INT
#undef DIFF_TOKEN
#undef DIFF_DOUBLE
#undef DIFF_BOOL
#undef DIFF_ARCH
#undef DIFF_ROPE
#undef DIFF_EOS
#undef DIFF_DTYPE
#undef DIFF_QUANT
    return d.count;
}

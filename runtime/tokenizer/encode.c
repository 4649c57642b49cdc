/*
** The encode pipeline, single- and multi-threaded.
**
** Encode follows the reference's order: added tokens with normalized false
** are cut out of the raw text (leftmost-longest, honouring lstrip, rstrip and
** single_word; special ones only when parse_special); each stretch between
** them is normalized, then cut again at added tokens with normalized true,
** pre-tokenized, and each pre-token run through BPE. The post-processor's
** ids go around the whole sequence.
*/
#include "tokenizer_types.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "gm/utf8.h"
#include "maps.h"
#include "normalize.h"
#include "pretokenize.h"
#include "unicode.h"

typedef struct enc_ctx {
    const gm_tokenizer *t;
    int parse_special;
    tk_scratch *scratch;
    gm_buf norm;
    gm_buf pre; /* the text a Metaspace step wrote */
    tk_spans spans;
    tk_ids out;
    gm_status err; /* what failed, when it is not out of memory: a regex the engine gave up on */
} enc_ctx;

static void ctx_free(enc_ctx *c)
{
    tk_scratch_free(c->scratch);
    free(c->norm.p);
    free(c->pre.p);
    free(c->spans.p);
    free(c->out.p);
}

/* ------------------------------------------------------------ added tokens */

static size_t trim_ws_left(const char *s, size_t start, size_t floor)
{
    // move start left over White_Space characters, not below floor
    size_t i = start;
    while (i > floor) {
        size_t j = i - 1;
        while (j > floor && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        size_t adv;
        uint32_t c = gm_utf8_decode(s + j, i - j, &adv);
        if (!tk_is_white_space(c))
            break;
        i = j;
    }
    return i;
}

static size_t trim_ws_right(const char *s, size_t stop, size_t n)
{
    while (stop < n) {
        size_t adv;
        uint32_t c = gm_utf8_decode(s + stop, n - stop, &adv);
        if (!tk_is_white_space(c))
            break;
        stop += adv;
    }
    return stop;
}

static int word_before(const char *s, size_t i)
{
    if (i == 0)
        return 0;
    size_t j = i - 1, adv;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
        j--;
    return tk_is_word_char(gm_utf8_decode(s + j, i - j, &adv));
}

static int word_after(const char *s, size_t i, size_t n)
{
    size_t adv;
    return i < n && tk_is_word_char(gm_utf8_decode(s + i, n - i, &adv));
}

/*
** The next added token in s[from, n): leftmost-longest among m's tokens, as
** an Aho-Corasick LeftmostLongest iterator finds them; a match that is
** skipped (a special token while not parsing them, a failed single_word)
** still consumes its text. Returns 1 with the token's span and id, else 0.
*/
static int next_added(const gm_tokenizer *t, const tk_matcher *m, int norm, int parse_special, const char *s,
                      size_t n, size_t from, size_t floor, size_t *ms, size_t *me, int32_t *id)
{
    size_t i = from;

    if (m->count == 0)
        return 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        uint32_t k0 = m->first[c], k1 = m->first[c + 1];
        const tk_added *hit = NULL;
        size_t hlen = 0;
        for (uint32_t k = k0; k < k1; k++) {
            const tk_added *a = &t->added[m->order[k]];
            const char *p = t->arena.p + (norm ? a->noff : a->off);
            size_t len = norm ? a->nlen : a->len;
            if (len <= n - i && memcmp(s + i, p, len) == 0) {
                hit = a;
                hlen = len;
                break;
            }
        }
        if (hit == NULL) {
            i++;
            continue;
        }
        size_t start = i, stop = i + hlen;
        if ((hit->special && !parse_special) ||
            (hit->single_word && (word_before(s, start) || word_after(s, stop, n)))) {
            i = stop;
            continue;
        }
        if (hit->lstrip)
            start = trim_ws_left(s, start, floor);
        if (hit->rstrip)
            stop = trim_ws_right(s, stop, n);
        *ms = start;
        *me = stop;
        *id = !parse_special && t->quirks && !hit->special ? hit->quirk_id : hit->id;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ encode */

/* One stretch of normalized text into ids; at_start: it begins where the input text begins. */
static int model_piece(enc_ctx *c, const char *s, size_t n, int at_start)
{
    const gm_tokenizer *t = c->t;

    if (n == 0)
        return 0;
    if (tk_pretokenize(t->pre, t->n_pre, s, n, at_start, &c->pre, &s, &c->spans, t->path, &c->err) != 0)
        return -1;
    for (size_t i = 0; i < c->spans.n; i++) {
        size_t a = c->spans.p[2 * i], b = c->spans.p[2 * i + 1];
        if (tk_bpe_word(&t->bpe, t->arena.p, c->scratch, s + a, b - a, &c->out) != 0)
            return -1;
    }
    return 0;
}

/* One stretch between raw added tokens: normalize, cut at normalized added tokens, model. */
static int normalized_piece(enc_ctx *c, const char *s, size_t n, int at_start)
{
    const gm_tokenizer *t = c->t;
    const char *ns = s;
    size_t nn = n, pos = 0, ms, me;
    int32_t id;

    if (n == 0)
        return 0;
    if (t->n_norm > 0) {
        if (tk_normalize(t->norm, t->n_norm, s, n, &c->norm) != 0)
            return -1;
        ns = c->norm.p;
        nn = c->norm.n;
    }
    if (t->match_norm.count == 0)
        return model_piece(c, ns, nn, at_start);
    // the normalized text may be reused by model_piece's callees; keep our own copy
    char *copy = malloc(nn ? nn : 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, ns, nn);
    int rc = 0;
    while (rc == 0 && next_added(t, &t->match_norm, 1, c->parse_special, copy, nn, pos, pos, &ms, &me, &id)) {
        rc = model_piece(c, copy + pos, ms - pos, at_start && pos == 0);
        if (rc == 0)
            rc = tk_ids_push(&c->out, id);
        pos = me;
    }
    if (rc == 0)
        rc = model_piece(c, copy + pos, nn - pos, at_start && pos == 0);
    free(copy);
    return rc;
}

static int encode_text(enc_ctx *c, const char *s, size_t n)
{
    const gm_tokenizer *t = c->t;
    size_t pos = 0, ms, me;
    int32_t id;

    while (next_added(t, &t->match_raw, 0, c->parse_special, s, n, pos, pos, &ms, &me, &id)) {
        if (normalized_piece(c, s + pos, ms - pos, pos == 0) != 0 || tk_ids_push(&c->out, id) != 0)
            return -1;
        pos = me;
    }
    return normalized_piece(c, s + pos, n - pos, pos == 0);
}

static int check_text(const gm_tokenizer *t, const char *text, size_t len, gm_status *st)
{
    size_t bad = gm_utf8_check(text, len);
    (void)t;
    if (bad != len)
        return gm_fail(st, GM_EFORMAT, "text: invalid UTF-8 at byte %zu", bad);
    return 0;
}

int gm_tokenizer_encode(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **ids, size_t *n, gm_status *st)
{
    enc_ctx c = {0};
    int rc = 0;

    *ids = NULL;
    *n = 0;
    if ((rc = check_text(t, text, len, st)) != 0)
        return rc;
    c.t = t;
    c.parse_special = parse_special;
    c.scratch = tk_scratch_new();
    if (c.scratch == NULL || (add_special && tk_ids_put(&c.out, t->pp_before, t->n_before) != 0) ||
        encode_text(&c, text, len) != 0 || (add_special && tk_ids_put(&c.out, t->pp_after, t->n_after) != 0) ||
        tk_ids_push(&c.out, 0) != 0) {
        if (c.err.code == GM_OK)
            gm_fail(&c.err, GM_ENOMEM, "%s: encode: out of memory", t->path);
        rc = c.err.code;
        if (st != NULL)
            *st = c.err;
        goto out;
    }
    c.out.n--; // the pushed 0 only guarantees a non-NULL buffer for empty results
    *ids = c.out.p;
    *n = c.out.n;
    c.out.p = NULL;
out:
    ctx_free(&c);
    return rc;
}

/* ----------------------------------------------------------- multi-thread */

typedef struct mt_job {
    const gm_tokenizer *t;
    const char *s;
    size_t n;
    int parse_special;
    int32_t *ids;
    size_t count;
    int rc;
    gm_status st;
} mt_job;

static void *mt_run(void *arg)
{
    mt_job *j = arg;
    j->rc = gm_tokenizer_encode(j->t, j->s, j->n, 0, j->parse_special, &j->ids, &j->count, &j->st);
    return NULL;
}

/* A cut at or after want: just after a "\n" that an ASCII graphic character follows. */
static size_t safe_cut(const char *s, size_t n, size_t want)
{
    for (size_t i = want ? want : 1; i < n; i++)
        if (s[i - 1] == '\n' && s[i] > 0x20 && s[i] < 0x7F)
            return i;
    return n;
}

enum { MT_MIN_BYTES = 1 << 16, MT_MAX_THREADS = 16 };

int gm_tokenizer_encode_mt(const gm_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           int n_threads, int32_t **ids, size_t *n, gm_status *st)
{
    mt_job jobs[MT_MAX_THREADS];
    pthread_t tid[MT_MAX_THREADS];
    int started[MT_MAX_THREADS] = {0};
    size_t k = 0, pos = 0, total;
    int rc = 0;

    if (n_threads > MT_MAX_THREADS)
        n_threads = MT_MAX_THREADS;
    if (!t->mt_safe || n_threads < 2 || len < MT_MIN_BYTES)
        return gm_tokenizer_encode(t, text, len, add_special, parse_special, ids, n, st);
    *ids = NULL;
    *n = 0;
    if ((rc = check_text(t, text, len, st)) != 0)
        return rc;
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n_threads && pos < len; i++) {
        size_t cut = i == n_threads - 1 ? len : safe_cut(text, len, pos + (len - pos) / (size_t)(n_threads - i));
        jobs[k] = (mt_job){t, text + pos, cut - pos, parse_special, NULL, 0, 0, {0, {0}}};
        k++;
        pos = cut;
    }
    for (size_t i = 1; i < k; i++)
        started[i] = pthread_create(&tid[i], NULL, mt_run, &jobs[i]) == 0;
    mt_run(&jobs[0]);
    for (size_t i = 1; i < k; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            mt_run(&jobs[i]);
    }
    total = add_special ? t->n_before + t->n_after : 0;
    for (size_t i = 0; i < k; i++) {
        if (jobs[i].rc != 0 && rc == 0) {
            rc = jobs[i].rc;
            if (st != NULL)
                *st = jobs[i].st;
        }
        total += jobs[i].count;
    }
    if (rc == 0) {
        int32_t *p = malloc((total ? total : 1) * sizeof *p);
        if (p == NULL) {
            rc = gm_fail(st, GM_ENOMEM, "%s: encode: out of memory", t->path);
        } else {
            size_t o = 0;
            if (add_special && t->n_before) {
                memcpy(p, t->pp_before, t->n_before * sizeof *p);
                o += t->n_before;
            }
            for (size_t i = 0; i < k; i++) {
                if (jobs[i].count)
                    memcpy(p + o, jobs[i].ids, jobs[i].count * sizeof *p);
                o += jobs[i].count;
            }
            if (add_special && t->n_after) {
                memcpy(p + o, t->pp_after, t->n_after * sizeof *p);
                o += t->n_after;
            }
            *ids = p;
            *n = o;
        }
    }
    for (size_t i = 0; i < k; i++)
        free(jobs[i].ids);
    return rc;
}

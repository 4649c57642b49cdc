/*
** The BPE model on one pre-token.
**
** BPE follows the reference's rules exactly: a word starts as one symbol per
** character (per byte for byte-level vocabularies), a character missing from
** the vocab becomes <0xNN> byte tokens when byte_fallback is on, else the unk
** token (consecutive unknowns fused into one with fuse_unk), else nothing.
** Then the adjacent pair with the lowest merge rank is merged, the leftmost
** first on ties, until no pair has a merge. With ignore_merges a word that
** is itself a vocab entry is that one token.
*/
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

#include "gm/buf.h"
#include "gm/utf8.h"
#include "unicode.h"

/* ----------------------------------------------------------------- scratch */

/* A per-call cache of word -> ids, so repeated words skip the merges. */
typedef struct cache_slot {
    uint32_t hash, key_off, key_len; /* key_len == UINT32_MAX: empty */
    uint32_t ids_off, ids_n;
} cache_slot;

enum { CACHE_CAP = 1 << 15, CACHE_MAX_WORD = 64 };

typedef struct heap_item {
    uint32_t rank, pos;
    int32_t id;
} heap_item;

typedef struct sym {
    int32_t id;
    int32_t prev, next;
    int32_t alive;
} sym;

struct tk_scratch {
    tk_ids ids;     /* the word's symbols */
    uint32_t *ranks; int32_t *news; size_t rcap;
    sym *syms; size_t scap;
    heap_item *heap; size_t hn, hcap;
    gm_buf key;     /* byte-level spelling of a word */
    cache_slot *cache; size_t cache_count;
    gm_buf cache_keys;
    tk_ids cache_ids;
};

tk_scratch *tk_scratch_new(void)
{
    return calloc(1, sizeof(tk_scratch));
}

void tk_scratch_free(tk_scratch *s)
{
    if (s == NULL)
        return;
    free(s->ids.p);
    free(s->ranks);
    free(s->news);
    free(s->syms);
    free(s->heap);
    free(s->key.p);
    free(s->cache);
    free(s->cache_keys.p);
    free(s->cache_ids.p);
    free(s);
}

static cache_slot *cache_find(tk_scratch *s, const char *w, size_t n, uint32_t h)
{
    size_t mask = CACHE_CAP - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        cache_slot *c = &s->cache[i];
        if (c->key_len == UINT32_MAX)
            return c;
        if (c->hash == h && c->key_len == n && memcmp(s->cache_keys.p + c->key_off, w, n) == 0)
            return c;
    }
}

/* ------------------------------------------------------------ BPE: symbols */

static int unknown_char(const tk_bpe *bpe, tk_scratch *s, const char *c, size_t clen, int32_t *unk_pending)
{
    if (bpe->byte_fallback) {
        size_t i;
        for (i = 0; i < clen; i++)
            if (bpe->fallback_ids[(unsigned char)c[i]] < 0)
                break;
        if (i == clen) {
            // as in the reference, a pending unk is not flushed before the byte tokens
            for (i = 0; i < clen; i++)
                if (tk_ids_push(&s->ids, bpe->fallback_ids[(unsigned char)c[i]]) != 0)
                    return -1;
            return 0;
        }
    }
    if (bpe->unk_id >= 0) {
        if (*unk_pending >= 0 && !bpe->fuse_unk)
            if (tk_ids_push(&s->ids, *unk_pending) != 0)
                return -1;
        *unk_pending = bpe->unk_id;
    }
    return 0;
}

static int known_char(tk_scratch *s, int32_t id, int32_t *unk_pending)
{
    if (*unk_pending >= 0) {
        if (tk_ids_push(&s->ids, *unk_pending) != 0)
            return -1;
        *unk_pending = -1;
    }
    return tk_ids_push(&s->ids, id);
}

static int initial_symbols(const tk_bpe *bpe, const char *arena, tk_scratch *s, const char *w, size_t n)
{
    int32_t unk = -1;

    s->ids.n = 0;
    if (bpe->byte_level) {
        for (size_t i = 0; i < n; i++) {
            unsigned char b = (unsigned char)w[i];
            int32_t id = bpe->byte_ids[b];
            if (id >= 0) {
                if (known_char(s, id, &unk) != 0)
                    return -1;
            } else {
                char u[2];
                size_t ul = tk_byte_char(b, u);
                if (unknown_char(bpe, s, u, ul, &unk) != 0)
                    return -1;
            }
        }
    } else {
        for (size_t i = 0; i < n;) {
            size_t cl = (size_t)gm_utf8_lead_len((unsigned char)w[i]);
            if (cl == 0 || cl > n - i)
                cl = 1; // the caller validated the text; stay safe anyway
            int32_t id = tk_str_map_get(&bpe->vocab, arena, w + i, cl);
            if (id >= 0) {
                if (known_char(s, id, &unk) != 0)
                    return -1;
            } else if (unknown_char(bpe, s, w + i, cl, &unk) != 0) {
                return -1;
            }
            i += cl;
        }
    }
    if (unk >= 0 && tk_ids_push(&s->ids, unk) != 0)
        return -1;
    return 0;
}

/* -------------------------------------------------------------- BPE: merge */

/* Short words: an array of symbols and the rank of each adjacent pair. */
static int merge_small(const tk_bpe *bpe, tk_scratch *s)
{
    size_t m = s->ids.n;
    int32_t *ids = s->ids.p;

    if (m < 2)
        return 0;
    if (s->rcap < m) {
        uint32_t *r = realloc(s->ranks, m * sizeof *r);
        if (r == NULL)
            return -1;
        s->ranks = r;
        int32_t *nw = realloc(s->news, m * sizeof *nw);
        if (nw == NULL)
            return -1;
        s->news = nw;
        s->rcap = m;
    }
    uint32_t *ranks = s->ranks;
    int32_t *news = s->news;
    for (size_t i = 0; i + 1 < m; i++) {
        const tk_pair_slot *p = tk_pair_map_get(&bpe->merges, ids[i], ids[i + 1]);
        ranks[i] = p ? p->rank : UINT32_MAX;
        news[i] = p ? p->id : -1;
    }
    for (;;) {
        size_t best = 0;
        uint32_t r = UINT32_MAX;
        for (size_t i = 0; i + 1 < m; i++)
            if (ranks[i] < r) {
                r = ranks[i];
                best = i;
            }
        if (r == UINT32_MAX)
            break;
        ids[best] = news[best];
        memmove(ids + best + 1, ids + best + 2, (m - best - 2) * sizeof *ids);
        if (best + 2 < m) {
            memmove(ranks + best + 1, ranks + best + 2, (m - best - 3) * sizeof *ranks);
            memmove(news + best + 1, news + best + 2, (m - best - 3) * sizeof *news);
        }
        m--;
        for (size_t k = best ? best - 1 : 0; k <= best && k + 1 < m; k++) {
            const tk_pair_slot *p = tk_pair_map_get(&bpe->merges, ids[k], ids[k + 1]);
            ranks[k] = p ? p->rank : UINT32_MAX;
            news[k] = p ? p->id : -1;
        }
    }
    s->ids.n = m;
    return 0;
}

static int heap_less(const heap_item *a, const heap_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(tk_scratch *s, uint32_t rank, uint32_t pos, int32_t id)
{
    if (s->hn == s->hcap) {
        size_t cap = s->hcap ? s->hcap * 2 : 256;
        heap_item *h = realloc(s->heap, cap * sizeof *h);
        if (h == NULL)
            return -1;
        s->heap = h;
        s->hcap = cap;
    }
    size_t i = s->hn++;
    heap_item it = {rank, pos, id};
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&it, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = it;
    return 0;
}

static heap_item heap_pop(tk_scratch *s)
{
    heap_item top = s->heap[0], last = s->heap[--s->hn];
    size_t i = 0, n = s->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!heap_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0)
        s->heap[i] = last;
    return top;
}

/* Long words: a linked list of symbols and a min-heap of (rank, position). */
static int merge_large(const tk_bpe *bpe, tk_scratch *s)
{
    size_t m = s->ids.n;

    if (s->scap < m) {
        sym *y = realloc(s->syms, m * sizeof *y);
        if (y == NULL)
            return -1;
        s->syms = y;
        s->scap = m;
    }
    sym *y = s->syms;
    s->hn = 0;
    for (size_t i = 0; i < m; i++) {
        y[i].id = s->ids.p[i];
        y[i].prev = (int32_t)i - 1;
        y[i].next = i + 1 < m ? (int32_t)i + 1 : -1;
        y[i].alive = 1;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        const tk_pair_slot *p = tk_pair_map_get(&bpe->merges, y[i].id, y[i + 1].id);
        if (p != NULL && heap_push(s, p->rank, (uint32_t)i, p->id) != 0)
            return -1;
    }
    while (s->hn > 0) {
        heap_item top = heap_pop(s);
        sym *a = &y[top.pos];
        if (!a->alive || a->next < 0)
            continue;
        sym *b = &y[a->next];
        const tk_pair_slot *p = tk_pair_map_get(&bpe->merges, a->id, b->id);
        if (p == NULL || p->id != top.id || p->rank != top.rank)
            continue; // stale
        a->id = top.id;
        b->alive = 0;
        a->next = b->next;
        if (b->next >= 0)
            y[b->next].prev = (int32_t)top.pos;
        if (a->prev >= 0) {
            const tk_pair_slot *q = tk_pair_map_get(&bpe->merges, y[a->prev].id, a->id);
            if (q != NULL && heap_push(s, q->rank, (uint32_t)a->prev, q->id) != 0)
                return -1;
        }
        if (a->next >= 0) {
            const tk_pair_slot *q = tk_pair_map_get(&bpe->merges, a->id, y[a->next].id);
            if (q != NULL && heap_push(s, q->rank, top.pos, q->id) != 0)
                return -1;
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0 && (size_t)i < m; i = y[i].next)
        s->ids.p[k++] = y[i].id;
    s->ids.n = k;
    return 0;
}

/* ------------------------------------------------------------- BPE: a word */

int tk_bpe_word(const tk_bpe *bpe, const char *arena, tk_scratch *s, const char *w, size_t n, tk_ids *out)
{
    cache_slot *slot = NULL;
    uint32_t h = 0;

    if (n == 0)
        return 0;
    if (bpe->ignore_merges) {
        const char *key = w;
        size_t klen = n;
        if (bpe->byte_level) {
            s->key.n = 0;
            if (gm_buf_reserve(&s->key, 2 * n) != 0)
                return -1;
            for (size_t i = 0; i < n; i++)
                s->key.n += tk_byte_char((unsigned char)w[i], s->key.p + s->key.n);
            key = s->key.p;
            klen = s->key.n;
        }
        int32_t id = tk_str_map_get(&bpe->vocab, arena, key, klen);
        if (id >= 0)
            return tk_ids_push(out, id);
    }
    if (n <= CACHE_MAX_WORD) {
        if (s->cache == NULL) {
            s->cache = malloc(CACHE_CAP * sizeof *s->cache);
            if (s->cache == NULL)
                return -1;
            for (size_t i = 0; i < CACHE_CAP; i++)
                s->cache[i].key_len = UINT32_MAX;
        }
        h = tk_hash(w, n);
        slot = cache_find(s, w, n, h);
        if (slot->key_len != UINT32_MAX) // a word of no ids may be cached before any id is (NULL + 0)
            return slot->ids_n ? tk_ids_put(out, s->cache_ids.p + slot->ids_off, slot->ids_n) : 0;
    }
    if (initial_symbols(bpe, arena, s, w, n) != 0)
        return -1;
    if ((s->ids.n <= 256 ? merge_small(bpe, s) : merge_large(bpe, s)) != 0)
        return -1;
    if (slot != NULL && s->cache_count < CACHE_CAP / 2 && s->cache_keys.n < UINT32_MAX / 2 &&
        s->cache_ids.n < UINT32_MAX / 2) {
        slot->hash = h;
        slot->key_off = (uint32_t)s->cache_keys.n;
        slot->ids_off = (uint32_t)s->cache_ids.n;
        slot->ids_n = (uint32_t)s->ids.n;
        if (gm_buf_put(&s->cache_keys, w, n) != 0 || tk_ids_put(&s->cache_ids, s->ids.p, s->ids.n) != 0)
            return -1;
        slot->key_len = (uint32_t)n;
        s->cache_count++;
    }
    return tk_ids_put(out, s->ids.p, s->ids.n);
}

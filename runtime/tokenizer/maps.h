/*
** The tokenizer's shared containers (not installed): a growable id vector
** and two open-addressing hash maps, string -> id (the vocab, the added
** tokens) and (id, id) -> (rank, merged id) (the merges). They are the
** bottom layer: they call nothing else of the tokenizer, so every part may
** use them.
**
** The lookups and the appends are inline because their hot callers (BPE per
** character, pair and word, the merges reader per entry) live in other files
** and the build has no LTO; out of line they would cost a call each.
*/
#ifndef GM_TK_MAPS_H
#define GM_TK_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* --------------------------------------------------------------- id vector */

typedef struct tk_ids {
    int32_t *p;
    size_t n, cap;
} tk_ids;

/* Room for extra more ids: 0, or -1 when memory runs out (v unchanged). */
int tk_ids_reserve(tk_ids *v, size_t extra);

static inline int tk_ids_push(tk_ids *v, int32_t id)
{
    if (v->n == v->cap && tk_ids_reserve(v, 1) != 0)
        return -1;
    v->p[v->n++] = id;
    return 0;
}

static inline int tk_ids_put(tk_ids *v, const int32_t *ids, size_t n)
{
    if (tk_ids_reserve(v, n) != 0)
        return -1;
    if (n > 0)
        memcpy(v->p + v->n, ids, n * sizeof *ids);
    v->n += n;
    return 0;
}

/* ------------------------------------------------------------ string -> id */

/* Keys live in an arena the caller owns (offset, length); the map stores no bytes of its own. */
typedef struct tk_str_slot {
    uint32_t off, len; /* len == UINT32_MAX: empty slot */
    int32_t id;
    uint32_t hash;
    uint64_t head; /* the key's first 8 bytes, zero-padded: short keys compare without the arena */
} tk_str_slot;

typedef struct tk_str_map {
    tk_str_slot *slots;
    size_t cap, count; /* cap is a power of two */
} tk_str_map;

static inline uint32_t tk_hash(const void *key, size_t n)
{
    // 64-bit multiply-xorshift over 8-byte words; plenty for token strings
    const unsigned char *p = key;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);

    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    h *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(h >> 32);
}

static inline uint64_t tk_key_head(const char *key, size_t len)
{
    uint64_t h = 0;
    memcpy(&h, key, len < 8 ? len : 8);
    return h;
}

int tk_str_map_init(tk_str_map *m, size_t expected);
void tk_str_map_free(tk_str_map *m);
/* Insert or overwrite; key must already be in the arena at off. Returns 0 or -1 (no memory). */
int tk_str_map_put(tk_str_map *m, const char *arena, uint32_t off, uint32_t len, int32_t id);

/* The id of key, or -1. */
static inline int32_t tk_str_map_get(const tk_str_map *m, const char *arena, const char *key, size_t len)
{
    if (m->cap == 0)
        return -1;
    uint32_t h = tk_hash(key, len);
    uint64_t head = tk_key_head(key, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const tk_str_slot *s = &m->slots[i];
        if (s->len == UINT32_MAX)
            return -1;
        if (s->hash == h && s->len == len && s->head == head &&
            (len <= 8 || memcmp(arena + s->off + 8, key + 8, len - 8) == 0))
            return s->id;
    }
}

/* ---------------------------------------------------------- (id, id) -> id */

typedef struct tk_pair_slot {
    uint64_t key; /* UINT64_MAX: empty */
    uint32_t rank;
    int32_t id;
} tk_pair_slot;

typedef struct tk_pair_map {
    tk_pair_slot *slots;
    size_t cap, count;
} tk_pair_map;

int tk_pair_map_init(tk_pair_map *m, size_t expected);
void tk_pair_map_free(tk_pair_map *m);
/* Insert or overwrite (a later duplicate merge wins, as in the reference); grows. Returns 0 or -1. */
int tk_pair_map_put(tk_pair_map *m, int32_t a, int32_t b, uint32_t rank, int32_t id);

static inline const tk_pair_slot *tk_pair_map_get(const tk_pair_map *m, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = m->cap - 1;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;

    for (;;) {
        const tk_pair_slot *s = &m->slots[i];
        if (s->key == key)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & mask;
    }
}

#endif

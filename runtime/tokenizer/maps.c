/*
** The growth and insertion side of the shared containers (maps.h holds the
** lookups). Both maps use linear probing with the load kept under 2/3, so a
** probe sequence stays short without a second hash.
*/
#include "maps.h"

#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- id vector */

int tk_ids_reserve(tk_ids *v, size_t extra)
{
    if (extra > SIZE_MAX / 8 - v->n)
        return -1;
    if (v->n + extra <= v->cap)
        return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->n + extra)
        cap *= 2;
    int32_t *p = realloc(v->p, cap * sizeof *p);
    if (p == NULL)
        return -1;
    v->p = p;
    v->cap = cap;
    return 0;
}

/* ------------------------------------------------------------ string -> id */

static size_t pow2_for(size_t expected)
{
    size_t cap = 16;
    while (cap < expected + expected / 2)
        cap *= 2;
    return cap;
}

int tk_str_map_init(tk_str_map *m, size_t expected)
{
    m->cap = pow2_for(expected);
    m->count = 0;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (m->slots == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        m->slots[i].len = UINT32_MAX;
    return 0;
}

void tk_str_map_free(tk_str_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static void str_insert(tk_str_slot *slots, size_t cap, const tk_str_slot *e)
{
    size_t mask = cap - 1;
    size_t i = e->hash & mask;
    while (slots[i].len != UINT32_MAX)
        i = (i + 1) & mask;
    slots[i] = *e;
}

int tk_str_map_put(tk_str_map *m, const char *arena, uint32_t off, uint32_t len, int32_t id)
{
    uint32_t h = tk_hash(arena + off, len);
    size_t mask = m->cap - 1;

    for (size_t i = h & mask;; i = (i + 1) & mask) {
        tk_str_slot *s = &m->slots[i];
        if (s->len == UINT32_MAX)
            break;
        if (s->hash == h && s->len == len && memcmp(arena + s->off, arena + off, len) == 0) {
            s->id = id;
            return 0;
        }
    }
    if ((m->count + 1) * 3 > m->cap * 2) {
        size_t cap = m->cap * 2;
        tk_str_slot *slots = malloc(cap * sizeof *slots);
        if (slots == NULL)
            return -1;
        for (size_t i = 0; i < cap; i++)
            slots[i].len = UINT32_MAX;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].len != UINT32_MAX)
                str_insert(slots, cap, &m->slots[i]);
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    tk_str_slot e = {off, len, id, h, tk_key_head(arena + off, len)};
    str_insert(m->slots, m->cap, &e);
    m->count++;
    return 0;
}

/* ---------------------------------------------------------- (id, id) -> id */

int tk_pair_map_init(tk_pair_map *m, size_t expected)
{
    m->cap = pow2_for(expected);
    m->count = 0;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (m->slots == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        m->slots[i].key = UINT64_MAX;
    return 0;
}

void tk_pair_map_free(tk_pair_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static void pair_insert(tk_pair_slot *slots, size_t cap, const tk_pair_slot *e)
{
    size_t mask = cap - 1;
    size_t i = (size_t)((e->key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (slots[i].key != UINT64_MAX) {
        if (slots[i].key == e->key) {
            slots[i] = *e;
            return;
        }
        i = (i + 1) & mask;
    }
    slots[i] = *e;
}

int tk_pair_map_put(tk_pair_map *m, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    tk_pair_slot e = {((uint64_t)(uint32_t)a << 32) | (uint32_t)b, rank, id};

    if ((m->count + 1) * 3 > m->cap * 2) {
        // keep the load under 2/3
        size_t cap = m->cap * 2;
        tk_pair_slot *slots = malloc(cap * sizeof *slots);
        if (slots == NULL)
            return -1;
        for (size_t i = 0; i < cap; i++)
            slots[i].key = UINT64_MAX;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].key != UINT64_MAX)
                pair_insert(slots, cap, &m->slots[i]);
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    if (tk_pair_map_get(m, a, b) == NULL)
        m->count++;
    pair_insert(m->slots, m->cap, &e);
    return 0;
}

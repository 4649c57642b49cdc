/* Growable byte buffers; see gm/buf.h. */
#include "gm/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int gm_buf_reserve(gm_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->n)
        return -1;
    if (b->n + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int gm_buf_put(gm_buf *b, const void *p, size_t n)
{
    if (gm_buf_reserve(b, n) != 0)
        return -1;
    if (n > 0)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

/* A growable byte buffer: what a scanner decodes into and a tokenizer builds its strings in. */
#ifndef GM_BUF_H
#define GM_BUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_buf {
    char *p;         /* malloc'd; free(p) releases it */
    size_t n, cap;   /* bytes used, bytes allocated */
} gm_buf;

/* Room for extra more bytes: 0, or -1 when memory runs out (b unchanged). */
int gm_buf_reserve(gm_buf *b, size_t extra);

/* Append n bytes: 0, or -1 when memory runs out (b unchanged). */
int gm_buf_put(gm_buf *b, const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif

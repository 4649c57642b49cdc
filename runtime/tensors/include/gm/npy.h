/*
** NumPy .npy files, format version 1.0, little-endian C order: what the
** goldens are stored in and what diagnosis output is written as, so Python
** reads it with numpy.load.
*/
#ifndef GM_NPY_H
#define GM_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GM_NPY_MAX_RANK 8

typedef enum gm_npy_type { GM_NPY_F4, GM_NPY_I4 } gm_npy_type;

typedef struct gm_npy {
    gm_npy_type type;     /* '<f4' or '<i4' */
    int rank;
    int64_t shape[GM_NPY_MAX_RANK];
    size_t count;         /* product of shape */
    void *data;           /* count elements, malloc'd */
} gm_npy;

/* Read a '<f4' or '<i4' C-order file; anything else is a one-line error. */
int gm_npy_read(const char *path, gm_npy *out, gm_status *st);
void gm_npy_free(gm_npy *a);

/* Write data as '<f4' or '<i4' (via path.<pid>.<n>.tmp beside it, then rename: gm_write_file). */
int gm_npy_write(const char *path, gm_npy_type type, int rank,
                 const int64_t *shape, const void *data, gm_status *st);

#ifdef __cplusplus
}
#endif

#endif

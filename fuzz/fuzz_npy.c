/*
** .npy of odd shapes: byte 0 picks the mode. Mode "round trip": rank (0-9,
** 9 must be refused), dtype, and one byte per dim (small sizes, 0, and
** hostile values: -1, 2^62, INT64_MAX, INT64_MIN); gm_npy_write then gm_npy_read
** must give back the same type, shape and bytes. Mode "read": the rest of the
** input is an .npy file for gm_npy_read.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/npy.h"

static int64_t dim_of(uint8_t b)
{
    switch (b) {
    case 255: return -1;
    case 254: return INT64_C(1) << 62; /* times 4 bytes overflows */
    case 253: return INT64_MAX;
    case 252: return INT64_MIN;
    default: return b % 5;             /* at most 4^8 elements */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0])
        snprintf(path, sizeof path, "%s/a.npy", fz_scratch());
    if (size < 2)
        return 0;
    gm_status st = {0};
    gm_npy a;
    if (data[0] & 0x80) { /* read */
        fz_write(path, data + 1, size - 1);
        if (gm_npy_read(path, &a, &st) == 0) {
            size_t count = 1;
            for (int i = 0; i < a.rank; i++)
                count *= (size_t)a.shape[i];
            if (a.rank < 0 || a.rank > GM_NPY_MAX_RANK || count != a.count)
                abort();
            gm_npy_free(&a);
        } else if (!st.msg[0] || strchr(st.msg, '\n')) {
            abort();
        }
        return 0;
    }
    const int rank = data[1] % 10;
    const gm_npy_type type = (data[0] & 1) ? GM_NPY_I4 : GM_NPY_F4;
    int64_t shape[10] = {0};
    size_t pos = 2;
    if (size < pos + (size_t)rank)
        return 0;
    int hostile = 0;
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        shape[i] = dim_of(data[pos++]);
        if (shape[i] < 0 || shape[i] > 4)
            hostile = 1;
        else
            count *= (size_t)shape[i];
    }
    const uint8_t *payload = data + pos;
    size_t avail = size - pos;
    uint8_t *buf = NULL;
    if (!hostile) {
        buf = calloc(count ? count : 1, 4);
        if (!buf)
            return 0;
        memcpy(buf, payload, avail < count * 4 ? avail : count * 4);
    }
    int rc = gm_npy_write(path, type, rank, shape, hostile ? payload : buf, &st);
    int zero = 0, neg = 0;
    for (int i = 0; i < rank; i++) {
        zero |= shape[i] == 0;
        neg |= shape[i] < 0;
    }
    /* too many dims, a negative dim or an overflowing shape must be refused
       (a huge shape with a 0 dim is a legal empty array) */
    if (rc == 0 && (rank > GM_NPY_MAX_RANK || neg || (hostile && !zero)))
        abort();
    if (rc == 0 && hostile) {
        if (gm_npy_read(path, &a, &st) == 0) {
            if (a.count != 0)
                abort();
            gm_npy_free(&a);
        }
    }
    if (rc == 0 && !hostile) {
        if (gm_npy_read(path, &a, &st) != 0) {
            fprintf(stderr, "round trip: %s\n", st.msg);
            abort();
        }
        if (a.type != type || a.rank != rank || a.count != count ||
            memcmp(a.shape, shape, (size_t)rank * sizeof shape[0]) != 0 ||
            (count && memcmp(a.data, buf, count * 4) != 0))
            abort();
        gm_npy_free(&a);
    }
    free(buf);
    return 0;
}

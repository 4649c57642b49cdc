/*
** The safetensors header parser on arbitrary bytes: as a header-only copy
** (file_size 0) and as a whole file (file_size = the input's length). A
** header that parses must be self-consistent.
*/
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/safetensors.h"

static void check(const st_header *h)
{
    for (size_t i = 0; i < h->n_tensors; i++) {
        const st_tensor *t = &h->tensors[i];
        if (t->end < t->begin || t->end > h->data_len || t->rank < 0 || t->rank > ST_MAX_RANK ||
            st_header_find(h, t->name) != t)
            abort();
        if (i > 0 && strcmp(h->tensors[i - 1].name, t->name) >= 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gm_status st = {0};
    st_header h;
    uint64_t n;
    st_header_len(data, size, &n, "fuzz", &st);
    gm_status_clear(&st);
    if (st_header_parse(&h, data, size, 0, "fuzz", &st) == 0) {
        check(&h);
        st_header_free(&h);
    } else if (!st.msg[0] || strchr(st.msg, '\n')) {
        abort(); /* every failure is one non-empty line */
    }
    gm_status_clear(&st);
    if (st_header_parse(&h, data, size, size, "fuzz", &st) == 0) {
        check(&h);
        st_header_free(&h);
    }
    return 0;
}

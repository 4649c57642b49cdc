/* See golden_util.h. */
#include "golden_util.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/npy.h"

char *tg_tokens_arg(const char *id)
{
    char path[4096];
    gm_npy t;
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/golden/%s/golden/seq24/tokens.npy", GM_SHARED_DIR, id);
    cr_assert_eq(gm_npy_read(path, &t, &st), 0, "%s", st.msg);
    char *s = calloc(1, 16 * t.count + 16);
    strcpy(s, "--tokens ");
    for (size_t i = 0; i < t.count; i++)
        sprintf(s + strlen(s), "%s%d", i ? "," : "", ((int32_t *)t.data)[i]);
    gm_npy_free(&t);
    return s;
}

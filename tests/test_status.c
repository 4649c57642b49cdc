/*
** gm_status: setting, prefixing, clearing and truncating messages.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "gm/status.h"

Test(status, fail_sets_code_and_message)
{
    gm_status st;

    gm_status_clear(&st);
    cr_assert_eq(gm_fail(&st, GM_ESHAPE, "%s: has %d", "x.safetensors", 3), GM_ESHAPE);
    cr_assert_eq(st.code, GM_ESHAPE);
    cr_assert_str_eq(st.msg, "x.safetensors: has 3");
}

Test(status, accepts_a_null_status)
{
    cr_assert_eq(gm_fail(NULL, GM_EIO, "ignored"), GM_EIO);
    gm_prefix(NULL, "ignored");
    gm_status_clear(NULL);
}

Test(status, prefix_prepends_context)
{
    gm_status st;

    gm_fail(&st, GM_EFORMAT, "bad header");
    gm_prefix(&st, "loading %s", "qwen");
    cr_assert_str_eq(st.msg, "loading qwen: bad header");
    cr_assert_eq(st.code, GM_EFORMAT);
}

Test(status, truncates_long_messages_at_511_bytes)
{
    char long_text[2000];
    gm_status st;

    memset(long_text, 'a', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    gm_fail(&st, GM_EIO, "%s", long_text);
    cr_assert_eq(strlen(st.msg), sizeof st.msg - 1);
    gm_prefix(&st, "ctx");
    cr_assert_eq(strlen(st.msg), sizeof st.msg - 1);
    cr_assert_eq(strncmp(st.msg, "ctx: aaa", 8), 0);
    gm_fail(&st, GM_EIO, "short");
    gm_prefix(&st, "%s", long_text);
    cr_assert_eq(strlen(st.msg), sizeof st.msg - 1);
    cr_assert_eq(st.msg[0], 'a');
}

Test(status, clear_resets_to_ok)
{
    gm_status st;

    gm_fail(&st, GM_ENOMEM, "x");
    gm_status_clear(&st);
    cr_assert_eq(st.code, GM_OK);
    cr_assert_str_eq(st.msg, "");
}

Test(status, names_every_code)
{
    static const char *const names[] = {"ok",    "usage", "io",  "format",      "missing", "shape",
                                        "dtype", "nomem", "net", "unsupported", "lua",   "short"};

    for (int c = GM_OK; c <= GM_ESHORT; c++)
        cr_assert_str_eq(gm_code_name(c), names[c]);
    cr_assert_str_eq(gm_code_name(-1), "unknown");
    cr_assert_str_eq(gm_code_name(GM_ESHORT + 1), "unknown");
}

/*
** gm_status: a return code plus a one-line message (see gm/status.h).
** Messages longer than the buffer are cut at 511 bytes, always NUL-terminated.
*/
#include "gm/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
** A message is one line of text whatever it quotes: names taken from hostile
** files may hold newlines or terminal escapes, so control bytes become '?'.
*/
static void one_line(char *msg)
{
    for (unsigned char *p = (unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7F)
            *p = '?';
}

int gm_fail(gm_status *st, int code, const char *fmt, ...)
{
    va_list ap;

    if (st == NULL)
        return code;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    one_line(st->msg);
    return code;
}

void gm_prefix(gm_status *st, const char *fmt, ...)
{
    char joined[sizeof st->msg];
    size_t used, old;
    va_list ap;

    if (st == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(joined, sizeof joined, fmt, ap);
    va_end(ap);
    // Append ": <old message>" by hand, cutting at the buffer's end.
    used = strlen(joined);
    for (const char *sep = ": "; *sep && used + 1 < sizeof joined; sep++)
        joined[used++] = *sep;
    old = strnlen(st->msg, sizeof st->msg);
    if (old > sizeof joined - 1 - used)
        old = sizeof joined - 1 - used;
    memcpy(joined + used, st->msg, old);
    joined[used + old] = '\0';
    memcpy(st->msg, joined, sizeof st->msg);
    one_line(st->msg);
}

void gm_status_clear(gm_status *st)
{
    if (st == NULL)
        return;
    st->code = GM_OK;
    st->msg[0] = '\0';
}

const char *gm_code_name(int code)
{
    static const char *const names[] = {
        [GM_OK] = "ok",
        [GM_EUSAGE] = "usage",
        [GM_EIO] = "io",
        [GM_EFORMAT] = "format",
        [GM_EMISSING] = "missing",
        [GM_ESHAPE] = "shape",
        [GM_EDTYPE] = "dtype",
        [GM_ENOMEM] = "nomem",
        [GM_ENET] = "net",
        [GM_EUNSUPPORTED] = "unsupported",
        [GM_ELUA] = "lua",
        [GM_ESHORT] = "short",
    };

    if (code < 0 || (size_t)code >= sizeof names / sizeof names[0])
        return "unknown";
    return names[code];
}

/*
** Error reporting shared by the runtime, the generator and generated code.
**
** A function that can fail takes a gm_status * as its last argument and
** returns st->code (0 on success). The message names the file, field or URL,
** then what was expected and what was found, on one line, lower-case, with no
** trailing period. Only main() turns a code into an exit status.
*/
#ifndef GM_STATUS_H
#define GM_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Contract between the runtime and generated code; bump on any change to it. */
#define GM_RUNTIME_ABI 5

typedef enum gm_code {
    GM_OK = 0,
    GM_EUSAGE,       /* bad command line */
    GM_EIO,          /* a file could not be read or written */
    GM_EFORMAT,      /* malformed input: JSON, safetensors, npy */
    GM_EMISSING,     /* a required tensor or key is absent */
    GM_ESHAPE,       /* a tensor has the wrong shape */
    GM_EDTYPE,       /* a tensor has an unusable dtype */
    GM_ENOMEM,       /* allocation failed or a size overflowed */
    GM_ENET,         /* network (Hub) failure */
    GM_EUNSUPPORTED, /* the model is outside gen-model's scope */
    GM_ELUA,         /* an internal error in the generator's Lua code or a template */
    GM_ESHORT        /* a file is shorter than its header says: an interrupted download or copy */
} gm_code;

typedef struct gm_status {
    int code;
    char msg[512];
} gm_status;

/* Set code and message; returns code. A NULL st is allowed and ignored. */
int gm_fail(gm_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
** First thing in a function whose caller may pass a NULL st (as every gm_status
** parameter may be) and that reads st->code: st then points at a status of the
** function's own, which the caller never sees.
*/
#define GM_STATUS_OR_LOCAL(st)                                                                                  \
    gm_status gm_local_status_ = {0};                                                                           \
    if (!(st))                                                                                                  \
    (st) = &gm_local_status_

/* Prepend context to the current message: "<context>: <old message>". */
void gm_prefix(gm_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reset to GM_OK with an empty message. */
void gm_status_clear(gm_status *st);

/* A short lower-case name for a code ("format", "shape", ...). */
const char *gm_code_name(int code);

#ifdef __cplusplus
}
#endif
#endif

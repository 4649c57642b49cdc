/*
** HTTP transfers for the Hub client, on libcurl's multi interface so that
** several run at once. Redirects are followed here, not by libcurl, so that
** the token goes only to the endpoint's own origin (never to the CDN a 302
** points at) and a loop is caught with a clear message. Retryable failures
** (429, 5xx, timeouts, dropped or truncated transfers) are retried with
** exponential backoff for transfers into memory; transfers into a file
** report them and their caller resumes.
*/
#ifndef GM_HTTP_H
#define GM_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "gm/status.h"
#include "hub.h"

#define GM_HTTP_MAX_HOPS 10
/* The most of a body read for nothing (a redirect's, an error page) or kept for its message (an error page) */
#define GM_HTTP_MAX_IGNORED (1u << 20)

typedef struct gm_xfer {
    /* request: set by the caller */
    char url[4096];
    char range[64];       /* "a-b" or "a-", or empty for none */
    int head_only;        /* HEAD, following only relative redirects (a renamed repo), as huggingface_hub */
    size_t max_body;      /* stop reading after this many bytes (0: no cap) */
    int st_header;        /* the body starts a safetensors file: stop after its 8 + N header bytes */
    int fd;               /* >= 0: the body is appended to this file, not kept in memory */
    EVP_MD_CTX *sha;      /* when set, every body byte written to fd is hashed */
    const char *label;    /* the file name, for the progress bar */
    uint64_t have;        /* bytes already in fd before this transfer (resume) */
    uint64_t total;       /* the whole file's size, for the progress bar */
    /* the log lines (GM_PROGRESS_LINES) are of the whole file, over every attempt at it: */
    double since;         /* when its download began (gm_http_now) */
    uint64_t moved;       /* the bytes earlier attempts wrote to fd */
    double line_at;       /* when its last line was written (or since); the transfer moves it on, the caller
                             carries it to the next attempt */

    /* response: the first value seen on any hop wins for these ... */
    char commit[64];      /* X-Repo-Commit */
    char etag[160];       /* ETag, quotes and W/ removed */
    char linked_etag[160];/* X-Linked-Etag */
    uint64_t linked_size; /* X-Linked-Size */
    uint64_t content_length; /* Content-Length of the last response (a file served directly: its size) */
    /* ... and these describe the last response */
    long status;
    char error_code[64];  /* X-Error-Code */
    char error_message[256]; /* X-Error-Message */
    char content_range[128];
    char location[4096];
    long retry_after;
    char *body;           /* NUL-terminated; len bytes */
    size_t len;
    uint64_t written;     /* body bytes written to fd by this transfer */
    int capped;           /* the body was cut at max_body, or an ignored body at GM_HTTP_MAX_IGNORED */
    uint64_t ignored;     /* bytes of a body read only to be dropped (a redirect's, an error page into fd) */
    int restarted;        /* asked to resume but got 200: fd was truncated and refilled from 0 */
    int write_errno;      /* writing fd failed with this (the bytes before it are in fd, counted and hashed) */
    int bad_range;        /* asked to resume, the 206's Content-Range starts elsewhere: nothing was written */
    int overlong;         /* the body ran past `total` bytes: fd holds the first `total`, the transfer was ended */
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    int hops, attempts;

    /* internal */
    CURL *easy;
    struct curl_slist *headers;
    double not_before;
    double last_draw;
    double last_rx;         /* when the body last grew (or the request started) */
    long long rx;           /* its bytes then */
    long stall_seconds;     /* how long it may stop growing (HF_HUB_DOWNLOAD_TIMEOUT) */
    double line_every;      /* seconds between two log lines */
    int draw, stalled;      /* the progress shown (GM_PROGRESS_*); ended here for stalling */
    int active, done;
} gm_xfer;

/* A fresh transfer of url (fd = -1, no range). */
void gm_xfer_init(gm_xfer *x, const char *url);
void gm_xfer_free(gm_xfer *x);

/* Do URLs a and b have the same scheme, host and port? (The token goes only to the endpoint's origin.) */
int gm_http_same_origin(const char *a, const char *b);

/*
** The wait before retry number `attempt` (1, 2, ...), in milliseconds: the
** backoff, or the longer wait a 429's or 503's Retry-After asks for, at most 10 s.
*/
long gm_http_retry_ms(const gm_hub *h, int attempt, long retry_after);

/*
** Run the transfers to completion, all at once. Returns 0 when each finished
** with a response (any status: look at x->status); otherwise the first
** transport failure, after retries, is in st, naming the URL.
*/
int gm_http_run(gm_hub *h, gm_xfer **xs, size_t n, gm_status *st);

/* Monotonic seconds, the clock of the transfers' timeouts and progress. */
double gm_http_now(void);

/*
** One log line on stderr of a file's progress (GM_PROGRESS_LINES): its name, the bytes it has of its total and
** the percent, and the rate of the `moved` bytes received in `seconds`; `last`: the line of a complete file.
*/
void gm_http_progress_line(const char *label, uint64_t done, uint64_t total, uint64_t moved, double seconds,
                           int last);

/* A raw response (status lines, headers, body in pieces of `piece` bytes) through the callbacks: for fuzzing. */
void gm_http_feed(gm_xfer *x, const char *data, size_t n, size_t piece);

#endif

/* HTTP transfers on libcurl multi: manual redirects, origin-bound token, retries. */
#include "http.h"

#include "gm/lock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

double gm_http_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void gm_xfer_init(gm_xfer *x, const char *url)
{
    memset(x, 0, sizeof *x);
    x->fd = -1;
    snprintf(x->url, sizeof x->url, "%s", url);
}

void gm_xfer_free(gm_xfer *x)
{
    if (x->easy)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->body);
    x->easy = NULL;
    x->headers = NULL;
    x->body = NULL;
}

const char *gm_url_for_message(const char *url, char *buf, size_t size)
{
    const size_t n = strcspn(url, "?#");
    /* the authority starts after "scheme://", or a leading "//", else at once (libcurl takes "user:pw@host/...") */
    size_t a = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    if (a > 0 && strncmp(url + a, "://", 3) == 0)
        a += 3;
    else
        a = strncmp(url, "//", 2) == 0 ? 2 : 0;
    /* it ends where the path, query or fragment starts; the user information is all before its last '@' (so a
       password with an '@' of its own, which libcurl refuses, is hidden whole too) */
    const char *at = NULL;
    for (const char *p = url + a; *p && !strchr("/?#", *p); p++)
        if (*p == '@')
            at = p;
    /* written in one go, so a cut message ends before or after the "***", never inside the credentials */
    if (at)
        snprintf(buf, size, "%.*s***%.*s", (int)a, url, (int)(url + n - at), at);
    else
        snprintf(buf, size, "%.*s", (int)n, url);
    return buf;
}

/*
** n in the decimal units of tqdm's unit_scale (and the bar's GB) with three figures, counted in the unit of `of`
** (n's own, or a total's, so that a line says "371 of 742 kB"): the number into buf, the unit returned.
*/
static const char *figures(uint64_t n, uint64_t of, char *buf, size_t size)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    double scale = 1;
    int u = 0;
    while (u < 5 && (double)of >= scale * 1000)
        scale *= 1000, u++;
    const double v = (double)n / scale;
    snprintf(buf, size, "%.*f", u == 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2, v);
    return units[u];
}

void gm_http_progress_line(const char *label, uint64_t done, uint64_t total, uint64_t moved, double seconds,
                           int last)
{
    char a[32], b[32], r[32];
    const int pct = total && done < total ? (int)(100.0 * (double)done / (double)total) : 100;
    const uint64_t rate = (uint64_t)((double)moved / (seconds > 1e-3 ? seconds : 1e-3));
    figures(done, total, a, sizeof a);
    const char *unit = figures(total, total, b, sizeof b), *per = figures(rate, rate, r, sizeof r);
    /* a line of its own, never a \r: a log keeps every one */
    fprintf(stderr, "gen-model: %s %s: %s of %s %s (%d%%), %s %s/s\n", last ? "downloaded" : "downloading",
            label ? label : "", a, b, unit, pct, r, per);
    fflush(stderr);
}

/* ---------------------------------------------------------------------- */
/* callbacks */

static void copy_value(char *dst, size_t size, const char *v, size_t n, int keep_first)
{
    if (keep_first && dst[0])
        return;
    while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        n--;
    if (n >= 2 && v[0] == 'W' && v[1] == '/') {
        v += 2;
        n -= 2;
    }
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n >= size)
        n = size - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nitems, void *userdata)
{
    gm_xfer *x = userdata;
    const size_t n = size * nitems;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a new response: forget what described the previous one */
        x->error_code[0] = x->error_message[0] = x->content_range[0] = x->location[0] = '\0';
        x->retry_after = 0;
        x->content_length = 0;
        return n;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return n;
    const size_t klen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = n - klen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vlen--;
    }
#define IS(name) (klen == strlen(name) && strncasecmp(line, name, klen) == 0)
    char num[32];
    if (IS("X-Repo-Commit"))
        copy_value(x->commit, sizeof x->commit, v, vlen, 1);
    else if (IS("ETag"))
        copy_value(x->etag, sizeof x->etag, v, vlen, 1);
    else if (IS("X-Linked-Etag"))
        copy_value(x->linked_etag, sizeof x->linked_etag, v, vlen, 1);
    else if (IS("X-Linked-Size") && !x->linked_size) {
        copy_value(num, sizeof num, v, vlen, 0);
        x->linked_size = strtoull(num, NULL, 10);
    } else if (IS("X-Error-Code"))
        copy_value(x->error_code, sizeof x->error_code, v, vlen, 0);
    else if (IS("X-Error-Message"))
        copy_value(x->error_message, sizeof x->error_message, v, vlen, 0);
    else if (IS("Content-Length")) {
        copy_value(num, sizeof num, v, vlen, 0);
        x->content_length = strtoull(num, NULL, 10);
    } else if (IS("Content-Range"))
        copy_value(x->content_range, sizeof x->content_range, v, vlen, 0);
    else if (IS("Location"))
        copy_value(x->location, sizeof x->location, v, vlen, 0);
    else if (IS("Retry-After")) {
        copy_value(num, sizeof num, v, vlen, 0);
        x->retry_after = strtol(num, NULL, 10);
    }
#undef IS
    return n;
}

/* Does a 206's Content-Range ("bytes a-b/n") start at byte `at`? */
static int range_starts_at(const char *content_range, uint64_t at)
{
    char *end = NULL;
    if (strncasecmp(content_range, "bytes ", 6) != 0 || content_range[6] < '0' || content_range[6] > '9')
        return 0;
    errno = 0;
    const unsigned long long a = strtoull(content_range + 6, &end, 10);
    return errno == 0 && *end == '-' && a == at;
}

/* n body bytes of a response with this status into x: its file, or memory. How many were taken. */
static size_t take_body(gm_xfer *x, const char *data, size_t n, long status)
{
    /* a redirect's body is of no interest, and an error page never reaches the file; one that does not end is cut */
    if ((status >= 300 && status < 400) || (x->fd >= 0 && status >= 400)) {
        x->ignored += n;
        x->capped = x->ignored > GM_HTTP_MAX_IGNORED;
        return x->capped ? 0 : n;
    }
    if (x->fd >= 0) {
        if (x->range[0] && status == 200 && x->written == 0 && x->have > 0 && !x->restarted) {
            /* asked to resume, the server sent everything: start the file over */
            if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0)
                return 0;
            if (x->sha)
                EVP_DigestInit_ex(x->sha, EVP_sha256(), NULL);
            x->have = 0;
            x->restarted = 1;
        }
        if (x->range[0] && status == 206 && x->written == 0 && !range_starts_at(x->content_range, x->have)) {
            x->bad_range = 1; /* another part of the file than the one asked for: none of it goes in */
            return 0;
        }
        if (x->total && x->have + x->written + n > x->total) {
            /* more than the whole file (a huge or endless body): what fits goes in, and the transfer ends */
            x->overlong = 1;
            n = x->have + x->written < x->total ? (size_t)(x->total - x->have - x->written) : 0;
        }
        size_t off = 0;
        while (off < n) {
            ssize_t w = write(x->fd, data + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                x->write_errno = w < 0 ? errno : ENOSPC;
                break;
            }
            off += (size_t)w;
        }
        /* what is in the file is counted and hashed, a short write's part too: a resume starts after it */
        if (x->sha)
            EVP_DigestUpdate(x->sha, data, off);
        x->written += off;
        return x->overlong ? 0 : off;
    }
    size_t take = n;
    if (x->st_header && x->len < 8 && x->len + n >= 8) {
        /* the 8-byte length prefix tells how much is worth reading */
        uint8_t prefix[8];
        memcpy(prefix, x->body ? x->body : "", x->len);
        memcpy(prefix + x->len, data, 8 - x->len);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = hlen << 8 | prefix[i];
        if (hlen < x->max_body && 8 + hlen < x->max_body)
            x->max_body = 8 + (size_t)hlen;
    }
    /* an error page is kept for its message, a little of it */
    const size_t most = status >= 400 && (!x->max_body || x->max_body > GM_HTTP_MAX_IGNORED) ? GM_HTTP_MAX_IGNORED
                                                                                              : x->max_body;
    if (most && x->len + take > most) {
        take = most - x->len;
        x->capped = 1;
    }
    char *grown = realloc(x->body, x->len + take + 1);
    if (!grown)
        return 0;
    x->body = grown;
    memcpy(x->body + x->len, data, take);
    x->len += take;
    x->body[x->len] = '\0';
    return x->capped ? 0 : n; /* returning less than n ends the transfer: enough was read */
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    gm_xfer *x = userdata;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    return take_body(x, data, size * nmemb, status);
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)ultotal;
    (void)ulnow;
    gm_xfer *x = userdata;
    const double t = gm_http_now();
    /* a body that stops growing for the timeout ends, however much came before: a read timeout, as
       huggingface_hub's (libcurl's low-speed check averages over seconds, and lets a trickle through) */
    if ((long long)dlnow != x->rx) {
        x->rx = (long long)dlnow;
        x->last_rx = t;
    } else if (t - x->last_rx > (double)x->stall_seconds) {
        x->stalled = 1;
        return 1;
    }
    if (x->draw == GM_PROGRESS_LINES) {
        /* a log's line now and then; not at the end, whose line the caller writes once the file is complete */
        const uint64_t done = x->have + x->written;
        if (t - x->line_at >= x->line_every && done < x->total) {
            gm_http_progress_line(x->label, done, x->total, x->moved + x->written, t - x->since, 0);
            x->line_at = t;
        }
        return 0;
    }
    if (x->draw != GM_PROGRESS_BAR || (t - x->last_draw < 0.1 && dlnow < dltotal))
        return 0;
    x->last_draw = t;
    const uint64_t done = x->have + (uint64_t)dlnow, total = x->total ? x->total : done;
    const int pct = total ? (int)(100.0 * (double)done / (double)total) : 0;
    char bar[31];
    for (int i = 0; i < 30; i++)
        bar[i] = i < pct * 30 / 100 ? '#' : ' ';
    bar[30] = '\0';
    fprintf(stderr, "\r  %-40.40s [%s] %3d%%  %.2f / %.2f GB", x->label ? x->label : "", bar, pct,
            (double)done / 1e9, (double)total / 1e9);
    fflush(stderr);
    return 0;
}

/* ---------------------------------------------------------------------- */

/* Same scheme, host and port as the endpoint: the only place the token goes. */
int gm_http_same_origin(const char *a, const char *b)
{
    CURLU *ua = curl_url(), *ub = curl_url();
    int same = 0;
    if (ua && ub && !curl_url_set(ua, CURLUPART_URL, a, 0) && !curl_url_set(ub, CURLUPART_URL, b, 0)) {
        char *sa = NULL, *sb = NULL, *ha = NULL, *hb = NULL, *pa = NULL, *pb = NULL;
        curl_url_get(ua, CURLUPART_SCHEME, &sa, 0);
        curl_url_get(ub, CURLUPART_SCHEME, &sb, 0);
        curl_url_get(ua, CURLUPART_HOST, &ha, 0);
        curl_url_get(ub, CURLUPART_HOST, &hb, 0);
        curl_url_get(ua, CURLUPART_PORT, &pa, CURLU_DEFAULT_PORT);
        curl_url_get(ub, CURLUPART_PORT, &pb, CURLU_DEFAULT_PORT);
        same = sa && sb && ha && hb && pa && pb && strcasecmp(sa, sb) == 0 && strcasecmp(ha, hb) == 0 &&
               strcmp(pa, pb) == 0;
        curl_free(sa);
        curl_free(sb);
        curl_free(ha);
        curl_free(hb);
        curl_free(pa);
        curl_free(pb);
    }
    curl_url_cleanup(ua);
    curl_url_cleanup(ub);
    return same;
}

/*
** A Location with no host of its own (no scheme, not "//host"): a renamed
** repo's redirect, which a HEAD follows too, as huggingface_hub's does; the
** Hub's redirect of an LFS file to its CDN is absolute, and its headers are
** what the HEAD is for.
*/
static int relative(const char *location)
{
    const size_t scheme = strspn(location, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return !(location[0] == '/' && location[1] == '/') && !(scheme > 0 && location[scheme] == ':');
}

/* Resolve a Location (absolute or relative) against the current URL. */
static int follow(gm_xfer *x)
{
    CURLU *u = curl_url();
    char *next = NULL;
    int ok = u && !curl_url_set(u, CURLUPART_URL, x->url, 0) &&
             !curl_url_set(u, CURLUPART_URL, x->location, 0) &&
             !curl_url_get(u, CURLUPART_URL, &next, 0) && strlen(next) < sizeof x->url;
    if (ok)
        snprintf(x->url, sizeof x->url, "%s", next);
    curl_free(next);
    curl_url_cleanup(u);
    return ok;
}

static int setup(gm_hub *h, gm_xfer *x)
{
    if (!x->easy && !(x->easy = curl_easy_init()))
        return -1;
    CURL *e = x->easy;
    curl_easy_reset(e);
    curl_slist_free_all(x->headers);
    x->headers = NULL;
    if (h->token && gm_http_same_origin(x->url, h->endpoint)) {
        char auth[4200];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", h->token);
        x->headers = curl_slist_append(x->headers, auth);
    }
    x->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, x->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "gen-model/0.1");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);   /* followed by hand, see follow() */
    curl_easy_setopt(e, CURLOPT_NOBODY, (long)x->head_only);
    curl_easy_setopt(e, CURLOPT_RANGE, x->range[0] ? x->range : NULL);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, h->stall_seconds);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);  /* a stalled transfer ... */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, h->stall_seconds); /* ... ends after this */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    x->draw = x->fd >= 0 ? h->progress : GM_PROGRESS_NONE;
    x->line_every = (double)h->progress_ms / 1000.0;
    x->stalled = 0;
    x->rx = 0;
    x->last_rx = gm_http_now();
    x->stall_seconds = h->stall_seconds;
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
    return 0;
}

static int retryable(const gm_xfer *x)
{
    switch (x->result) {
    case CURLE_OK:
        return x->status == 429 || x->status >= 500;
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
        return 1;
    default:
        return 0;
    }
}

/* A transport failure as one line naming the URL. */
static int fail(gm_xfer *x, gm_status *st)
{
    char u[4096];
    gm_url_for_message(x->url, u, sizeof u);
    const char *what = x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result);
    switch (x->result) {
    case CURLE_OPERATION_TIMEDOUT:
        return gm_fail(st, GM_ENET, "GET %s: timed out after %d attempt%s (%s); set HF_HUB_DOWNLOAD_TIMEOUT "
                       "to wait longer", u, x->attempts, x->attempts == 1 ? "" : "s", what);
    case CURLE_PARTIAL_FILE:
        return gm_fail(st, GM_ENET, "GET %s: the body was truncated after %d attempt%s (%s)", u, x->attempts,
                       x->attempts == 1 ? "" : "s", what);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return gm_fail(st, GM_ENET, "GET %s: %s (after %d attempt%s); check the network and HF_ENDPOINT, or set "
                       "HF_HUB_OFFLINE=1 to use what the cache holds", u, what, x->attempts,
                       x->attempts == 1 ? "" : "s");
    default:
        return gm_fail(st, GM_ENET, "GET %s: %s (after %d attempt%s)", u, what, x->attempts,
                       x->attempts == 1 ? "" : "s");
    }
}

long gm_http_retry_ms(const gm_hub *h, int attempt, long retry_after)
{
    const long backoff = h->retry_ms << (attempt - 1);
    if (retry_after > 0 && retry_after * 1000 > backoff)
        return retry_after > 10 ? 10000 : retry_after * 1000;
    return backoff;
}

int gm_http_run(gm_hub *h, gm_xfer **xs, size_t n, gm_status *st)
{
    CURLM *multi = curl_multi_init();
    if (!multi)
        return gm_fail(st, GM_ENOMEM, "cannot start libcurl: out of memory");
    size_t left = n;
    for (size_t i = 0; i < n; i++) {
        xs[i]->done = xs[i]->active = 0;
        xs[i]->not_before = 0;
    }
    while (left > 0 && !st->code) {
        if (gm_interrupted()) {
            /* Ctrl-C: stop every transfer here; what a file received is in it, whole, to resume */
            char u[4096];
            gm_fail(st, GM_EIO, "interrupted during GET %s; nothing half-received is used",
                    gm_url_for_message(xs[0]->url, u, sizeof u));
            break;
        }
        const double t = gm_http_now();
        for (size_t i = 0; i < n; i++) {
            gm_xfer *x = xs[i];
            if (x->done || x->active || t < x->not_before)
                continue;
            x->len = 0;
            x->capped = 0;
            x->ignored = 0;
            x->attempts++;
            h->requests++;
            if (setup(h, x) != 0 || curl_multi_add_handle(multi, x->easy) != CURLM_OK) {
                char u[4096];
                gm_fail(st, GM_ENOMEM, "GET %s: cannot start the transfer", gm_url_for_message(x->url, u, sizeof u));
                break;
            }
            x->active = 1;
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int queued;
        while ((msg = curl_multi_info_read(multi, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            gm_xfer *x = NULL;
            for (size_t i = 0; i < n && !x; i++)
                if (xs[i]->easy == msg->easy_handle)
                    x = xs[i];
            x->result = msg->data.result;
            if (x->result == CURLE_ABORTED_BY_CALLBACK && x->stalled) { /* on_progress: a read timeout */
                x->result = CURLE_OPERATION_TIMEDOUT;
                snprintf(x->errbuf, sizeof x->errbuf, "no bytes for %ld s", x->stall_seconds);
            }
            curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
            curl_off_t got = 0;
            curl_easy_getinfo(x->easy, CURLINFO_SIZE_DOWNLOAD_T, &got);
            h->bytes += (uint64_t)got;
            curl_multi_remove_handle(multi, x->easy);
            x->active = 0;
            if (x->result == CURLE_WRITE_ERROR && x->capped)
                x->result = CURLE_OK; /* we hung up on purpose */
            if (x->result == CURLE_OK && x->status >= 300 && x->status < 400 && x->location[0] &&
                (!x->head_only || relative(x->location))) {
                if (++x->hops > GM_HTTP_MAX_HOPS) {
                    char u[4096];
                    gm_fail(st, GM_ENET, "GET %s: more than %d redirects (a redirect loop)",
                            gm_url_for_message(x->url, u, sizeof u), GM_HTTP_MAX_HOPS);
                    break;
                }
                if (!follow(x)) {
                    char u[4096], to[4096];
                    gm_fail(st, GM_ENET, "GET %s: cannot follow the redirect to '%.200s'",
                            gm_url_for_message(x->url, u, sizeof u), gm_url_for_message(x->location, to, sizeof to));
                    break;
                }
                x->attempts--; /* a hop is not a retry */
                continue;
            }
            if (retryable(x) && x->fd < 0 && x->attempts <= h->retries) {
                x->not_before = gm_http_now() + (double)gm_http_retry_ms(h, x->attempts, x->retry_after) / 1000.0;
                continue;
            }
            if (x->result != CURLE_OK && x->fd < 0) {
                fail(x, st);
                break;
            }
            x->done = 1;
            left--;
        }
        if (left > 0 && !st->code)
            curl_multi_poll(multi, NULL, 0, 50, NULL);
    }
    for (size_t i = 0; i < n; i++)
        if (xs[i]->active) {
            curl_multi_remove_handle(multi, xs[i]->easy);
            xs[i]->active = 0;
        }
    curl_multi_cleanup(multi);
    return st->code;
}

/*
** What libcurl hands the callbacks, from raw bytes: responses (a status line,
** header lines up to a blank line; 1xx and 3xx answers may come first), then
** the last one's body in pieces of `piece` bytes (0: one piece). The
** callbacks' own code runs on them, and a redirect is resolved as a real
** transfer would; for the fuzz harness of what a server sends.
*/
void gm_http_feed(gm_xfer *x, const char *data, size_t n, size_t piece)
{
    const char *p = data, *end = data + n;
    for (;;) {
        long status = 0;
        int first = 1;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const size_t len = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
            if (len == 1 || (len == 2 && p[0] == '\r')) { /* the blank line ends the headers */
                p += len;
                break;
            }
            char line[8192];
            const size_t k = len < sizeof line ? len : sizeof line - 1;
            memcpy(line, p, k); /* libcurl hands a header line in a buffer of its own */
            line[k] = '\0';
            if (first && k > 9 && strncmp(line, "HTTP/", 5) == 0) {
                const char *sp = memchr(line, ' ', k);
                status = sp ? strtol(sp + 1, NULL, 10) : 0;
            }
            first = 0;
            on_header(line, 1, k, x);
            p += len;
        }
        x->status = status;
        if (((status >= 100 && status < 200) || (status >= 300 && status < 400)) && p < end &&
            end - p >= 5 && strncmp(p, "HTTP/", 5) == 0) {
            if (status >= 300 && x->location[0])
                follow(x);
            continue; /* another response follows */
        }
        break;
    }
    if (x->status >= 300 && x->status < 400 && x->location[0])
        follow(x);
    while (p < end) {
        const size_t k = piece && piece < (size_t)(end - p) ? piece : (size_t)(end - p);
        if (take_body(x, p, k, x->status) < k)
            break; /* the transfer would end here */
        p += k;
    }
}

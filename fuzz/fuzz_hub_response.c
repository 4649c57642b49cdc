/*
** What a Hub (or a server posing as one) sends back: the raw bytes of one or
** more responses (status lines, headers, a body) go through the transfer
** callbacks' own code (gm_http_feed: X-Repo-Commit, ETag, X-Linked-Etag,
** X-Linked-Size, X-Error-Code, Content-Range, Location, Retry-After, the body
** into memory under its caps or into a file with its hash), then through
** the Hub client's judgement of the answer (gm_hub_error, gm_hub_check_range,
** the safetensors length prefix). Nothing may crash; every field stays
** NUL-terminated within its buffer; a body in memory respects its cap; a
** failure is one line.
**
** Input: byte 0 chooses the transfer (bit 0: a small cap, bit 1: a
** safetensors header read, bit 2: into a file, bit 3: resumed), byte 1 the
** size of the body's pieces, the rest is the response.
*/
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "gm/safetensors.h"
#include "http.h"

static void one_line(const gm_status *st)
{
    if (st->code && (!st->msg[0] || strchr(st->msg, '\n')))
        abort();
}

static void terminated(const char *field, size_t size)
{
    if (memchr(field, '\0', size) == NULL)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gm_hub hub;
    static char path[512];
    if (!path[0]) {
        gm_status st = {0};
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (gm_hub_init(&hub, &st) != 0)
            abort();
        snprintf(path, sizeof path, "%s/blob.incomplete", fz_scratch());
    }
    if (size < 2)
        return 0;
    const uint8_t mode = data[0];
    gm_xfer x;
    gm_xfer_init(&x, "https://huggingface.co/org/name/resolve/main/model.safetensors");
    x.max_body = mode & 1 ? 64 : 1u << 20;
    x.st_header = (mode & 2) != 0;
    if (mode & 4) {
        x.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (x.fd < 0)
            abort();
        x.sha = EVP_MD_CTX_new();
        if (!x.sha || !EVP_DigestInit_ex(x.sha, EVP_sha256(), NULL))
            abort();
        if (mode & 8) {
            if (write(x.fd, "0123456789", 10) != 10)
                abort();
            x.have = 10;
            snprintf(x.range, sizeof x.range, "10-");
        }
    }
    gm_http_feed(&x, (const char *)data + 2, size - 2, data[1]);

    terminated(x.url, sizeof x.url);
    terminated(x.commit, sizeof x.commit);
    terminated(x.etag, sizeof x.etag);
    terminated(x.linked_etag, sizeof x.linked_etag);
    terminated(x.error_code, sizeof x.error_code);
    terminated(x.error_message, sizeof x.error_message);
    terminated(x.content_range, sizeof x.content_range);
    terminated(x.location, sizeof x.location);
    if (x.fd < 0 && x.body && (x.body[x.len] != '\0' || (x.max_body && x.len > x.max_body)))
        abort();
    if (x.fd >= 0 && lseek(x.fd, 0, SEEK_END) != (off_t)(x.have + x.written))
        abort(); /* the file holds what was there plus what was written, nothing else */

    gm_status st = {0};
    if (x.status < 200 || x.status >= 300) {
        if (gm_hub_error(&hub, "org/name", "main", "model.safetensors", &x, &st) == 0 || st.code == 0)
            abort(); /* a failed answer is never taken for a good one */
        one_line(&st);
    } else {
        gm_hub_check_range(&x, x.fd >= 0 ? x.have : 0, &st);
        one_line(&st);
        uint64_t n = 0;
        gm_status hs = {0};
        if (x.st_header && x.body && st_header_len((const uint8_t *)x.body, x.len, &n, "model.safetensors", &hs))
            one_line(&hs);
    }
    if (x.fd >= 0)
        close(x.fd);
    x.fd = -1;
    EVP_MD_CTX_free(x.sha);
    gm_xfer_free(&x);
    return 0;
}

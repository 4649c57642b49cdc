/*
** gen-model tokenize: one line to compare ids with Python's tokenizers:
**   printf 'Hello' | gen-model tokenize tokenizer.json
**   python3 -c 'import sys,tokenizers as t; print(*t.Tokenizer.from_file("tokenizer.json").encode(sys.stdin.read()).ids)'
*/
#include "tokenize_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/status.h"
#include "gm/tokenizer.h"
#include "source.h"

static const char usage[] =
    "usage: gen-model tokenize TOKENIZER_JSON [--no-special] [--no-parse-special] [--decode]\n"
    "  reads text on stdin and prints its ids separated by spaces\n"
    "  --no-special        do not apply the post-processor (no BOS); with --decode, drop special tokens\n"
    "  --no-parse-special  special tokens written in the text are encoded as text\n"
    "  --decode            read ids on stdin and print the text\n"
    "exit status: 0 done; 1 bad input (tokenizer.json, the text, the ids); 2 usage; 3 a tokenizer.json\n"
    "feature gen-model does not support, or a pre_tokenizer regex the regex engine gives up on for\n"
    "this text (Oniguruma's backtracking limits); 4 a file could not be read or written\n";

/*
** The most text read from stdin: encoding takes about ten times its size in
** memory (/dev/zero on stdin took 8 GB in 20 s before), as tokenizer.json's
** own bound keeps a file from doing.
*/
#define STDIN_MAX ((size_t)256 << 20)

/* stdin whole, NUL-ended; NULL with errno set when it cannot be read, or EFBIG past STDIN_MAX bytes */
static char *read_all(size_t *len)
{
    size_t n = 0, cap = 1 << 16;
    char *p = malloc(cap + 1);

    while (p != NULL) {
        size_t k = fread(p + n, 1, cap - n, stdin);
        n += k;
        if (k == 0)
            break;
        if (n > STDIN_MAX) {
            free(p);
            errno = EFBIG;
            return NULL;
        }
        if (n == cap) {
            char *q = realloc(p, cap * 2 + 1);
            if (q == NULL) {
                free(p);
                return NULL;
            }
            p = q;
            cap *= 2;
        }
    }
    if (p == NULL || ferror(stdin)) {
        free(p);
        return NULL;
    }
    p[n] = 0;
    *len = n;
    return p;
}

/* stdin whole, NUL-ended (its length in *len); NULL with st set when it cannot be read or is too long */
static char *read_stdin(size_t *len, gm_status *st)
{
    char *text = read_all(len);
    if (!text && errno == EFBIG)
        gm_fail(st, GM_EFORMAT, "stdin: expected at most %zu bytes, found more; give the text in parts", STDIN_MAX);
    else if (!text)
        gm_fail(st, GM_EIO, "stdin: cannot read: %s", strerror(errno));
    return text;
}

static int encode(const gm_tokenizer *t, int add_special, int parse_special, gm_status *st)
{
    size_t len, n = 0;
    int32_t *ids = NULL;
    char *text = read_stdin(&len, st);
    int rc = st->code;

    if (text == NULL)
        goto out;
    if ((rc = gm_tokenizer_encode_mt(t, text, len, add_special, parse_special, 2, &ids, &n, st)) != 0) {
        gm_prefix(st, "stdin");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", (int)ids[i]);
    printf("\n");
out:
    free(ids);
    free(text);
    return rc;
}

static int decode(const gm_tokenizer *t, int skip_special, gm_status *st)
{
    size_t len, n = 0, cap = 0, out_len;
    int32_t *ids = NULL;
    char *text = read_stdin(&len, st), *p, *out = NULL;
    int rc = st->code;

    if (text == NULL)
        goto out;
    for (p = text; p < text + len;) {
        if (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t' || *p == '\r' || *p == '[' || *p == ']') {
            p++;
            continue;
        }
        if (*p == 0) { /* not the end of the list: what follows it would be dropped without a word */
            rc = gm_fail(st, GM_EFORMAT, "stdin: byte %zu: expected a token id, found a NUL byte", (size_t)(p - text));
            goto out;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && !strchr(" ,\n\t\r[]", *end)) || errno != 0 || v < 0 ||
            v >= gm_tokenizer_vocab_size(t)) {
            const int w = (int)strcspn(p, " ,\n\t\r[]"); /* the one word that is not an id */
            rc = gm_fail(st, GM_EFORMAT, "stdin: id %zu: expected a token id in [0, %d), found '%.*s%s'", n + 1,
                         (int)gm_tokenizer_vocab_size(t), w < 20 ? w : 20, p, w > 20 ? "..." : "");
            goto out;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            int32_t *q = realloc(ids, cap * sizeof *q);
            if (q == NULL) {
                rc = gm_fail(st, GM_ENOMEM, "stdin: out of memory");
                goto out;
            }
            ids = q;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if ((rc = gm_tokenizer_decode(t, ids, n, skip_special, &out, &out_len, st)) != 0)
        goto out;
    fwrite(out, 1, out_len, stdout);
    printf("\n");
out:
    free(out);
    free(ids);
    free(text);
    return rc;
}

int gm_tokenize_main(int argc, char **argv)
{
    const char *path = NULL;
    int no_special = 0, no_parse = 0, do_decode = 0, n_paths = 0, rc;
    gm_tokenizer *t = NULL;
    gm_status st = {0};

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-special") == 0)
            no_special = 1;
        else if (strcmp(argv[i], "--no-parse-special") == 0)
            no_parse = 1;
        else if (strcmp(argv[i], "--decode") == 0)
            do_decode = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return GM_EXIT_OK;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            /* one line, as gm_cli_bad_option gives the other commands: the help is for --help */
            fprintf(stderr, "gen-model tokenize: unknown option '%s'; see gen-model tokenize --help\n", argv[i]);
            return GM_EXIT_USAGE;
        } else if (n_paths++ == 0)
            path = argv[i];
    }
    if (n_paths != 1) {
        fprintf(stderr, "gen-model: tokenize: expected one TOKENIZER_JSON, found %d; see gen-model tokenize --help\n",
                n_paths);
        return GM_EXIT_USAGE;
    }
    if (gm_tokenizer_load(&t, path, &st) != 0) {
        fprintf(stderr, "gen-model: %s\n", st.msg);
        return gm_exit_code(st.code);
    }
    rc = do_decode ? decode(t, no_special, &st) : encode(t, !no_special, !no_parse, &st);
    if (rc != 0)
        fprintf(stderr, "gen-model: %s\n", st.msg);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "gen-model: stdout: %s\n", strerror(errno));
        rc = GM_EIO;
    }
    gm_tokenizer_free(t);
    return gm_exit_code(rc);
}

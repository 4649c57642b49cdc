/*
** Encode and decode with fixed real tokenizers (../shared/tokenizers:
** Qwen2.5's byte-level BPE and Mistral's SentencePiece-style BPE) on fuzzed
** text and ids. Byte 0 picks the tokenizer and the mode; the rest is the text
** or, for decode, little-endian int32 ids. Encoded ids must be in range and
** decoding them must give back valid text.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/tokenizer.h"

static const char *const files[] = {
    GM_SHARED_DIR "/tokenizers/qwen2_5/tokenizer.json",
    GM_SHARED_DIR "/tokenizers/mistral7b_spm/tokenizer.json",
};
#define N_TOK (sizeof files / sizeof files[0])
static gm_tokenizer *toks[N_TOK];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t i = 0; i < N_TOK; i++) {
        gm_status st = {0};
        if (gm_tokenizer_load(&toks[i], files[i], &st) != 0) {
            fprintf(stderr, "fuzz_tokenizer_codec: %s\n", st.msg);
            abort();
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned mode = data[0];
    const gm_tokenizer *t = toks[mode % N_TOK];
    const int add_special = (mode >> 1) & 1, special = (mode >> 2) & 1;
    data++;
    size--;
    gm_status st = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    char *text = NULL;
    size_t len = 0;
    if ((mode >> 3) & 1) { /* decode arbitrary ids */
        size_t k = size / 4;
        int32_t *in = malloc(k ? k * 4 : 1);
        if (!in)
            return 0;
        memcpy(in, data, k * 4);
        if (gm_tokenizer_decode(t, in, k, special, &text, &len, &st) == 0) {
            if (strlen(text) > len)
                abort();
            free(text);
        } else if (!st.msg[0] || strchr(st.msg, '\n')) {
            abort();
        }
        free(in);
        return 0;
    }
    int rc = (mode >> 4) & 1 ? gm_tokenizer_encode_mt(t, (const char *)data, size, add_special, special, 2, &ids, &n, &st)
                             : gm_tokenizer_encode(t, (const char *)data, size, add_special, special, &ids, &n, &st);
    if (rc != 0) {
        if (!st.msg[0] || strchr(st.msg, '\n'))
            abort();
        return 0;
    }
    const int32_t vocab = gm_tokenizer_vocab_size(t);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            abort();
    if (gm_tokenizer_decode(t, ids, n, 0, &text, &len, &st) == 0)
        free(text);
    free(ids);
    return 0;
}

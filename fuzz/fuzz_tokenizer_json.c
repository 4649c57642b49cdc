/*
** tokenizer.json loading from arbitrary bytes (written to a scratch file, as
** gm_tokenizer_load reads a path). A tokenizer that loads must then encode
** and decode a fixed text without crashing.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/tokenizer.h"

static const char text[] = "Hello, world! 123 <|endoftext|> caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\n\t  x";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[512];
    if (!path[0])
        snprintf(path, sizeof path, "%s/tokenizer.json", fz_scratch());
    fz_write(path, data, size);
    gm_status st = {0};
    gm_tokenizer *t = NULL;
    if (gm_tokenizer_load(&t, path, &st) != 0) {
        if (!st.msg[0] || strchr(st.msg, '\n'))
            abort();
        return 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    for (int flags = 0; flags < 4; flags++) {
        if (gm_tokenizer_encode(t, text, sizeof text - 1, flags & 1, flags & 2, &ids, &n, &st) == 0) {
            char *out = NULL;
            size_t len = 0;
            if (gm_tokenizer_decode(t, ids, n, flags & 1, &out, &len, &st) == 0)
                free(out);
            free(ids);
            ids = NULL;
        }
    }
    int32_t probe[] = {0, 1, 2, 255, 256, -1, gm_tokenizer_vocab_size(t), gm_tokenizer_vocab_size(t) - 1};
    char *out = NULL;
    size_t len = 0;
    if (gm_tokenizer_decode(t, probe, sizeof probe / sizeof probe[0], 0, &out, &len, &st) == 0)
        free(out);
    gm_tokenizer_free(t);
    return 0;
}

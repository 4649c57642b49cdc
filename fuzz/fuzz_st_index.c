/* model.safetensors.index.json's weight_map: every accepted shard name is a plain file name. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gm_status st = {0};
    char **names = NULL;
    size_t n = 0;
    if (st_index_shards((const char *)data, size, "fuzz.index.json", &names, &n, &st) == 0) {
        for (size_t i = 0; i < n; i++) {
            const char *s = names[i];
            size_t len = strlen(s);
            if (!len || strchr(s, '/') || strstr(s, "..") ||
                len < 12 || strcmp(s + len - 12, ".safetensors") != 0)
                abort();
            for (const char *p = s; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                    abort();
            if (i > 0 && strcmp(names[i - 1], s) >= 0)
                abort();
        }
        st_free_names(names, n);
    } else if (!st.msg[0] || strchr(st.msg, '\n')) {
        abort();
    }
    return 0;
}

/* A program of a project that has gen-model as its subproject, on GenModel::runtime or GenModel::runtime_shared:
 * the tokenizer (which links Oniguruma and utf8proc, the subproject's dependencies, not the project's) encodes a
 * text into the ids expected, and the kernels name their tier.
 *   vendor_check TOKENIZER_JSON TEXT ID,ID,... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/kernels.h"
#include "gm/tokenizer.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: vendor_check TOKENIZER_JSON TEXT ID,ID,...\n");
        return 2;
    }
    gm_status st = {0};
    gm_tokenizer *t = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (gm_tokenizer_load(&t, argv[1], &st) != 0 ||
        gm_tokenizer_encode(t, argv[2], strlen(argv[2]), 0, 0, &ids, &n, &st) != 0) {
        fprintf(stderr, "vendor_check: %s\n", st.msg);
        gm_tokenizer_free(t);
        return 1;
    }
    char got[4096] = "";
    for (size_t i = 0, len = 0; i < n && len < sizeof got; i++)
        len += (size_t)snprintf(got + len, sizeof got - len, "%s%d", i ? "," : "", (int)ids[i]);
    const int ok = strcmp(got, argv[3]) == 0;
    printf("vendor_check: %zu ids%s%s, kernels %s\n", n, ok ? " as expected" : ", not the ids expected: ", ok ? "" : got,
           gm_kernels_name());
    free(ids);
    gm_tokenizer_free(t);
    return ok ? 0 : 1;
}

/*
** config.json -> Config, both readers: the runtime's gm_config_parse and the
** generator's Lua extraction with the architecture gate (gm_check_config on
** a snapshot built in memory). Neither may crash; the generator must not
** report an internal error (GM_ELUA) for any input, and a Config both
** accept must be the same, field for field (gm_config_diff). The generator
** rejects more (the architecture gate, dimension limits): only inputs both
** accept are compared.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/config.h"
#include "lua_host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gm_status st = {0};
    gm_config c;
    int c_ok = gm_config_parse(&c, (const char *)data, size, "config.json", &st) == 0;
    if (!c_ok && (!st.msg[0] || strchr(st.msg, '\n')))
        abort();
    if (c_ok && (c.n_layers < 1 || c.emb_dim < 1 || c.n_heads < 1 || c.n_kv_heads < 1 || c.head_dim < 1 ||
                 c.vocab_size < 1 || c.n_eos_token_ids < 0 || c.n_eos_token_ids > GM_MAX_EOS))
        abort();

    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    gm_snapshot snap = {.repo = "fuzz/model", .config = text, .config_len = size};
    gm_gen_options opt = {0};
    gm_config lua;
    gm_status_clear(&st);
    const int lua_ok = gm_check_config(&snap, &opt, &lua, &st) == 0;
    if (!lua_ok && (st.code == GM_ELUA || !st.msg[0] || strchr(st.msg, '\n')))
        abort(); /* a generator bug on hostile input, or a message that is not one line */
    free(text);
    if (c_ok && lua_ok) {
        char diff[1024];
        /* only the architecture knows these, and the C reader does not read it */
        c.qkv_bias = lua.qkv_bias;
        c.qk_norm = lua.qk_norm;
        if (gm_config_diff(&lua, &c, diff, sizeof diff) != 0) {
            fprintf(stderr, "fuzz_config: the readers disagree (generator vs gm_config_parse): %s\n", diff);
            abort();
        }
    }
    return 0;
}

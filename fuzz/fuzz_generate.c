/*
** The template renderer's input: the Lua-side model description built from
** config.json, the index and the safetensors headers, then every template
** rendered. The input is config.json, the index (empty: a single
** model.safetensors) and the shard headers, separated by lines "#GMFUZZ#".
** As in gen-model, each piece must pass its C reader before the generator
** sees it. The generator must never fail with an internal error (GM_ELUA),
** and what it renders must be plain text with the model id it was given.
*/
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gm/safetensors.h"
#include "lua_host.h"

#define MAX_PARTS 10

static void check_result(const gm_gen_result *r)
{
    if (!r->id || strcmp(r->id, "fuzz_model") != 0 || r->n_files == 0)
        abort();
    for (size_t i = 0; i < r->n_files; i++) {
        const gm_gen_file *f = &r->files[i];
        if (!f->path || f->path[0] == '/' || strstr(f->path, "..") || memchr(f->text, '\0', f->len))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[MAX_PARTS];
    size_t len[MAX_PARTS];
    size_t n = fz_split(data, size, part, len, MAX_PARTS);
    gm_status st = {0};
    gm_snapshot s = {0};
    gm_gen_options opt = {.name = "fuzz_model"};
    gm_gen_result r = {0};
    char **names = NULL;
    size_t n_names = 0;

    if (n < 3)
        return 0;
    s.repo = strdup("fuzz/model");
    s.config = malloc(len[0] + 1);
    if (!s.repo || !s.config)
        goto out;
    memcpy(s.config, part[0], len[0]);
    s.config[len[0]] = '\0';
    s.config_len = len[0];
    if (gm_check_config(&s, &opt, NULL, &st)) {
        if (st.code == GM_ELUA)
            abort();
        goto out;
    }
    if (len[1] == 0) {
        if ((names = calloc(1, sizeof *names)) == NULL || (names[0] = strdup("model.safetensors")) == NULL)
            goto out;
        n_names = 1;
    } else {
        if ((s.index = malloc(len[1] + 1)) == NULL)
            goto out;
        memcpy(s.index, part[1], len[1]);
        s.index[len[1]] = '\0';
        s.index_len = len[1];
        if (st_index_shards(s.index, s.index_len, "model.safetensors.index.json", &names, &n_names, &st))
            goto out;
    }
    if (n_names > n - 2)
        goto out; /* a header for every shard */
    if ((s.shards = calloc(n_names, sizeof *s.shards)) == NULL)
        goto out;
    for (size_t i = 0; i < n_names; i++) {
        gm_shard *sh = &s.shards[s.n_shards++];
        st_header h;
        sh->file = strdup(names[i]);
        sh->header = malloc(len[2 + i] ? len[2 + i] : 1);
        if (!sh->file || !sh->header)
            goto out;
        memcpy(sh->header, part[2 + i], len[2 + i]);
        sh->header_len = len[2 + i];
        if (st_header_parse(&h, sh->header, sh->header_len, 0, sh->file, &st))
            goto out;
        st_header_free(&h);
    }
    if (gm_generate(&s, &opt, &r, &st) == 0)
        check_result(&r);
    else if (st.code == GM_ELUA || !st.msg[0] || strchr(st.msg, '\n'))
        abort();
out:
    gm_gen_result_free(&r);
    st_free_names(names, n_names);
    gm_snapshot_free(&s);
    return 0;
}

/* Gate 3's comparison of a model's built-in Config with a weights folder's config.json: see config_check.h. */
#include "config_check.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gm/config.h"

static int has_file(const char *dir, const char *file)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &sb) == 0;
}

int p0_is_q4nx_bundle(const char *dir)
{
    return !has_file(dir, "model.safetensors") && !has_file(dir, "model.safetensors.index.json") &&
           has_file(dir, "model.q4nx");
}

int p0_has_weights(const char *dir)
{
    return has_file(dir, "model.safetensors") || has_file(dir, "model.safetensors.index.json") || p0_is_q4nx_bundle(dir);
}

int p0_config_check(const gm_model_entry *e, const char *dir, char *diff, size_t size, gm_status *st)
{
    char path[4096], arch[256], fields[400], other[sizeof st->msg] = "";
    gm_config want, got;
    gm_status ast = {0};
    if (size)
        diff[0] = '\0';
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (gm_config_read(&want, path, st))
        return st->code;
    e->config(&got);
    /* qkv_bias and qk_norm come with the architecture: the entry's, which must be config.json's */
    want.qkv_bias = e->qkv_bias;
    want.qk_norm = e->qk_norm;
    /* a Q4NX bundle says its quantization by its file, model.q4nx: config.json has no quantization_config */
    if (want.quant.method == GM_QUANT_NONE && p0_is_q4nx_bundle(dir))
        want.quant = gm_quant_q4nx();
    const int n = gm_config_diff(&got, &want, fields, sizeof fields);
    if (gm_config_read_architecture(path, arch, sizeof arch, &ast))
        snprintf(other, sizeof other, "%s", ast.msg);
    else if (strcmp(arch, e->arch) != 0)
        snprintf(other, sizeof other, "architecture (architectures[0]) is %s, config.json says %s", e->arch, arch);
    if (size)
        snprintf(diff, size, "%s%s%s", other, other[0] && n ? "; " : "", n ? fields : "");
    return 0;
}

int p0_note_positions(const char *prog, const gm_config *c, int positions)
{
    if (positions <= c->max_position_embeddings)
        return 0;
    fprintf(stderr,
            "%s: note: this run takes %d positions, past max_position_embeddings (%d), the longest the model was "
            "trained for: transformers runs them the same way, but outputs there say little about the port; a "
            "shorter prompt or fewer decode steps stay inside\n",
            prog, positions, c->max_position_embeddings);
    return 1;
}

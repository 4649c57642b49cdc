/*
** Quantized checkpoints end to end, on tiny models tests/quant_models.py made
** from the goldens by each format's own rule (AWQ, GPTQ sym and asym with and
** without desc_act, FP8 with block scales, mlir-air's Q4NX bundle), scaffolded
** by this build's gen-model (quant_models/, phase0_quant): the loader's bf16
** equals numpy's dequantization bit for bit in either form; the parts stay
** where the file holds them; phase0 and capture run on each; an AWQ model's
** top-k gate passes against its own dequantized reference and fails against
** the bf16 original; each malformed checkpoint is one line; and the
** header-only snapshots of real repos in tests/data/quant scaffold.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq_qwen2/awq_qwen2_weights.h"
#include "gm/npy.h"
#include "gm/registry.h"
#include "gm/safetensors.h"
#include "util.h"

extern const gm_model_entry *const gm_quant_models[];

/* Every expected/<tensor>.npy of model id against what the loader holds for it, in the given form. */
static int compare_expected(const gm_model_entry *e, gm_wform form)
{
    char dir[4096], path[4400];
    snprintf(dir, sizeof dir, "%s/%s", GM_QUANT_DIR, e->id);
    void *w = calloc(1, e->weights_size);
    gm_status st = {0};
    cr_assert_eq(e->load_form(w, dir, form, &st), 0, "%s: %s", e->id, st.msg);
    snprintf(path, sizeof path, "%s/expected", dir);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "%s", path);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".npy") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 4), de->d_name);
        snprintf(path, sizeof path, "%s/expected/%s", dir, de->d_name);
        gm_npy want;
        cr_assert_eq(gm_npy_read(path, &want, &st), 0, "%s", st.msg);
        const gm_tensor_spec *spec = NULL;
        const gm_bf16 *got = e->find(w, name, &spec);
        cr_assert_not_null(got, "%s: %s was not loaded", e->id, name);
        cr_assert(spec->quant != 0, "%s: %s is not a dequantized projection", e->id, name);
        const int64_t rows = want.shape[0], cols = want.shape[1];
        cr_assert(want.rank == 2 && rows == spec->shape[0] && cols == spec->shape[1], "%s: %s", e->id, name);
        const int32_t *bits = want.data;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                /* HF (out, in) at [r][c]; a projection in the form GM_W_KN held transposed, at [c][r] */
                const size_t at = spec->transpose && form == GM_W_KN ? (size_t)(c * rows + r) : (size_t)(r * cols + c);
                if (got[at] != (gm_bf16)bits[r * cols + c])
                    cr_assert_fail("%s, form %d: %s[%lld][%lld] is 0x%04x, numpy's dequantization gives 0x%04x", e->id,
                                   form, name, (long long)r, (long long)c, got[at], (unsigned)bits[r * cols + c]);
            }
        gm_npy_free(&want);
        n++;
    }
    closedir(d);
    e->free(w);
    free(w);
    return n;
}

Test(quant, the_loader_dequantizes_every_projection_as_numpy_does_bit_for_bit_in_either_form)
{
    int models = 0;
    GM_FOR_EACH_MODEL(e, gm_quant_models) {
        gm_config c;
        e->config(&c);
        const int want = 7 * c.n_layers + (!strcmp(e->id, "gptq_llama") ? 1 : 0); /* its LM head is quantized too */
        cr_assert_eq(compare_expected(e, GM_W_KN), want, "%s: projections compared", e->id);
        cr_assert_eq(compare_expected(e, GM_W_NK), want, "%s: projections compared", e->id);
        models++;
    }
    cr_assert_eq(models, 5);
}

/* Loading, finding and freeing weights through a generated tensor table. */
#include "gm/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gm_bf16 * field that spec s names, in layer `layer` for per-layer specs. */
static gm_bf16 **field(const gm_weights_layout *lay, const gm_tensor_spec *s, int layer)
{
    char *base = s->per_layer ? (char *)lay->layers + (size_t)layer * lay->layer_size
                              : (char *)lay->weights;
    return (gm_bf16 **)(void *)(base + s->offset);
}

static void name_of(char *buf, size_t size, const gm_tensor_spec *s, int layer)
{
    if (s->per_layer)
        snprintf(buf, size, s->hf_name, layer);
    else
        snprintf(buf, size, "%s", s->hf_name);
}

int gm_weights_load(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                    size_t n_specs, const char *dir, gm_status *st)
{
    st_model *m = NULL;
    char name[256];
    if (st_model_open(&m, dir, st))
        return st->code;
    for (size_t i = 0; i < n_specs; i++) {
        const gm_tensor_spec *s = &specs[i];
        const int n = s->per_layer ? lay->n_layers : 1;
        for (int l = 0; l < n; l++) {
            name_of(name, sizeof name, s, l);
            if (st_model_load_bf16(m, name, s->rank, s->shape, s->transpose, field(lay, s, l), st))
                goto fail;
        }
    }
    st_model_close(m);
    return 0;
fail:
    st_model_close(m);
    gm_weights_free(lay, specs, n_specs);
    return st->code;
}

void gm_weights_free(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                     size_t n_specs)
{
    for (size_t i = 0; i < n_specs; i++) {
        const int n = specs[i].per_layer ? lay->n_layers : 1;
        for (int l = 0; l < n; l++) {
            gm_bf16 **f = field(lay, &specs[i], l);
            free(*f);
            *f = NULL;
        }
    }
}

const gm_bf16 *gm_weights_find(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                               size_t n_specs, const char *name,
                               const gm_tensor_spec **spec)
{
    char buf[256];
    for (size_t i = 0; i < n_specs; i++) {
        const int n = specs[i].per_layer ? lay->n_layers : 1;
        for (int l = 0; l < n; l++) {
            name_of(buf, sizeof buf, &specs[i], l);
            if (strcmp(buf, name) == 0) {
                if (spec)
                    *spec = &specs[i];
                return *field(lay, &specs[i], l);
            }
        }
    }
    return NULL;
}

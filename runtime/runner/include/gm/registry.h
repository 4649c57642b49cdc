/*
** The models linked into a program. Each generated model has an entry
** (models/<id>/<id>_registry.c, from templates/registry.c.tmpl) that puts
** its functions behind signatures naming none of its types; a model library
** (cmake/models.cmake) lists its entries in one NULL-terminated table, so
** that a program finds a model by id without knowing any model's types.
*/
#ifndef GM_REGISTRY_H
#define GM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "gm/bf16.h"
#include "gm/config.h"
#include "gm/runner.h"
#include "gm/status.h"
#include "gm/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_model_entry {
    const char *id;      /* "qwen2_1_5b" */
    const char *repo;    /* "Qwen/Qwen2-1.5B" */
    const char *commit;  /* "" when generated from a folder without one */
    const char *arch;    /* the architecture it was generated for: config.json's architectures[0] */
    bool qkv_bias, qk_norm; /* what that architecture implies (generator/lua/families.lua), not config.json */
    void (*config)(gm_config *out); /* <id>_config_default(), exported */
    size_t weights_size;            /* sizeof(<id>_Weights) */
    /* <id>_weights_load_form in the form the running kernel tier reads best (gm_kernels_wform): the runner's */
    int (*load)(void *w, const char *dir, gm_status *st);
    int (*load_form)(void *w, const char *dir, gm_wform form, gm_status *st); /* <id>_weights_load_form */
    void (*free)(void *w);                                 /* <id>_weights_free */
    const gm_bf16 *(*find)(const void *w, const char *hf_name, const gm_tensor_spec **spec);
    int (*rope_table)(gm_bf16 **table, int seq_len, gm_status *st);
    int n_layers;
    void (*view)(const void *w, rt_layer *layers, rt_model *m);     /* <id>_runner_view */
} gm_model_entry;

/* The tables of the model libraries: each ends with NULL. */
extern const gm_model_entry *const gm_models[];        /* models/ */
extern const gm_model_entry *const gm_golden_models[]; /* ../shared/golden, for tests */

/* for each entry e of table: GM_FOR_EACH_MODEL(e, gm_models) { ... } */
#define GM_FOR_EACH_MODEL(e, table) \
    for (const gm_model_entry *const *e##_at = (table), *e; (e = *e##_at) != NULL; e##_at++)

/* The entry with this id in table, or NULL. */
static inline const gm_model_entry *gm_registry_find(const gm_model_entry *const *table, const char *id)
{
    for (; *table; table++)
        if (strcmp((*table)->id, id) == 0)
            return *table;
    return NULL;
}

#ifdef __cplusplus
}
#endif

#endif

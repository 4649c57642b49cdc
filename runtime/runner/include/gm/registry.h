/*
** The models linked into a program: CMake writes one table per model library
** (every folder under models/, or the goldens built for the tests), so a
** program finds a model by id without knowing any model's types.
*/
#ifndef GM_REGISTRY_H
#define GM_REGISTRY_H

#include <stddef.h>

#include "gm/bf16.h"
#include "gm/config.h"
#include "gm/runner.h"
#include "gm/status.h"
#include "gm/weights.h"

typedef struct gm_model_entry {
    const char *id;      /* "qwen2_1_5b" */
    const char *repo;    /* "Qwen/Qwen2-1.5B" */
    const char *commit;  /* "" when generated from a folder without one */
    void (*config)(gm_config *out); /* <id>_config_default(), exported */
    size_t weights_size;            /* sizeof(<id>_Weights) */
    int (*load)(void *w, const char *dir, gm_status *st);  /* <id>_weights_load */
    void (*free)(void *w);                                 /* <id>_weights_free */
    const gm_bf16 *(*find)(const void *w, const char *hf_name, const gm_tensor_spec **spec);
    int (*rope_table)(gm_bf16 **table, int seq_len, gm_status *st);
    int n_layers;
    void (*view)(const void *w, rt_layer *layers, rt_model *m);     /* <id>_runner_view */
} gm_model_entry;

/* Each table ends with an entry whose id is NULL. */
extern const gm_model_entry gm_models[];        /* models/ */
extern const gm_model_entry gm_golden_models[]; /* ../shared/golden, for tests */

#endif

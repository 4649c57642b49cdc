/*
** Gate 3's comparison, which capture and `verify --weights` make too before
** they compute a reference: the Config built into a model entry against the
** config.json of the weights folder it is about to run on. A reference made
** from weights of another model or revision would be wrong without a sign.
*/
#ifndef GM_PHASE0_CONFIG_CHECK_H
#define GM_PHASE0_CONFIG_CHECK_H

#include <stddef.h>

#include "gm/registry.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Is dir a folder of mlir-air's Q4NX bundle: model.q4nx, and neither model.safetensors nor an index? */
int p0_is_q4nx_bundle(const char *dir);

/* Does dir hold weights at all (model.safetensors, an index or a Q4NX bundle), as opposed to the wrong ones? */
int p0_has_weights(const char *dir);

/*
** e's Config and architecture against dir/config.json: 0 and diff "" when
** every field and the architecture agree; 0 and diff naming each difference
** (cut with "..." at size bytes) when they do not; st's code, and diff "",
** when config.json cannot be read (st says why).
*/
int p0_config_check(const gm_model_entry *e, const char *dir, char *diff, size_t size, gm_status *st);

/*
** A run of `positions` positions (prompt and decode) on a model trained for
** max_position_embeddings: past them it runs as transformers runs it (RoPE
** has no end), but outputs there are not what the model was made for, so
** prog says so on stderr, once. Returns whether it did.
*/
int p0_note_positions(const char *prog, const gm_config *c, int positions);

#ifdef __cplusplus
}
#endif

#endif

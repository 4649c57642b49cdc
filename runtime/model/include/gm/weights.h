/*
** Loading a model's weights by table. Generated code describes every tensor
** of its model once, as a gm_tensor_spec (HF name, destination field, HF
** shape, a projection or not); the runtime loads, finds and frees by that table.
**
** Projections are held in the form the caller asks for (gm_wform,
** gm/kernels.h): (in, out), the NPU pipeline's layout, transposed on the way
** in; (in, out) in panels of 16 or 32 outputs, the FMA tiers', transposed
** panel by panel on the way in; or (out, in), Hugging Face's, as the file
** holds it. Every tensor kept as the file holds it (bf16, not transposed)
** is used in place, in the files' read-only mappings, which stay open with
** the weights: no copy, no fresh memory. (Its data must start at an even
** offset, as bf16 needs: safetensors pads the header to 8 bytes and tensors
** follow each other, so it always does; one that does not is copied.) The
** rest, converted from F16 or F32, transposed or put into panels, lands in
** one arena: a single anonymous mapping, asking for huge pages, filled by
** all threads from the mappings by the kernels' load-time routines, each
** piece's file pages let go once it is placed (the page cache keeps them),
** so that the process never holds the file twice.
**
** A quantized checkpoint's projection (gm/quant.h) is a spec with `quant`
** set, followed in the table by the specs of its parts. Each part is held
** where the file holds it (copied only when its data is not aligned to its
** element), the NPU pipeline's input, and stays mapped and in memory; the
** projection's bf16 field is dequantized from the parts into the arena, in
** the form asked for: row by row in the format's natural form, or, into the
** other, a block of the rule's columns a task (gm_dequant_rows_other: AWQ's
** straight from its words, the others' through the kernels' transposes),
** each task filling rows of its own; in panels, whole panels a task, each
** the (in, out) form's columns of its outputs.
*/
#ifndef GM_WEIGHTS_H
#define GM_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "gm/bf16.h"
#include "gm/kernels.h"
#include "gm/quant.h"
#include "gm/safetensors.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gm_tensor_spec {
    const char *hf_name; /* per-layer names hold one %d for the layer index */
    int per_layer;       /* 1: a field of LayerWeights, 0: of Weights */
    size_t offset;       /* offsetof the field: a gm_bf16 *, or for a part a const pointer of its dtype */
    int rank;            /* 1 or 2 */
    int64_t shape[2];    /* as HF stores it: (out, in) for projections; a part's as the file holds it */
    int transpose;       /* 1: a projection, held as (in, out) when loaded in GM_W_KN (row-major) or a panel form */
    int quant;           /* a projection dequantized from the parts that follow it: its gm_quant_method; else 0 */
    int part;            /* a part of the projection before it: its number in its format (gm/quant.h); else 0 */
    int dtype;           /* a part: the st_dtype the file holds it in */
} gm_tensor_spec;

/* The memory every loaded tensor of a model lives in: the arena, and the files mapped. */
typedef struct gm_arena {
    void *base;
    size_t size;
    st_model *files;
    double dequant_seconds; /* the load's dequantization pass, wall clock (0: nothing quantized) */
} gm_arena;

/*
** Where the loads that follow hold what the file holds as it is used (bf16,
** not transposed: GM_W_NK's projections, the embedding, the norms, biases):
**   GM_PLACE_AUTO    in the arena when the kernel gives it huge pages
**                    (transparent huge pages "always" or "madvise"), else
**                    in place (gm_weights_place_arena says which)
**   GM_PLACE_MAPPED  in place in the file's mapping: nothing copied
**   GM_PLACE_ARENA   copied into the arena
** In the arena each tensor starts on a 64-byte line and lies in 2 MB
** pages; in the mapping it lies at the file's offset (any even one: a
** safetensors header's length is arbitrary) in the page cache's 4 KB pages,
** where the tile products read W at 0.5-0.95x the speed (bench/bench_place).
** Quantized parts, read once by their dequantization, stay in place.
*/
typedef enum gm_place { GM_PLACE_AUTO = 0, GM_PLACE_MAPPED, GM_PLACE_ARENA } gm_place;

/* The process's choice for the loads that follow (GM_PLACE_AUTO until set). */
void gm_weights_set_place(gm_place place);

/*
** Whether `place` copies such tensors into the arena on this machine. thp:
** the text of /sys/kernel/mm/transparent_hugepage/enabled (NULL: read it);
** the mode in brackets, "[always]" or "[madvise]", gives huge pages.
*/
int gm_weights_place_arena(gm_place place, const char *thp);

/*
** Where the weights live: the Weights struct, its layers array, one layer's
** size, the number of layers, the arena that owns the tensors, and the form
** the projections are to be held in.
*/
typedef struct gm_weights_layout {
    void *weights;
    void *layers;
    size_t layer_size;
    int n_layers;
    gm_arena *arena;
    gm_wform form;
    const gm_quant_config *quant; /* the checkpoint's quantization, for the specs with `quant` set; NULL: none */
} gm_weights_layout;

/*
** Load every tensor of specs from the safetensors files in dir into the
** fields the specs name, in place in the files' mappings or in one arena
** (gm_weights_set_place), using threads threads (<= 0:
** gm_default_threads()); every page is in memory when it returns. On failure nothing stays allocated or mapped and
** st names the file and tensor.
*/
int gm_weights_load(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                    size_t n_specs, const char *dir, int threads, gm_status *st);

/*
** One tensor of an open model folder in a fresh malloc'd bf16 buffer (*out),
** checked as st_model_check does, converted to bf16 (round to nearest even)
** where the file holds F16 or F32 and, when transpose is set, transposed from
** HF's (out, in) to (in, out): the values gm_weights_load places, one tensor alone.
*/
int gm_weights_load_tensor(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                           gm_bf16 **out, gm_status *st);

/* Release the arena and the mappings and set every field the specs name to NULL. */
void gm_weights_free(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                     size_t n_specs);

/*
** The buffer the loader filled for HF tensor `name` ("model.layers.3.mlp.up_proj.weight"),
** and its spec in *spec; NULL when no spec matches. When spec->transpose is
** set it is held as lay->form says: transposed, (in, out), in GM_W_KN; in
** panels of that transposed matrix in GM_W_PANEL16 and GM_W_PANEL32. A
** quantized projection is found by its `.weight` name, its dequantized
** bf16; its parts are not bf16 and are not found here (their fields are typed).
*/
const gm_bf16 *gm_weights_find(const gm_weights_layout *lay, const gm_tensor_spec *specs,
                               size_t n_specs, const char *name,
                               const gm_tensor_spec **spec);

#ifdef __cplusplus
}
#endif

#endif

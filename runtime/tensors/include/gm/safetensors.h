/*
** A strict safetensors reader, with the rules of the reference
** implementation (huggingface/safetensors): 8-byte little-endian header
** length N (at most 100,000,000), a JSON object starting with '{' and padded
** only with spaces, unique names, a string-to-string __metadata__, known
** dtypes, overflow-checked dtype x shape equal to the offset span, and
** offsets that tile the data section from 0 with no gap or overlap.
**
** Two levels:
**   st_header_*  the parsed header alone: what gen-model checks when only the
**                first 8+N bytes of a file are known (a *.safetensors.head copy)
**   st_model_*   the safetensors files of a model folder, open and
**                memory-mapped: model.safetensors, or
**                model.safetensors.index.json and the shards its weight_map names
** Converting and placing tensors is the weights loader's (gm/weights.h).
*/
#ifndef GM_SAFETENSORS_H
#define GM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_HEADER 100000000u
#define ST_MAX_RANK 8

typedef enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16,
    ST_BF16, ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64, ST_DTYPE_COUNT
} st_dtype;

/* "BF16" etc.; NULL for an out-of-range value. */
const char *st_dtype_name(st_dtype d);
/* Bytes per element. */
size_t st_dtype_size(st_dtype d);

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int rank;
    int64_t shape[ST_MAX_RANK];
    uint64_t begin, end; /* data_offsets, relative to the data section */
} st_tensor;

typedef struct st_header {
    st_tensor *tensors;  /* sorted by name */
    size_t n_tensors;
    uint64_t header_len; /* N: the JSON length, without the 8-byte prefix */
    uint64_t data_len;   /* bytes of tensor data the offsets cover */
} st_header;

/*
** Read the 8-byte prefix of buf (len bytes available) into *n, checking it
** against ST_MAX_HEADER. `what` names the file in messages.
*/
int st_header_len(const uint8_t *buf, size_t len, uint64_t *n,
                  const char *what, gm_status *st);

/*
** Parse and validate a header. buf holds at least the first 8+N bytes of the
** file. file_size is the size of the whole file when known, or 0 when only
** the header is (then the data section is assumed to be exactly what the
** offsets cover). On failure *h is left empty.
*/
int st_header_parse(st_header *h, const uint8_t *buf, size_t len,
                    uint64_t file_size, const char *what, gm_status *st);

/* Look a tensor up by name (binary search); NULL when absent. */
const st_tensor *st_header_find(const st_header *h, const char *name);

void st_header_free(st_header *h);

/*
** Read only the first 8+N bytes of the file at path (a complete safetensors
** file or a header-only copy): *bytes is malloc'd, *n_bytes = 8+N.
*/
int st_read_header_bytes(const char *path, uint8_t **bytes, size_t *n_bytes,
                         gm_status *st);

/* ---------------------------------------------------------------------- */

typedef struct st_model st_model;

/*
** Open the model in folder dir: model.safetensors if present, otherwise
** model.safetensors.index.json and every shard its weight_map names, or,
** without either, model.q4nx (mlir-air's Q4NX bundle, a safetensors file). Each
** file is opened, memory-mapped read-only and validated in full (its size
** must equal 8 + N + data); it stays open until st_model_close. Every tensor in weight_map must be in the shard it names and
** every tensor of a shard must be in weight_map.
*/
int st_model_open(st_model **m, const char *dir, gm_status *st);

/* Find a tensor; *file names the file it lives in (for messages). */
const st_tensor *st_model_find(const st_model *m, const char *name,
                               const char **file);

/* Number of tensors over all files. */
size_t st_model_n_tensors(const st_model *m);

/*
** Check that tensor `name` exists with exactly `rank` dims equal to shape
** (HF order, outermost first), a float dtype (BF16, F16 or F32) and rank 2
** when it is to be transposed; *t receives the tensor. Errors name the file
** and the tensor, the expected and the found value.
*/
int st_model_check(const st_model *m, const char *name, int rank, const int64_t *shape, int transpose,
                   const st_tensor **t, gm_status *st);

/*
** The same for a tensor kept as the file holds it (a quantized checkpoint's
** packed weights, scales, zero points): exactly `rank` dims equal to shape
** and exactly dtype `dtype`.
*/
int st_model_check_as(const st_model *m, const char *name, int rank, const int64_t *shape, st_dtype dtype,
                      const st_tensor **t, gm_status *st);

/*
** Where a tensor's bytes are: the file's descriptor, open until
** st_model_close (read it with pread, from any thread), its path for
** messages, and the absolute offset of the tensor's first byte.
*/
typedef struct st_source {
    int fd;
    const char *path;
    uint64_t offset;
} st_source;

st_source st_model_source(const st_model *m, const st_tensor *t);

/* The raw bytes of a tensor inside the mapping (valid until close). */
const void *st_model_data(const st_model *m, const st_tensor *t);

void st_model_close(st_model *m);

/* ---------------------------------------------------------------------- */

/*
** Parse the weight_map of a model.safetensors.index.json: *shards receives
** the distinct shard file names, sorted, each checked to be a plain file name
** ending in ".safetensors" (no '/', no "..", no control bytes). Free with
** st_free_names.
*/
int st_index_shards(const char *json, size_t len, const char *what,
                    char ***shards, size_t *n_shards, gm_status *st);

/* Free an array of names from st_index_shards. */
void st_free_names(char **names, size_t n);

#ifdef __cplusplus
}
#endif
#endif

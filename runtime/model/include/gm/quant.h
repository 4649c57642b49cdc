/*
** Quantized checkpoints: the formats whose projections the loader
** dequantizes to bf16, each by its own rule.
**
** A quantized projection comes as a few tensors, its parts, instead of one
** float `.weight`. generator/lua/quant.lua describes each format as data
** (its quantization_config fields, its parts with their names, dtypes and
** shapes); the parts are numbered here in that table's order. The loader
** (gm/weights.h) keeps every part where the file holds it, the NPU
** pipeline's input, and fills the projection's bf16 field from them by the
** rule below: the "same dequantized weights" the bf16 reference (phase0,
** capture, verify --weights) then runs on. Each rule computes in f32 as the
** format's own reference dequantizer does (mlir-air's numpy, transformers'
** torch), and rounds once, to bf16, to nearest even; where the f32 steps are
** exact (AWQ's and GPTQ's, and FP8's with 16-bit scales) that is the exact
** value rounded once (Q4NX's product is exact, its sum an f32 rounding, as
** in its reference). `in` and `out` are the projection's input and output
** features (Hugging Face's weight is (out, in)); g is the group size.
**
**   AWQ, AutoAWQ's GEMM layout (quant_method "awq", version "gemm", zero_point true)
**     1 qweight  I32 [in, out/8]     eight 4-bit values a word along out: the
**                                    nibble at bits 4i..4i+3 of word j holds output
**                                    8j + AWQ_ORDER[i], AWQ_ORDER = 0 2 4 6 1 3 5 7
**     2 qzeros   I32 [in/g, out/8]   the zero points, packed the same way
**     3 scales   F16 or BF16 [in/g, out]
**     W[k][n] = (q[k][n] - z[k/g][n]) * s[k/g][n]          held natively as (in, out)
**
**   GPTQ (quant_method "gptq"; sym or not, desc_act or not)
**     1 qweight  I32 [in/8, out]     eight values a word along in: bits 4i..4i+3 of
**                                    row j hold input 8j + i
**     2 qzeros   I32 [G, out/8]      bits 4i..4i+3 of word j: output 8j + i; stored
**                                    as the zero point minus one in checkpoint_format
**                                    "gptq" (v1, the default), as it is in "gptq_v2"
**     3 scales   F16 or BF16 [G, out]
**     4 g_idx    I32 [in], optional  each input's group (desc_act orders the inputs by
**                                    activation, so the groups are not k / g); absent: k / g
**     W[k][n] = (q[k][n] - (z[g(k)][n] + 1)) * s[g(k)][n]  (v2: without the + 1), (in, out)
**     G = ceil(in / g), or 1 for group_size -1 (a last group of fewer inputs)
**
**   FP8 (quant_method "fp8", fmt "e4m3", weight_block_size [bo, bi]), as Qwen3's -FP8 repos
**     1 weight            F8_E4M3 [out, in]
**     2 weight_scale_inv  F32, BF16 or F16 [ceil(out/bo), ceil(in/bi)]
**     W[n][k] = e4m3(w[n][k]) * s[n/bo][k/bi]  (an f32 product)   held natively as (out, in)
**
**   Q4NX, mlir-air's model.q4nx bundle (FastFlowLM's I8 encoding)
**     1 weight   I8 [ceil(out/32) * ceil(in/256), 5120]   blocks of 32 rows x 256 inputs,
**                row block major; a block: bf16 scale[8][32] (group of 32 inputs, row),
**                bf16 min[8][32], then bytes [2][256][8]: byte [h][c][b] holds rows
**                16h + 2b (low nibble) and 16h + 2b + 1 (high nibble) of input c
**     W[n][k] = scale * q + min  (f32)                                (out, in)
**     A dimension that is not a whole number of blocks (this project's tiny test
**     models only; every real bundle's are) is padded, the padding ignored.
*/
#ifndef GM_QUANT_H
#define GM_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gm/bf16.h"
#include "gm/kernels.h"
#include "gm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gm_quant_method {
    GM_QUANT_NONE = 0, /* not quantized: every projection is a float .weight */
    GM_QUANT_AWQ,
    GM_QUANT_GPTQ,
    GM_QUANT_FP8,
    GM_QUANT_Q4NX
} gm_quant_method;

/* The quantization_config fields a model's Config carries (zero, GM_QUANT_NONE, for a float checkpoint). */
typedef struct gm_quant_config {
    gm_quant_method method;
    int bits;        /* the bits of a weight: bits (AWQ, GPTQ); 8 (FP8); 4 (Q4NX) */
    int group_size;  /* the inputs that share a scale: group_size (AWQ, GPTQ; -1: all of them);
                        weight_block_size[1] (FP8); 32 (Q4NX) */
    int block_out;   /* the outputs that share a scale: weight_block_size[0] (FP8); 32 (Q4NX); else 0 */
    bool zero_point; /* AWQ's zero_point */
    bool sym;        /* GPTQ's sym */
    bool desc_act;   /* GPTQ's desc_act */
    bool gptq_v2;    /* GPTQ's checkpoint_format is "gptq_v2": zero points stored as they are */
} gm_quant_config;

enum {
    GM_QUANT_MAX_PARTS = 4,
    GM_Q4NX_ROWS = 32,           /* a Q4NX block: rows (outputs) */
    GM_Q4NX_COLS = 256,          /* inputs */
    GM_Q4NX_GROUP = 32,          /* inputs that share a scale and a min */
    GM_Q4NX_BLOCK_BYTES = 5120   /* 512 of scales, 512 of mins, 4096 of nibbles */
};

/* A Q4NX bundle's quantization: what its file, model.q4nx, says (its config.json says nothing of it). */
gm_quant_config gm_quant_q4nx(void);

/* "awq", "gptq", "fp8", "q4nx", "none". */
const char *gm_quant_method_name(gm_quant_method m);

/* The form a format's rule produces row by row: GM_W_KN for AWQ and GPTQ, GM_W_NK for FP8 and Q4NX. */
gm_wform gm_quant_natural_form(gm_quant_method m);

/* How many parts the format has (the last, g_idx, is optional for GPTQ); 0 for none. */
int gm_quant_n_parts(gm_quant_method m);

/* The parts' numbers (from 1) where the code names one. */
enum { GM_GPTQ_G_IDX = 4 };

/* Whether part `part` (from 1) of the format may be absent: GPTQ's g_idx. */
int gm_quant_part_optional(gm_quant_method m, int part);

/* The number (from 1) of the format's scales part, whose dtype the rule reads; 0 for Q4NX (its scales are in its blocks). */
int gm_quant_scale_part(gm_quant_method m);

/*
** Whether part `part` of a projection of `out` x `in` may have this shape
** and dtype (an st_dtype): what the rule reads, from the config's group
** and block sizes. Else one line in st naming the tensor `name`: then the
** loader's table and the runtime disagree (sources generated by another
** gen-model), or the config's sizes are not usable.
*/
int gm_quant_check_part(const gm_quant_config *q, size_t out, size_t in, int part, int rank, const int64_t *shape,
                        int dtype, const char *name, gm_status *st);

/* One projection's parts, where the loader holds them (in the files' mappings, or copied aligned). */
typedef struct gm_quant_parts {
    const void *part[GM_QUANT_MAX_PARTS]; /* by the numbers above, from 0; NULL: an optional part absent */
    gm_src_type scale_type;               /* the scales' dtype (AWQ, GPTQ, FP8) */
    size_t out, in;                       /* the projection's output and input features */
    const char *g_idx_name;               /* GPTQ: g_idx's tensor name, for messages */
} gm_quant_parts;

/*
** Rows [r0, r1) and columns [c0, c1) of the dequantized W in the format's
** natural form (gm_quant_natural_form: rows are inputs for AWQ and GPTQ,
** outputs for FP8 and Q4NX) into dst, row-major, (r1 - r0) rows of c1 - c0;
** for AWQ and GPTQ c0 is a multiple of 8. Checks what only the data can
** show (a g_idx group out of range), as one line in st naming the tensor.
** Safe to call from several threads at once.
*/
int gm_dequant_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                    gm_bf16 *dst, gm_status *st);

/*
** The same in the other form, the natural one's transpose (rows are outputs
** for AWQ and GPTQ, inputs for FP8 and Q4NX): its rows [r0, r1) and columns
** [c0, c1) into dst, row-major, the same bits; for AWQ and GPTQ r0 is a
** multiple of 8. AWQ's straight from its words, eight rows a word column;
** the others' a few natural rows at a time into a buffer, then transposed
** by the kernels (gm_convert_rows).
*/
int gm_dequant_rows_other(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0,
                          size_t c1, gm_bf16 *dst, gm_status *st);

/* An FP8 e4m3 (e4m3fn: bias 7, no infinities, S.1111.111 NaN) byte as f32, exactly. */
float gm_e4m3_to_f32(uint8_t b);

#ifdef __cplusplus
}
#endif

#endif

/*
** The dequantization rules of gm/quant.h, a row of the format's natural form
** at a time. Each row's scales (and zero points) are widened to f32 once per
** group of rows that shares them, then every weight is one integer
** subtraction and one f32 product (or an f32 product and a sum), rounded to
** bf16: the arithmetic the formats' reference dequantizers do, in their order.
** The other form (gm_dequant_rows_other) computes the same values: AWQ's
** straight from its words, the others' through a transpose.
*/
#include "gm/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm/kernels.h"
#include "gm/safetensors.h"

const char *gm_quant_method_name(gm_quant_method m)
{
    switch (m) {
    case GM_QUANT_NONE: return "none";
    case GM_QUANT_AWQ: return "awq";
    case GM_QUANT_GPTQ: return "gptq";
    case GM_QUANT_FP8: return "fp8";
    case GM_QUANT_Q4NX: return "q4nx";
    }
    return "?";
}

gm_quant_config gm_quant_q4nx(void)
{
    return (gm_quant_config){.method = GM_QUANT_Q4NX, .bits = 4, .group_size = GM_Q4NX_GROUP, .block_out = GM_Q4NX_ROWS};
}

gm_wform gm_quant_natural_form(gm_quant_method m)
{
    return m == GM_QUANT_AWQ || m == GM_QUANT_GPTQ ? GM_W_KN : GM_W_NK;
}

int gm_quant_n_parts(gm_quant_method m)
{
    switch (m) {
    case GM_QUANT_AWQ: return 3;
    case GM_QUANT_GPTQ: return 4;
    case GM_QUANT_FP8: return 2;
    case GM_QUANT_Q4NX: return 1;
    default: return 0;
    }
}

int gm_quant_part_optional(gm_quant_method m, int part) { return m == GM_QUANT_GPTQ && part == GM_GPTQ_G_IDX; }

int gm_quant_scale_part(gm_quant_method m)
{
    return m == GM_QUANT_AWQ || m == GM_QUANT_GPTQ ? 3 : m == GM_QUANT_FP8 ? 2 : 0;
}

static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

int gm_quant_check_part(const gm_quant_config *q, size_t out, size_t in, int part, int rank, const int64_t *shape,
                        int dtype, const char *name, gm_status *st)
{
    const char *method = gm_quant_method_name(q->method);
    const size_t g = q->group_size > 0 ? (size_t)q->group_size : 0;
    size_t want[2] = {0, 0};
    int want_rank = 2, ok_dtype = 0;
    const char *sizes = NULL;
    switch (q->method) {
    case GM_QUANT_AWQ:
        if (!g || in % g || out % 8)
            sizes = "group_size must divide its inputs, 8 its outputs";
        want[0] = part == 1 ? in : g ? in / g : 0;
        want[1] = part == 3 ? out : out / 8;
        ok_dtype = part == 3 ? dtype == ST_F16 || dtype == ST_BF16 : dtype == ST_I32;
        break;
    case GM_QUANT_GPTQ: {
        const size_t G = g ? cdiv(in, g) : 1;
        if ((!g && q->group_size != -1) || in % 8 || out % 8)
            sizes = "group_size must be positive or -1, 8 must divide its inputs and its outputs";
        want[0] = part == 1 ? in / 8 : part == 4 ? in : G;
        want[1] = part == 1 || part == 3 ? out : out / 8;
        want_rank = part == 4 ? 1 : 2;
        ok_dtype = part == 3 ? dtype == ST_F16 || dtype == ST_BF16 : dtype == ST_I32;
        break;
    }
    case GM_QUANT_FP8:
        if (!g || q->block_out <= 0)
            sizes = "weight_block_size must be two positive sizes";
        want[0] = part == 1 ? out : q->block_out > 0 ? cdiv(out, (size_t)q->block_out) : 0;
        want[1] = part == 1 ? in : g ? cdiv(in, g) : 0;
        ok_dtype = part == 1 ? dtype == ST_F8_E4M3 : dtype == ST_F32 || dtype == ST_BF16 || dtype == ST_F16;
        break;
    case GM_QUANT_Q4NX:
        want[0] = cdiv(out, GM_Q4NX_ROWS) * cdiv(in, GM_Q4NX_COLS);
        want[1] = GM_Q4NX_BLOCK_BYTES;
        ok_dtype = dtype == ST_I8;
        break;
    default:
        return gm_fail(st, GM_EUNSUPPORTED, "tensor '%s': quantization method '%s' has no rule", name, method);
    }
    if (sizes)
        return gm_fail(st, GM_EFORMAT, "tensor '%s': %s group or block sizes %d, %d do not fit a [%zu, %zu] "
                       "projection (%s)", name, method, q->group_size, q->block_out, out, in, sizes);
    if (part < 1 || part > gm_quant_n_parts(q->method) || rank != want_rank || (size_t)shape[0] != want[0] ||
        (rank == 2 && (size_t)shape[1] != want[1]) || !ok_dtype) {
        char found[64], reads[64];
        if (rank == 2)
            snprintf(found, sizeof found, "[%lld, %lld]", (long long)shape[0], (long long)shape[1]);
        else
            snprintf(found, sizeof found, "[%lld]", rank == 1 ? (long long)shape[0] : -1LL);
        if (want_rank == 2)
            snprintf(reads, sizeof reads, "[%zu, %zu]", want[0], want[1]);
        else
            snprintf(reads, sizeof reads, "[%zu]", want[0]);
        return gm_fail(st, GM_ESHAPE, "tensor '%s': the loader's table gives part %d of a %s projection [%zu, %zu] "
                       "as %s %s, its rule reads %s (regenerate the model's sources)", name, part, method, out, in,
                       st_dtype_name((st_dtype)dtype) ? st_dtype_name((st_dtype)dtype) : "?", found, reads);
    }
    return 0;
}

float gm_e4m3_to_f32(uint8_t b)
{
    const uint32_t e = (b >> 3) & 15u, m = b & 7u, sign = (uint32_t)(b & 0x80) << 24;
    uint32_t u;
    if (e == 15 && m == 7)
        u = sign | 0x7FC00000u; /* NaN */
    else if (e == 0) {
        const float v = (float)m * 0x1p-9f; /* subnormal: m/8 * 2^-6, exact */
        memcpy(&u, &v, 4);
        u |= sign;
    } else
        u = sign | ((e - 7 + 127) << 23) | (m << 20); /* (1 + m/8) * 2^(e-7) */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float scale_at(const void *s, gm_src_type t, size_t i)
{
    if (t == GM_SRC_F32) {
        float f;
        memcpy(&f, (const char *)s + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)s + 2 * i, 2);
    return t == GM_SRC_F16 ? gm_f16_to_f32(h) : gm_bf16_to_f32(h);
}

/* Bits 4i..4i+3 of word j of an AWQ row hold output 8j + AWQ_ORDER[i]: output 8j + c is at shift awq_shift[c]. */
static const unsigned awq_shift[8] = {0, 16, 4, 20, 8, 24, 12, 28};

/*
** The 4-bit rules' arithmetic, d = bf16((q - z) * s), is the kernel tier's
** (gm_dequant4_row along a row, gm_dequant4_block for AWQ's other form):
** vector code where the tier has it, the same bits everywhere.
*/

/* Words along a row, eight 4-bit values each, into q[8j + c] from shift sh[c]. */
static void unpack_words(int32_t *q, const uint32_t *w, size_t W, const unsigned *sh)
{
    for (size_t j = 0; j < W; j++)
        for (unsigned c = 0; c < 8; c++)
            q[8 * j + c] = (int32_t)((w[j] >> sh[c]) & 15u);
}

static const unsigned plain_shift[8] = {0, 4, 8, 12, 16, 20, 24, 28};

/*
** Group g's zero points (plus offset) and scales of one AWQ or GPTQ
** projection, outputs [c0, c1) (c0 a multiple of 8), widened: zf[n - c0], sf[n - c0].
*/
static void widen_group(const gm_quant_parts *p, int awq, size_t g, int32_t offset, size_t c0, size_t c1, int32_t *zf,
                        float *sf)
{
    const size_t N = p->out;
    unpack_words(zf, (const uint32_t *)p->part[1] + g * (N / 8) + c0 / 8, (c1 - c0 + 7) / 8, awq ? awq_shift : plain_shift);
    for (size_t n = c0; n < c1; n++) {
        zf[n - c0] += offset;
        sf[n - c0] = scale_at(p->part[2], p->scale_type, g * N + n);
    }
}

/* AWQ rows k of (in, out), outputs [c0, c1): q from word k's nibbles in AWQ's order. */
static void awq_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                     gm_bf16 *dst, int32_t *zf, float *sf)
{
    const size_t W = p->out / 8, g = (size_t)q->group_size;
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        if (k / g != cur)
            widen_group(p, 1, cur = k / g, 0, c0, c1, zf, sf);
        gm_dequant4_row(dst + (k - r0) * (c1 - c0), (const uint32_t *)p->part[0] + k * W + c0 / 8, awq_shift, 0, zf, sf,
                        c1 - c0);
    }
}

/*
** GPTQ rows k of (in, out), outputs [c0, c1): q from row k/8's words,
** nibble k%8; the group from g_idx when the file has one.
*/
static int gptq_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                     gm_bf16 *dst, int32_t *zf, float *sf, gm_status *st)
{
    const size_t N = p->out, K = p->in;
    const size_t gs = q->group_size > 0 ? (size_t)q->group_size : K, G = (K + gs - 1) / gs;
    const int32_t *g_idx = p->part[3];
    const int32_t offset = q->gptq_v2 ? 0 : 1;
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        const int32_t gi = g_idx ? g_idx[k] : (int32_t)(k / gs);
        if (gi < 0 || (size_t)gi >= G)
            return gm_fail(st, GM_EFORMAT, "tensor '%s': input %zu is in group %d, expected 0 to %zu",
                           p->g_idx_name ? p->g_idx_name : "g_idx", k, (int)gi, G - 1);
        if ((size_t)gi != cur)
            widen_group(p, 0, cur = (size_t)gi, offset, c0, c1, zf, sf);
        gm_dequant4_row(dst + (k - r0) * (c1 - c0), (const uint32_t *)p->part[0] + (k / 8) * N + c0, NULL,
                        4u * (unsigned)(k % 8), zf, sf, c1 - c0);
    }
    return 0;
}

/* FP8 rows n of (out, in), inputs [c0, c1): each byte through the e4m3 table, times its block's scale. */
static void fp8_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                     gm_bf16 *dst, float *sf)
{
    const size_t K = p->in, bo = (size_t)q->block_out, bi = (size_t)q->group_size, SB = (K + bi - 1) / bi;
    float lut[256];
    for (int b = 0; b < 256; b++)
        lut[b] = gm_e4m3_to_f32((uint8_t)b);
    for (size_t n = r0; n < r1; n++) {
        for (size_t j = c0 / bi; j <= (c1 - 1) / bi; j++)
            sf[j] = scale_at(p->part[1], p->scale_type, (n / bo) * SB + j);
        const uint8_t *w = (const uint8_t *)p->part[0] + n * K;
        gm_bf16 *d = dst + (n - r0) * (c1 - c0);
        for (size_t k = c0; k < c1; k++)
            d[k - c0] = gm_f32_to_bf16(lut[w[k]] * sf[k / bi]);
    }
}

/* Q4NX rows n of (out, in), inputs [c0, c1): row n % 32 of each block of its row of blocks. */
static void q4nx_rows(const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1, gm_bf16 *dst)
{
    const size_t K = p->in, NBC = (K + GM_Q4NX_COLS - 1) / GM_Q4NX_COLS, NG = GM_Q4NX_COLS / GM_Q4NX_GROUP;
    for (size_t n = r0; n < r1; n++) {
        const size_t r = n % GM_Q4NX_ROWS, h = r / 16, b = (r % 16) / 2, hi = r & 1;
        gm_bf16 *d = dst + (n - r0) * (c1 - c0);
        for (size_t bc = c0 / GM_Q4NX_COLS; bc * GM_Q4NX_COLS < c1; bc++) {
            const uint8_t *blk = (const uint8_t *)p->part[0] + ((n / GM_Q4NX_ROWS) * NBC + bc) * GM_Q4NX_BLOCK_BYTES;
            const uint8_t *qs = blk + 1024 + h * GM_Q4NX_COLS * 8 + b;
            float s[GM_Q4NX_COLS / GM_Q4NX_GROUP], m[GM_Q4NX_COLS / GM_Q4NX_GROUP];
            for (size_t g = 0; g < NG; g++) {
                s[g] = scale_at(blk, GM_SRC_BF16, g * GM_Q4NX_ROWS + r);
                m[g] = scale_at(blk + 512, GM_SRC_BF16, g * GM_Q4NX_ROWS + r);
            }
            const size_t k0 = bc * GM_Q4NX_COLS;
            const size_t from = c0 > k0 ? c0 - k0 : 0, to = c1 - k0 < GM_Q4NX_COLS ? c1 - k0 : GM_Q4NX_COLS;
            for (size_t c = from; c < to; c++) {
                const unsigned byte = qs[c * 8];
                const float qv = (float)(hi ? byte >> 4 : byte & 15u);
                d[k0 + c - c0] = gm_f32_to_bf16(s[c / GM_Q4NX_GROUP] * qv + m[c / GM_Q4NX_GROUP]);
            }
        }
    }
}

int gm_dequant_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                    gm_bf16 *dst, gm_status *st)
{
    if (c1 <= c0 || r1 <= r0)
        return 0;
    if (q->method == GM_QUANT_Q4NX) {
        q4nx_rows(p, r0, r1, c0, c1, dst);
        return 0;
    }
    /* the scales (FP8: a row's blocks, by their index), and the zero points beside them: 4 bytes each */
    const size_t width = q->method == GM_QUANT_FP8 ? p->in : 2 * (c1 - c0 + 8);
    float *buf = malloc((width ? width : 1) * 4);
    if (!buf)
        return gm_fail(st, GM_ENOMEM, "dequantizing: out of memory");
    int32_t *zf = (int32_t *)(void *)(buf + (c1 - c0 + 8));
    int rc = 0;
    if (q->method == GM_QUANT_AWQ)
        awq_rows(q, p, r0, r1, c0, c1, dst, zf, buf);
    else if (q->method == GM_QUANT_GPTQ)
        rc = gptq_rows(q, p, r0, r1, c0, c1, dst, zf, buf, st);
    else if (q->method == GM_QUANT_FP8)
        fp8_rows(q, p, r0, r1, c0, c1, dst, buf);
    else
        rc = gm_fail(st, GM_EUNSUPPORTED, "dequantizing: quantization method '%s' has no rule",
                     gm_quant_method_name(q->method));
    free(buf);
    return rc;
}

/*
** AWQ's (out, in) straight from its words: outputs [r0, r1) (r0 a multiple
** of 8), inputs [c0, c1). Word (k, j) holds input k of the eight outputs 8j
** and on. A group's zero points and scales are widened once; then blocks
** of 32 inputs by 64 outputs, every block of 32 inputs across the outputs
** before the next: the words a block reads are 32 rows of 32 bytes, and
** its 32 rows of words are read along, in cache, by the blocks beside it.
*/
static int awq_other(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0, size_t c1,
                     gm_bf16 *dst, gm_status *st)
{
    enum { INPUTS = 32, OUTPUTS = 64 };
    const size_t N = p->out, W = N / 8, g = (size_t)q->group_size, ld = c1 - c0;
    float *sf = malloc(2 * (r1 - r0 + 8) * 4);
    if (!sf)
        return gm_fail(st, GM_ENOMEM, "dequantizing: out of memory");
    int32_t *zf = (int32_t *)(void *)(sf + (r1 - r0 + 8));
    for (size_t k0 = c0; k0 < c1;) {
        const size_t G = k0 / g, end = (G + 1) * g < c1 ? (G + 1) * g : c1;
        widen_group(p, 1, G, 0, r0, r1, zf, sf);
        for (size_t k = k0; k < end; k += INPUTS) {
            const size_t I = end - k < INPUTS ? end - k : INPUTS;
            for (size_t n = r0; n < r1; n += OUTPUTS) {
                const size_t R = r1 - n < OUTPUTS ? r1 - n : OUTPUTS;
                gm_dequant4_block(dst + (n - r0) * ld + (k - c0), ld, (const uint32_t *)p->part[0] + k * W + n / 8, W,
                                  awq_shift, zf + (n - r0), sf + (n - r0), R, I);
            }
        }
        k0 = end;
    }
    gm_stream_fence();
    free(sf);
    return 0;
}

/* The others: a few of the rule's rows at a time into a buffer (in cache), then through the kernels' transposes. */
static int other_by_transpose(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0,
                              size_t c1, gm_bf16 *dst, gm_status *st)
{
    enum { ROWS = 32 }; /* a cache line of each row of dst */
    const size_t w = r1 - r0, h = c1 - c0;
    gm_bf16 *buf = malloc(ROWS * w * sizeof *buf);
    if (!buf)
        return gm_fail(st, GM_ENOMEM, "dequantizing: out of memory");
    int rc = 0;
    for (size_t k = c0; k < c1 && !rc; k += ROWS) {
        const size_t n = c1 - k < ROWS ? c1 - k : ROWS;
        rc = gm_dequant_rows(q, p, k, k + n, r0, r1, buf, st);
        if (!rc)
            gm_convert_rows(dst, buf, GM_SRC_BF16, h, w, k - c0, k - c0 + n, 1);
    }
    free(buf);
    return rc;
}

int gm_dequant_rows_other(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, size_t c0,
                          size_t c1, gm_bf16 *dst, gm_status *st)
{
    if (c1 <= c0 || r1 <= r0)
        return 0;
    if (q->method == GM_QUANT_AWQ)
        return awq_other(q, p, r0, r1, c0, c1, dst, st);
    return other_by_transpose(q, p, r0, r1, c0, c1, dst, st);
}

/*
** The dequantization rules of gm/quant.h, a row of the format's natural form
** at a time. Each row's scales (and zero points) are widened to f32 once per
** group of rows that shares them, then every weight is one integer
** subtraction and one f32 product (or an f32 product and a sum), rounded to
** bf16: the arithmetic the formats' reference dequantizers do, in their order.
*/
#include "gm/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Group g's scales and zero points of one AWQ or GPTQ projection, widened: zf[n] (plus offset), sf[n]. */
static void widen_group(const gm_quant_parts *p, int awq, size_t g, float offset, float *zf, float *sf)
{
    const size_t N = p->out, W = N / 8;
    const uint32_t *zrow = (const uint32_t *)p->part[1] + g * W;
    for (size_t j = 0; j < W; j++) {
        const uint32_t z = zrow[j];
        for (unsigned c = 0; c < 8; c++)
            zf[8 * j + c] = (float)((z >> (awq ? awq_shift[c] : 4 * c)) & 15u) + offset;
    }
    for (size_t n = 0; n < N; n++)
        sf[n] = scale_at(p->part[2], p->scale_type, g * N + n);
}

/* AWQ rows k of (in, out): q from word k's nibbles in AWQ's order. */
static void awq_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, gm_bf16 *dst, float *zf,
                     float *sf)
{
    const size_t N = p->out, W = N / 8, g = (size_t)q->group_size;
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        if (k / g != cur)
            widen_group(p, 1, cur = k / g, 0.0f, zf, sf);
        const uint32_t *row = (const uint32_t *)p->part[0] + k * W;
        gm_bf16 *d = dst + (k - r0) * N;
        for (size_t j = 0; j < W; j++) {
            const uint32_t w = row[j];
            for (unsigned c = 0; c < 8; c++) {
                const size_t n = 8 * j + c;
                d[n] = gm_f32_to_bf16(((float)((w >> awq_shift[c]) & 15u) - zf[n]) * sf[n]);
            }
        }
    }
}

/* GPTQ rows k of (in, out): q from row k/8's words, nibble k%8; the group from g_idx when the file has one. */
static int gptq_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, gm_bf16 *dst, float *zf,
                     float *sf, gm_status *st)
{
    const size_t N = p->out, K = p->in;
    const size_t gs = q->group_size > 0 ? (size_t)q->group_size : K, G = (K + gs - 1) / gs;
    const int32_t *g_idx = p->part[3];
    const float offset = q->gptq_v2 ? 0.0f : 1.0f;
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        const int32_t gi = g_idx ? g_idx[k] : (int32_t)(k / gs);
        if (gi < 0 || (size_t)gi >= G)
            return gm_fail(st, GM_EFORMAT, "tensor '%s': input %zu is in group %d, expected 0 to %zu",
                           p->g_idx_name ? p->g_idx_name : "g_idx", k, (int)gi, G - 1);
        if ((size_t)gi != cur)
            widen_group(p, 0, cur = (size_t)gi, offset, zf, sf);
        const uint32_t *row = (const uint32_t *)p->part[0] + (k / 8) * N;
        const unsigned shift = 4u * (unsigned)(k % 8);
        gm_bf16 *d = dst + (k - r0) * N;
        for (size_t n = 0; n < N; n++)
            d[n] = gm_f32_to_bf16(((float)((row[n] >> shift) & 15u) - zf[n]) * sf[n]);
    }
    return 0;
}

/* FP8 rows n of (out, in): each byte through the e4m3 table, times its block's scale. */
static void fp8_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, gm_bf16 *dst, float *sf)
{
    const size_t K = p->in, bo = (size_t)q->block_out, bi = (size_t)q->group_size, SB = (K + bi - 1) / bi;
    float lut[256];
    for (int b = 0; b < 256; b++)
        lut[b] = gm_e4m3_to_f32((uint8_t)b);
    for (size_t n = r0; n < r1; n++) {
        for (size_t j = 0; j < SB; j++)
            sf[j] = scale_at(p->part[1], p->scale_type, (n / bo) * SB + j);
        const uint8_t *w = (const uint8_t *)p->part[0] + n * K;
        gm_bf16 *d = dst + (n - r0) * K;
        for (size_t k = 0; k < K; k++)
            d[k] = gm_f32_to_bf16(lut[w[k]] * sf[k / bi]);
    }
}

/* Q4NX rows n of (out, in): row n % 32 of each block of its row of blocks. */
static void q4nx_rows(const gm_quant_parts *p, size_t r0, size_t r1, gm_bf16 *dst)
{
    const size_t K = p->in, NBC = (K + GM_Q4NX_COLS - 1) / GM_Q4NX_COLS, NG = GM_Q4NX_COLS / GM_Q4NX_GROUP;
    for (size_t n = r0; n < r1; n++) {
        const size_t r = n % GM_Q4NX_ROWS, h = r / 16, b = (r % 16) / 2, hi = r & 1;
        gm_bf16 *d = dst + (n - r0) * K;
        for (size_t bc = 0; bc < NBC; bc++) {
            const uint8_t *blk = (const uint8_t *)p->part[0] + ((n / GM_Q4NX_ROWS) * NBC + bc) * GM_Q4NX_BLOCK_BYTES;
            const uint8_t *qs = blk + 1024 + h * GM_Q4NX_COLS * 8 + b;
            float s[GM_Q4NX_COLS / GM_Q4NX_GROUP], m[GM_Q4NX_COLS / GM_Q4NX_GROUP];
            for (size_t g = 0; g < NG; g++) {
                s[g] = scale_at(blk, GM_SRC_BF16, g * GM_Q4NX_ROWS + r);
                m[g] = scale_at(blk + 512, GM_SRC_BF16, g * GM_Q4NX_ROWS + r);
            }
            const size_t k0 = bc * GM_Q4NX_COLS, nc = K - k0 < GM_Q4NX_COLS ? K - k0 : GM_Q4NX_COLS;
            for (size_t c = 0; c < nc; c++) {
                const unsigned byte = qs[c * 8];
                const float qv = (float)(hi ? byte >> 4 : byte & 15u);
                d[k0 + c] = gm_f32_to_bf16(s[c / GM_Q4NX_GROUP] * qv + m[c / GM_Q4NX_GROUP]);
            }
        }
    }
}

int gm_dequant_rows(const gm_quant_config *q, const gm_quant_parts *p, size_t r0, size_t r1, gm_bf16 *dst,
                    gm_status *st)
{
    if (q->method == GM_QUANT_Q4NX) {
        q4nx_rows(p, r0, r1, dst);
        return 0;
    }
    const size_t width = q->method == GM_QUANT_FP8 ? p->in : 2 * p->out;
    float *buf = malloc((width ? width : 1) * sizeof *buf);
    if (!buf)
        return gm_fail(st, GM_ENOMEM, "dequantizing: out of memory");
    int rc = 0;
    if (q->method == GM_QUANT_AWQ)
        awq_rows(q, p, r0, r1, dst, buf, buf + p->out);
    else if (q->method == GM_QUANT_GPTQ)
        rc = gptq_rows(q, p, r0, r1, dst, buf, buf + p->out, st);
    else if (q->method == GM_QUANT_FP8)
        fp8_rows(q, p, r0, r1, dst, buf);
    else
        rc = gm_fail(st, GM_EUNSUPPORTED, "dequantizing: quantization method '%s' has no rule",
                     gm_quant_method_name(q->method));
    free(buf);
    return rc;
}

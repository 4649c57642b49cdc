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

/* bf16 of f32 bits u, to nearest even, every NaN 0x7FC0: gm_f32_to_bf16 without its branch. */
static inline uint16_t bf16_bits(uint32_t u)
{
    const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : (uint16_t)r;
}

/*
** A row of a 4-bit rule: d[n] = bf16((q[n] - z[n]) * s[n]) for n < N, q[n]
** the 4 bits at shift sh[n % 8] of word w[n / 8] (AWQ: eight values a word
** along the row) or, when sh is NULL, at shift `shift` of word w[n] (GPTQ:
** one value of each word). On x86-64 with AVX2 eight outputs at a time,
** the same arithmetic lane by lane; else, or on the portable kernel tier,
** one at a time.
*/
typedef void row_fn(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                    const float *s, size_t N);

static void row_plain(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                      const float *s, size_t N)
{
    for (size_t n = 0; n < N; n++) {
        const uint32_t q = sh ? (w[n / 8] >> sh[n % 8]) & 15u : (w[n] >> shift) & 15u;
        const float f = (float)((int32_t)q - z[n]) * s[n];
        uint32_t u;
        memcpy(&u, &f, 4);
        d[n] = bf16_bits(u);
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "gm/cpu.h"

/* Eight f32 to bf16 (nearest even, NaN 0x7FC0), each in the low half of its lane. */
__attribute__((target("avx2"))) static inline __m256i round8_bf16(__m256 f)
{
    const __m256i u = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
}

/* Eight f32 to bf16, stored at d. */
__attribute__((target("avx2"))) static inline void store8_bf16(gm_bf16 *d, __m256 f)
{
    const __m256i r = round8_bf16(f);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08); /* lanes 0 and 2: the 8 values */
    _mm_storeu_si128((__m128i *)(void *)d, _mm256_castsi256_si128(packed));
}

/* Sixteen f32 to bf16, a then b, in order. */
__attribute__((target("avx2"))) static inline __m256i bf16x16(__m256 a, __m256 b)
{
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(round8_bf16(a), round8_bf16(b)), 0xD8);
}

__attribute__((target("avx2"))) static void row_avx2(gm_bf16 *d, const uint32_t *w, const unsigned *sh,
                                                      unsigned shift, const int32_t *z, const float *s, size_t N)
{
    const __m256i mask = _mm256_set1_epi32(15);
    size_t n = 0;
    if (sh) {
        const __m256i shifts = _mm256_setr_epi32((int)sh[0], (int)sh[1], (int)sh[2], (int)sh[3], (int)sh[4],
                                                 (int)sh[5], (int)sh[6], (int)sh[7]);
        for (; n + 8 <= N; n += 8) {
            const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w[n / 8]), shifts), mask);
            const __m256i qz = _mm256_sub_epi32(q, _mm256_loadu_si256((const __m256i *)(const void *)(z + n)));
            store8_bf16(d + n, _mm256_mul_ps(_mm256_cvtepi32_ps(qz), _mm256_loadu_ps(s + n)));
        }
    } else {
        const __m128i count = _mm_cvtsi32_si128((int)shift);
        for (; n + 8 <= N; n += 8) {
            const __m256i words = _mm256_loadu_si256((const __m256i *)(const void *)(w + n));
            const __m256i q = _mm256_and_si256(_mm256_srl_epi32(words, count), mask);
            const __m256i qz = _mm256_sub_epi32(q, _mm256_loadu_si256((const __m256i *)(const void *)(z + n)));
            store8_bf16(d + n, _mm256_mul_ps(_mm256_cvtepi32_ps(qz), _mm256_loadu_ps(s + n)));
        }
    }
    if (n < N) /* a row not a multiple of 8 (GPTQ's outputs always are; this is for a hand-made table) */
        row_plain(d + n, sh ? w + n / 8 : w + n, sh, shift, z + n, s + n, N - n);
}

/*
** AWQ in the other form, a block of it: rows r < R (outputs, from a whole
** word column), inputs i < I of one group; word (i, r / 8) at w[i * W + r / 8],
** its nibble at awq_shift[r % 8] output r's; d[r][i] = bf16((q - z[r]) * s[r]).
*/
typedef void block_fn(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const int32_t *z, const float *s, size_t R,
                      size_t I);

static void block_plain(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const int32_t *z, const float *s, size_t R,
                        size_t I)
{
    for (size_t r = 0; r < R; r++)
        for (size_t i = 0; i < I; i++) {
            const float f = (float)((int32_t)((w[i * W + r / 8] >> awq_shift[r % 8]) & 15u) - z[r]) * s[r];
            uint32_t u;
            memcpy(&u, &f, 4);
            d[r * ld + i] = bf16_bits(u);
        }
}

/* Rows [0, 8) of src (each 8 words, ls apart) as columns: o[j] holds word j of each row. */
__attribute__((target("avx2"))) static inline void transpose8x8_words(__m256i o[8], const uint32_t *src, size_t ls)
{
    __m256i a[8], b[8], c[8];
    for (int r = 0; r < 8; r++)
        a[r] = _mm256_loadu_si256((const __m256i *)(const void *)(src + r * ls));
    for (int r = 0; r < 8; r += 2) /* pairs of rows, words 0 1 | 4 5 and 2 3 | 6 7 */
        b[r] = _mm256_unpacklo_epi32(a[r], a[r + 1]), b[r + 1] = _mm256_unpackhi_epi32(a[r], a[r + 1]);
    for (int h = 0; h < 2; h++) /* four rows, words 0 | 4, 1 | 5, 2 | 6, 3 | 7 */
        for (int j = 0; j < 2; j++) {
            c[4 * h + 2 * j] = _mm256_unpacklo_epi64(b[4 * h + j], b[4 * h + j + 2]);
            c[4 * h + 2 * j + 1] = _mm256_unpackhi_epi64(b[4 * h + j], b[4 * h + j + 2]);
        }
    for (int j = 0; j < 4; j++)
        o[j] = _mm256_permute2x128_si256(c[j], c[4 + j], 0x20),
        o[j + 4] = _mm256_permute2x128_si256(c[j], c[4 + j], 0x31);
}

/*
** 32 inputs of up to 64 rows: the words of 32 rows of eight word columns
** read along the rows and transposed in registers, eight inputs a vector;
** each row's 32 values one cache line, streamed past the cache where it is
** aligned (no read of the line it replaces). Other blocks one value at a time.
*/
__attribute__((target("avx2"))) static void block_avx2(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W,
                                                        const int32_t *z, const float *s, size_t R, size_t I)
{
    if (I != 32 || R % 8 || R > 64) {
        block_plain(d, ld, w, W, z, s, R, I);
        return;
    }
    const __m256i mask = _mm256_set1_epi32(15);
    const int aligned = (((uintptr_t)d | ld * 2) % 32) == 0;
    __m256i words[4][8];
    for (int v = 0; v < 4; v++) /* inputs 8v..8v+7 */
        transpose8x8_words(words[v], w + 8 * v * W, W);
    for (size_t r = 0; r < R; r++) {
        const __m256i zr = _mm256_set1_epi32(z[r]);
        const __m256 sr = _mm256_set1_ps(s[r]);
        __m256 f[4];
        for (int v = 0; v < 4; v++)
            f[v] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(
                       _mm256_and_si256(_mm256_srli_epi32(words[v][r / 8], (int)awq_shift[r % 8]), mask), zr)), sr);
        const __m256i lo = bf16x16(f[0], f[1]), hi = bf16x16(f[2], f[3]);
        __m256i *o = (__m256i *)(void *)(d + r * ld);
        if (aligned)
            _mm256_stream_si256(o, lo), _mm256_stream_si256(o + 1, hi);
        else
            _mm256_storeu_si256(o, lo), _mm256_storeu_si256(o + 1, hi);
    }
}

/* Sixteen f32 to bf16 (nearest even, NaN 0x7FC0), in order: round8_bf16 at 16 lanes. */
__attribute__((target("avx512f,avx512bw"))) static inline __m256i bf16x16_512(__m512 f)
{
    const __m512i u = _mm512_castps_si512(f);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, _mm512_set1_epi32(0x7FC0)));
}

/* block_avx2 with each row's 32 values in two 16-lane vectors: the same words, arithmetic and bits */
__attribute__((target("avx2,avx512f,avx512bw"))) static void block_avx512(gm_bf16 *d, size_t ld, const uint32_t *w,
                                                                           size_t W, const int32_t *z, const float *s,
                                                                           size_t R, size_t I)
{
    if (I != 32 || R % 8 || R > 64) {
        block_plain(d, ld, w, W, z, s, R, I);
        return;
    }
    const __m512i mask = _mm512_set1_epi32(15);
    const int aligned = (((uintptr_t)d | ld * 2) % 64) == 0;
    __m256i words[4][8];
    __m512i wide[2][8];
    for (int v = 0; v < 4; v++) /* inputs 8v..8v+7 */
        transpose8x8_words(words[v], w + 8 * v * W, W);
    for (int h = 0; h < 2; h++) /* inputs 16h..16h+15 */
        for (int j = 0; j < 8; j++)
            wide[h][j] = _mm512_inserti64x4(_mm512_castsi256_si512(words[2 * h][j]), words[2 * h + 1][j], 1);
    for (size_t r = 0; r < R; r++) {
        const __m512i zr = _mm512_set1_epi32(z[r]);
        const __m512 sr = _mm512_set1_ps(s[r]);
        __m256i b[2];
        for (int h = 0; h < 2; h++)
            b[h] = bf16x16_512(_mm512_mul_ps(
                _mm512_cvtepi32_ps(_mm512_sub_epi32(
                    _mm512_and_si512(_mm512_srli_epi32(wide[h][r / 8], awq_shift[r % 8]), mask), zr)),
                sr));
        const __m512i row = _mm512_inserti64x4(_mm512_castsi256_si512(b[0]), b[1], 1);
        if (aligned)
            _mm512_stream_si512((void *)(d + r * ld), row);
        else
            _mm512_storeu_si512((void *)(d + r * ld), row);
    }
}

static int vector_code(void) { return gm_cpu_features() & GM_CPU_AVX2 && strcmp(gm_kernels_name(), "portable") != 0; }

/* AVX2 where the CPU has it, unless the portable kernel tier runs (GM_ISA=portable: no vector code anywhere). */
static row_fn *row_4bit(void) { return vector_code() ? row_avx2 : row_plain; }
static block_fn *block_4bit(void)
{
    if (!vector_code())
        return block_plain;
    /* 16 lanes where the CPU has them and the running kernel tier is allowed them (not GM_ISA=avx2) */
    return gm_cpu_features() & GM_CPU_AVX512 && strcmp(gm_kernels_name(), "avx2") != 0 ? block_avx512 : block_avx2;
}
static void fence(void)
{
    if (vector_code())
        _mm_sfence(); /* the streamed stores, ordered before what follows */
}
#else
static row_fn *row_4bit(void) { return row_plain; }
static block_fn *block_4bit(void) { return block_plain; }
static void fence(void) {}
#endif

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
    row_fn *row = row_4bit();
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        if (k / g != cur)
            widen_group(p, 1, cur = k / g, 0, c0, c1, zf, sf);
        row(dst + (k - r0) * (c1 - c0), (const uint32_t *)p->part[0] + k * W + c0 / 8, awq_shift, 0, zf, sf, c1 - c0);
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
    row_fn *row = row_4bit();
    size_t cur = SIZE_MAX;
    for (size_t k = r0; k < r1; k++) {
        const int32_t gi = g_idx ? g_idx[k] : (int32_t)(k / gs);
        if (gi < 0 || (size_t)gi >= G)
            return gm_fail(st, GM_EFORMAT, "tensor '%s': input %zu is in group %d, expected 0 to %zu",
                           p->g_idx_name ? p->g_idx_name : "g_idx", k, (int)gi, G - 1);
        if ((size_t)gi != cur)
            widen_group(p, 0, cur = (size_t)gi, offset, c0, c1, zf, sf);
        row(dst + (k - r0) * (c1 - c0), (const uint32_t *)p->part[0] + (k / 8) * N + c0, NULL, 4u * (unsigned)(k % 8),
            zf, sf, c1 - c0);
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
    block_fn *block = block_4bit();
    for (size_t k0 = c0; k0 < c1;) {
        const size_t G = k0 / g, end = (G + 1) * g < c1 ? (G + 1) * g : c1;
        widen_group(p, 1, G, 0, r0, r1, zf, sf);
        for (size_t k = k0; k < end; k += INPUTS) {
            const size_t I = end - k < INPUTS ? end - k : INPUTS;
            for (size_t n = r0; n < r1; n += OUTPUTS) {
                const size_t R = r1 - n < OUTPUTS ? r1 - n : OUTPUTS;
                /* the vector code reads 8 word columns: at the row's end fewer may be left */
                const uint32_t *w = (const uint32_t *)p->part[0] + k * W + n / 8;
                (n / 8 + 8 <= W ? block : block_plain)(dst + (n - r0) * ld + (k - c0), ld, w, W, zf + (n - r0),
                                                       sf + (n - r0), R, I);
            }
        }
        k0 = end;
    }
    fence();
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

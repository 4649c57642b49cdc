/*
** The AVX2 + FMA tier: compiled for those instructions, and only called
** when the CPU has both (dispatch.c asks gm_cpu_features). Its products,
** attention's products and element-wise steps are vec_kernels.h and
** vec_steps.h at 8 lanes (v8.h), the source the AVX-512 tier runs at 16,
** on W in panels of 16 columns, its form (GM_W_PANEL16); the load-time
** transposes, into (in, out) or into panels, and conversions are its own.
*/
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gm/cpu.h"
#include "kernels_impl.h"

#define GM_VF_LANES 8
#define GM_PANEL_FETCH 0 /* decode leaves W's runs to the hardware prefetcher (gemv_panels) */
/*
** k-blocks of 768 rows for prompts of 1024 tokens and more (band): on a Zen
** 3, one layer's gate/up and down at 2048 rows took 0.78-0.89x the time of
** blocks of 256 on 1 thread and 0.84-0.91x on 2, at 1024 rows 0.88-0.96x,
** pair by pair; at 32 to 768 rows the two were equal within 4%.
*/
#define GM_LONG_KB 768
#define TIER(x) x##_avx2
#include "vf.h"
#include "vec_kernels.h"
#include "vec_steps.h"

/* attention's products, for the wider tiers that name them (kernels_impl.h) */
void gm_attn_scores_avx2(float *S, long lds, const float *Q, long ldq, int nq, const float *K, long ldk, int nk, int d)
{
    attn_scores_avx2(S, lds, Q, ldq, nq, K, ldk, nk, d);
}

void gm_attn_values_avx2(float *O, long ldo, const float *P, long ldp, int nq, const float *V, long ldv, int nk, int d,
                         int accumulate)
{
    attn_values_avx2(O, ldo, P, ldp, nq, V, ldv, nk, d, accumulate);
}

/* ---------------------------------------------------------------------- */
/* load time: transposes */

/*
** The transposes below read 16 rows at a time, row i sharing a register
** with row i + 8 (i in the low half, i + 8 in the high), so that the three
** rounds of unpacks, which work within halves, transpose both groups of 8
** rows at once and nothing crosses halves. Straight-line code: the loads,
** unpacks and results stay in registers (a version over arrays and loops
** went through the stack, at a third of the speed).
*/
#define ROWS2(i)                                                                                                   \
    _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(src + (i) * ls))), \
                            _mm_loadu_si128((const __m128i *)(const void *)(src + ((i) + 8) * ls)), 1)

/* The last two rounds: from rows (0, 1), (2, 3), (4, 5), (6, 7) of four columns interleaved, those columns, 16 rows each. */
static inline __attribute__((always_inline)) void fours(__m256i o[4], __m256i p01, __m256i p23, __m256i p45,
                                                        __m256i p67)
{
    const __m256i q0 = _mm256_unpacklo_epi32(p01, p23), q1 = _mm256_unpackhi_epi32(p01, p23); /* rows 0-3 */
    const __m256i q2 = _mm256_unpacklo_epi32(p45, p67), q3 = _mm256_unpackhi_epi32(p45, p67); /* rows 4-7 */
    o[0] = _mm256_unpacklo_epi64(q0, q2), o[1] = _mm256_unpackhi_epi64(q0, q2);
    o[2] = _mm256_unpacklo_epi64(q1, q3), o[3] = _mm256_unpackhi_epi64(q1, q3);
}

/* The first round: rows a and b interleaved, of columns 0-3 (hi 0) or 4-7 (hi 1) */
static inline __attribute__((always_inline)) __m256i pair16(__m256i a, __m256i b, int hi)
{
    return hi ? _mm256_unpackhi_epi16(a, b) : _mm256_unpacklo_epi16(a, b);
}

/* Columns [0, 4) (hi 0) or [4, 8) (hi 1) of 16 rows of src (stride ls): o[j] = column j (+ 4), rows 0-15 in order. */
static inline __attribute__((always_inline)) void columns4(__m256i o[4], const gm_bf16 *src, size_t ls, int hi)
{
    const __m256i a0 = ROWS2(0), a1 = ROWS2(1), a2 = ROWS2(2), a3 = ROWS2(3);
    const __m256i a4 = ROWS2(4), a5 = ROWS2(5), a6 = ROWS2(6), a7 = ROWS2(7);
    fours(o, pair16(a0, a1, hi), pair16(a2, a3, hi), pair16(a4, a5, hi), pair16(a6, a7, hi));
}

/* Columns [0, 8) of 16 rows of src: o[j] = column j, rows 0-15 in order (the compiler loads the rows once). */
static inline __attribute__((always_inline)) void columns8(__m256i o[8], const gm_bf16 *src, size_t ls)
{
    columns4(o, src, ls, 0);
    columns4(o + 4, src, ls, 1);
}
#undef ROWS2

/* v to d: streamed past the cache when `stream` (d 32-byte aligned), else stored. */
static inline __attribute__((always_inline)) void put32(gm_bf16 *d, __m256i v, int stream)
{
    if (stream)
        _mm256_stream_si256((__m256i *)(void *)d, v);
    else
        _mm256_storeu_si256((__m256i *)(void *)d, v);
}

/*
** 32 rows x 16 columns of src into 16 destination runs of 32 values (64
** bytes each, one cache line when aligned), streamed past the cache then:
** four columns at a time, rows 0-15 and 16-31 of each, so that each line
** is written whole, its two halves one after the other (a line's halves
** far apart made the streamed writes of the (in, out) form 2.5-3x slower).
*/
static void transpose32x16(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    for (int i = 0; i < 32; i++) /* these rows 128 columns on: the source is read in 32-byte steps across rows */
        _mm_prefetch((const char *)(src + i * ls + 128), _MM_HINT_T0);
    const int stream = (((uintptr_t)dst | ld * 2) % 32) == 0;
#pragma GCC unroll 4
    for (int c = 0; c < 16; c += 4) {
        __m256i top[4], bottom[4];
        columns4(top, src + c / 8 * 8, ls, c % 8 != 0);
        columns4(bottom, src + 16 * ls + c / 8 * 8, ls, c % 8 != 0);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            put32(dst + (c + j) * ld, top[j], stream), put32(dst + (c + j) * ld + 16, bottom[j], stream);
    }
}

/* 16 rows x 16 columns of src into 16 destination runs of 16 values (32 bytes), streamed when aligned. */
static void transpose16x16(gm_bf16 *dst, size_t ld, const gm_bf16 *src, size_t ls)
{
    for (int i = 0; i < 16; i++)
        _mm_prefetch((const char *)(src + i * ls + 128), _MM_HINT_T0);
    const int stream = (((uintptr_t)dst | ld * 2) % 32) == 0;
#pragma GCC unroll 2
    for (int h = 0; h < 16; h += 8) {
        __m256i o[8];
        columns8(o, src + h, ls);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            put32(dst + (h + j) * ld, o[j], stream);
    }
}

/*
** The 32 x 16 tiles of a block; the rows past the last 32 and the columns
** past the last 16 go to the portable transpose.
*/
static void transpose_avx2(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0)
{
    const size_t n32 = n / 32 * 32, c16 = n32 ? cols / 16 * 16 : 0;
    for (size_t c = 0; c < c16; c += 16)
        for (size_t r = 0; r < n32; r += 32)
            transpose32x16(dst + c * rows + r0 + r, rows, blk + r * cols + c, cols);
    _mm_sfence();
    gm_transpose_part_portable(dst, blk + n32 * cols, n - n32, rows, cols, r0 + n32, 0, c16);
    gm_transpose_part_portable(dst, blk, n, rows, cols, r0, c16, cols);
}

/*
** Into panels (gm_tier.panels): each whole panel of 32 or 16 rows of the
** block is its columns 16 at a time, transposed in registers (32 x 16 or
** 16 x 16) into 16 rows of the panel, which lie one after another: the
** panel is written front to back, in streamed lines. Other panels, and
** the columns past the last 16, go to the portable transpose.
*/
static void panels_avx2(gm_bf16 *dst, const gm_bf16 *blk, size_t n, size_t rows, size_t cols, size_t r0, int P)
{
    for (size_t r = 0; r < n;) {
        const size_t p0 = (r0 + r) / (size_t)P * (size_t)P, w = rows - p0 < (size_t)P ? rows - p0 : (size_t)P;
        const size_t q = r0 + r - p0, m = w - q < n - r ? w - q : n - r; /* rows q.. of this panel, m of them */
        gm_bf16 *d = dst + p0 * cols;
        const gm_bf16 *s = blk + r * cols;
        size_t c16 = 0;
        if (q == 0 && m == w && (w == 32 || w == 16)) {
            c16 = cols / 16 * 16;
            for (size_t c = 0; c < c16; c += 16) {
                if (w == 32)
                    transpose32x16(d + c * w, w, s + c, cols);
                else
                    transpose16x16(d + c * w, w, s + c, cols);
            }
        }
        gm_transpose_part_portable(d, s, m, w, cols, q, c16, cols);
        r += m;
    }
    _mm_sfence();
}

/* Eight f32 to bf16 (vf_round_bf16), each in the low half of its 32-bit lane. */
static inline __m256i bf16_lanes(__m256 f) { return _mm256_srli_epi32(_mm256_castps_si256(vf_round_bf16(f)), 16); }

/* Eight f32 to bf16 (vf_round_bf16), stored at d. */
static inline void store8_bf16(gm_bf16 *d, __m256 f)
{
    const __m256i b = bf16_lanes(f);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08); /* lanes 0 and 2 */
    _mm_storeu_si128((__m128i *)(void *)d, _mm256_castsi256_si128(packed));
}

/*
** Conversions to bf16 eight values at a time: F16 widened by F16C (exact,
** as gm_f16_to_f32) where the CPU has it, F32 as it is; each then rounded
** as gm_f32_to_bf16 (vf_round_bf16). The rest, and bf16 itself, portable.
*/
__attribute__((target("avx2,fma,f16c"))) static void convert_avx2(gm_bf16 *dst, const void *src, size_t n,
                                                                   gm_src_type type)
{
    if (type == GM_SRC_BF16 || (type == GM_SRC_F16 && !(gm_cpu_features() & GM_CPU_F16C))) {
        gm_convert_portable(dst, src, n, type);
        return;
    }
    const uint8_t *s = src;
    const size_t es = type == GM_SRC_F16 ? 2 : 4;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = type == GM_SRC_F16
                             ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + 2 * i)))
                             : _mm256_loadu_ps((const float *)(const void *)(s + 4 * i));
        store8_bf16(dst + i, f);
    }
    gm_convert_portable(dst + i, s + i * es, n - i, type);
}

/*
** 4-bit dequantization, eight values at a time with the portable code's
** arithmetic lane by lane: rows eight outputs a step; the block (AWQ in
** the other form) 32 inputs of 64 outputs at a time, the words of the 32
** input rows of eight word columns read along and transposed in registers,
** each output's 32 values a cache line, streamed past the cache where it
** is aligned. The rest portable.
*/
static void dequant4_row_avx2(gm_bf16 *d, const uint32_t *w, const unsigned *sh, unsigned shift, const int32_t *z,
                              const float *s, size_t N)
{
    const __m256i mask = _mm256_set1_epi32(15);
    size_t n = 0;
    for (; n + 8 <= N; n += 8) {
        __m256i q;
        if (sh)
            q = _mm256_srlv_epi32(_mm256_set1_epi32((int)w[n / 8]), _mm256_loadu_si256((const __m256i *)(const void *)sh));
        else
            q = _mm256_srl_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(w + n)), _mm_cvtsi32_si128((int)shift));
        q = _mm256_sub_epi32(_mm256_and_si256(q, mask), _mm256_loadu_si256((const __m256i *)(const void *)(z + n)));
        store8_bf16(d + n, _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_loadu_ps(s + n)));
    }
    if (n < N) /* a row not a multiple of 8 (GPTQ's outputs always are; this is for a hand-made table) */
        gm_dequant4_row_portable(d + n, sh ? w + n / 8 : w + n, sh, shift, z + n, s + n, N - n);
}

static void dequant4_block_avx2(gm_bf16 *d, size_t ld, const uint32_t *w, size_t W, const unsigned *sh,
                                const int32_t *z, const float *s, size_t R, size_t I)
{
    if (I != 32 || R != 64) { /* (64 outputs: the eight word columns the transposes read are there) */
        gm_dequant4_block_portable(d, ld, w, W, sh, z, s, R, I);
        return;
    }
    const __m256i mask = _mm256_set1_epi32(15);
    const int aligned = (((uintptr_t)d | ld * 2) % 32) == 0;
    __m256i words[4][8];
    for (int v = 0; v < 4; v++) /* inputs 8v..8v+7 */
        v8_transpose8_words(words[v], w + 8 * v * W, W);
    for (size_t r = 0; r < R; r++) {
        const __m256i zr = _mm256_set1_epi32(z[r]);
        const __m256 sr = _mm256_set1_ps(s[r]);
        __m256i b[4];
        for (int v = 0; v < 4; v++)
            b[v] = bf16_lanes(_mm256_mul_ps(
                _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(_mm256_srli_epi32(words[v][r / 8], (int)sh[r % 8]), mask), zr)),
                sr));
        const __m256i lo = _mm256_permute4x64_epi64(_mm256_packus_epi32(b[0], b[1]), 0xD8);
        const __m256i hi = _mm256_permute4x64_epi64(_mm256_packus_epi32(b[2], b[3]), 0xD8);
        __m256i *o = (__m256i *)(void *)(d + r * ld);
        if (aligned)
            _mm256_stream_si256(o, lo), _mm256_stream_si256(o + 1, hi);
        else
            _mm256_storeu_si256(o, lo), _mm256_storeu_si256(o + 1, hi);
    }
}

const gm_tier gm_tier_avx2 = {
    .name = "avx2",
    .needs = GM_CPU_AVX2 | GM_CPU_FMA,
    .wform = GM_W_PANEL16,
    .lanes = 8,
    .band = band_avx2,
    .panel_unit = NC,
    .gemv = gemv_avx2,
    .gemv_panels = gemv_panels_avx2,
    .dot = dot_avx2,
    .dot_rows = dot_rows_avx2,
    .finish = finish_avx2,
    .add_round = add_round_avx2,
    .norm_scale = norm_scale_avx2,
    .swiglu = swiglu_avx2,
    .rope = rope_avx2,
    .transpose = transpose_avx2,
    .panels = panels_avx2,
    .convert = convert_avx2,
    .dequant4_row = dequant4_row_avx2,
    .dequant4_block = dequant4_block_avx2,
    .attn_scores = attn_scores_avx2,
    .attn_values = attn_values_avx2,
    .exp_sum = exp_sum_avx2,
    .scale_max = scale_max_avx2,
    .div_round = div_round_avx2,
};

/*
** bf16 and f16 conversions: torch's round-to-nearest-even with canonical
** NaN, exact widening, and the rounding statistics of the F32 golden
** checkpoint (golden/README.md, "F32 checkpoint").
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "gm/bf16.h"
#include "gm/safetensors.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static gm_bf16 round_bits(uint32_t u)
{
    return gm_f32_to_bf16(from_bits(u));
}

/* ---------------------------------------------------------------------- */
/* f32 -> bf16 */

Test(bf16, ties_round_to_even)
{
    cr_assert_eq(round_bits(0x3F808000u), 0x3F80); // 0x3F80 is even: stays
    cr_assert_eq(round_bits(0x3F818000u), 0x3F82); // 0x3F81 is odd: goes up
    cr_assert_eq(round_bits(0xBF808000u), 0xBF80); // sign does not matter
    cr_assert_eq(round_bits(0xBF818000u), 0xBF82);
}

Test(bf16, rounds_off_ties_to_nearest)
{
    cr_assert_eq(round_bits(0x3F808001u), 0x3F81);
    cr_assert_eq(round_bits(0x3F807FFFu), 0x3F80);
    cr_assert_eq(round_bits(0x3F80FFFFu), 0x3F81);
    cr_assert_eq(round_bits(0x3F800000u), 0x3F80);
}

Test(bf16, carries_from_mantissa_into_exponent)
{
    cr_assert_eq(round_bits(0x3FFFFFFFu), 0x4000);
    cr_assert_eq(round_bits(0x3FFF8000u), 0x4000); // tie on an odd mantissa
    cr_assert_eq(round_bits(0x007FFFFFu), 0x0080); // largest subnormal becomes normal
}

Test(bf16, overflows_to_infinity_past_the_largest_finite)
{
    cr_assert_eq(round_bits(0x7F7FFFFFu), 0x7F80);
    cr_assert_eq(round_bits(0xFF7FFFFFu), 0xFF80);
    cr_assert_eq(round_bits(0x7F7F7FFFu), 0x7F7F);
}

Test(bf16, keeps_infinities)
{
    cr_assert_eq(gm_f32_to_bf16(INFINITY), 0x7F80);
    cr_assert_eq(gm_f32_to_bf16(-INFINITY), 0xFF80);
}

Test(bf16, turns_every_nan_into_canonical_7fc0)
{
    static const uint32_t nans[] = {
        0x7FC00000u, // quiet
        0xFFC00000u, // negative quiet
        0x7F800001u, // signalling, smallest payload
        0xFF800001u, // negative signalling
        0x7FBFFFFFu, // signalling that would round up into the exponent
        0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F808000u,
    };
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
        cr_assert_eq(round_bits(nans[i]), 0x7FC0, "nan 0x%08x", nans[i]);
}

Test(bf16, keeps_subnormals_and_signed_zero)
{
    cr_assert_eq(round_bits(0x00010000u), 0x0001);
    cr_assert_eq(round_bits(0x00008000u), 0x0000); // tie to even zero
    cr_assert_eq(round_bits(0x00018000u), 0x0002); // tie up to even
    cr_assert_eq(round_bits(0x80010000u), 0x8001);
    cr_assert_eq(round_bits(0x80000000u), 0x8000);
    cr_assert_eq(round_bits(0x00000001u), 0x0000);
}

Test(bf16, widening_then_narrowing_is_identity_except_nan)
{
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float f = gm_bf16_to_f32((gm_bf16)h);
        cr_assert_eq(to_bits(f), h << 16);
        gm_bf16 back = gm_f32_to_bf16(f);
        if (isnan(f))
            cr_assert_eq(back, 0x7FC0);
        else
            cr_assert_eq(back, h, "0x%04x came back as 0x%04x", h, back);
    }
}

Test(bf16, array_conversion_matches_scalar)
{
    float src[7] = {1.0f, -2.5f, from_bits(0x3F818000u), NAN, -INFINITY, 1e-40f, 0.0f};
    gm_bf16 dst[7];

    gm_f32_to_bf16_n(dst, src, 7);
    for (int i = 0; i < 7; i++)
        cr_assert_eq(dst[i], gm_f32_to_bf16(src[i]), "element %d", i);
}

/* ---------------------------------------------------------------------- */
/* f16 -> f32 */

/* The value of an IEEE half computed from its definition, with ldexp. */
static float half_reference(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    double v;

    if (exp == 0x1F)
        return mant ? NAN : (sign ? -INFINITY : INFINITY);
    if (exp == 0)
        v = ldexp(mant, -24);
    else
        v = ldexp(1024 + mant, exp - 25);
    return (float)(sign ? -v : v);
}

Test(f16, converts_every_finite_half_exactly)
{
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        float got = gm_f16_to_f32((uint16_t)h), want = half_reference((uint16_t)h);
        if (isnan(want)) {
            cr_assert(isnan(got), "0x%04x", h);
            continue;
        }
        cr_assert_eq(to_bits(got), to_bits(want), "half 0x%04x: got %a, expected %a", h, got,
                     want);
    }
}

Test(f16, converts_edge_values)
{
    cr_assert_eq(gm_f16_to_f32(0x3C00), 1.0f);
    cr_assert_eq(gm_f16_to_f32(0x7BFF), 65504.0f);
    cr_assert_eq(gm_f16_to_f32(0x0001), ldexpf(1.0f, -24)); // smallest subnormal
    cr_assert_eq(gm_f16_to_f32(0x03FF), ldexpf(1023.0f, -24)); // largest subnormal
    cr_assert_eq(gm_f16_to_f32(0x0400), ldexpf(1.0f, -14)); // smallest normal
    cr_assert_eq(to_bits(gm_f16_to_f32(0x8000)), 0x80000000u);
    cr_assert_eq(to_bits(gm_f16_to_f32(0x8001)), to_bits(-ldexpf(1.0f, -24)));
}

Test(f16, keeps_infinities_and_nan_payloads)
{
    cr_assert_eq(to_bits(gm_f16_to_f32(0x7C00)), 0x7F800000u);
    cr_assert_eq(to_bits(gm_f16_to_f32(0xFC00)), 0xFF800000u);
    cr_assert_eq(to_bits(gm_f16_to_f32(0x7E00)), 0x7FC00000u);
    cr_assert_eq(to_bits(gm_f16_to_f32(0x7C01)), 0x7F802000u); // signalling stays signalling
    cr_assert_eq(to_bits(gm_f16_to_f32(0xFE01)), 0xFFC02000u);
    cr_assert_eq(gm_f32_to_bf16(gm_f16_to_f32(0x7C01)), 0x7FC0,
                 "a half NaN still narrows to the canonical bf16 NaN");
}

/* ---------------------------------------------------------------------- */
/* the F32 golden checkpoint */

typedef struct rounding_counts {
    size_t elements, ties, ties_up, differs_from_truncation, differs_from_half_up, carries;
} rounding_counts;

static void count_rounding(rounding_counts *c, const uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, data + 4 * i, sizeof u);
        uint32_t r = round_bits(u), trunc = u >> 16, half_up = (u + 0x8000u) >> 16;
        c->elements++;
        if ((u & 0xFFFFu) == 0x8000u) {
            c->ties++;
            c->ties_up += r != trunc;
        }
        c->differs_from_truncation += r != trunc;
        c->differs_from_half_up += r != half_up;
        c->carries += ((r >> 7) & 0xFFu) != ((trunc >> 7) & 0xFFu);
    }
}

Test(bf16, reproduces_the_rounding_counts_of_the_f32_checkpoint)
{
    const char *dir = GM_SHARED_DIR "/golden/llama_f32_checkpoint";
    rounding_counts c = {0};
    st_model *m = NULL;
    uint8_t *head = NULL;
    size_t n_head = 0;
    st_header h;
    gm_status st;

    cr_assert_eq(st_read_header_bytes(GM_SHARED_DIR "/golden/llama_f32_checkpoint/"
                                      "model.safetensors",
                                      &head, &n_head, &st),
                 GM_OK, "%s", st.msg);
    cr_assert_eq(st_header_parse(&h, head, n_head, 0, "model.safetensors", &st), GM_OK, "%s",
                 st.msg);
    cr_assert_eq(st_model_open(&m, dir, &st), GM_OK, "%s", st.msg);
    for (size_t i = 0; i < h.n_tensors; i++) {
        const st_tensor *t = st_model_find(m, h.tensors[i].name, NULL);
        cr_assert_not_null(t);
        cr_assert_eq(t->dtype, ST_F32);
        count_rounding(&c, st_model_data(m, t), (t->end - t->begin) / 4);
    }
    // Figures from golden/README.md and meta.json f32_checkpoint.
    cr_expect_eq(h.n_tensors, 21);
    cr_expect_eq(c.elements, 127296);
    cr_expect_eq(c.ties, 18187);
    cr_expect_eq(c.ties_up, 9165);
    cr_expect_eq(c.differs_from_truncation, 63735);
    cr_expect_eq(c.differs_from_half_up, 9022);
    cr_expect_eq(c.carries, 438);
    st_model_close(m);
    st_header_free(&h);
    free(head);
}

/*
** .npy reading and writing: the goldens, round trips of odd shapes, byte
** identity with NumPy's own output, and one test per malformed header.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gm/npy.h"

#define SEQ24 GM_SHARED_DIR "/golden/llama_untied/golden/seq24"

static char tmp_dir[64];

static void make_dir(void)
{
    strcpy(tmp_dir, "/tmp/gm_npy_XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_dir(void)
{
    char path[128];

    snprintf(path, sizeof path, "%s/a.npy", tmp_dir);
    unlink(path);
    rmdir(tmp_dir);
}

static const char *tmp_path(void)
{
    static char path[128];

    snprintf(path, sizeof path, "%s/a.npy", tmp_dir);
    return path;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;

    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    cr_assert_not_null(buf = malloc(*len + 1));
    cr_assert_eq(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

/* ---------------------------------------------------------------------- */
/* goldens */

Test(npy, reads_golden_tokens)
{
    gm_npy a;
    gm_status st;
    const int32_t *ids;

    cr_assert_eq(gm_npy_read(SEQ24 "/tokens.npy", &a, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(a.type, GM_NPY_I4);
    cr_assert_eq(a.rank, 1);
    cr_assert_eq(a.shape[0], 24);
    cr_assert_eq(a.count, 24);
    ids = a.data;
    // golden/README.md: position 2 is id 0, 13 is vocab - 1, 19 repeats 7.
    cr_assert_eq(ids[0], 368);
    cr_assert_eq(ids[2], 0);
    cr_assert_eq(ids[13], 383);
    cr_assert_eq(ids[19], ids[7]);
    cr_assert_eq(ids[23], 331);
    gm_npy_free(&a);
    cr_assert_null(a.data);
}

Test(npy, reads_golden_bf16_logits)
{
    gm_npy a;
    gm_status st;

    cr_assert_eq(gm_npy_read(SEQ24 "/bf16_fp32acc/logits.npy", &a, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(a.type, GM_NPY_F4);
    cr_assert_eq(a.rank, 2);
    cr_assert_eq(a.shape[0], 24);
    cr_assert_eq(a.shape[1], 384);
    cr_assert_eq(a.count, 24 * 384);
    for (size_t i = 0; i < a.count; i++) {
        uint32_t u;
        float f = ((const float *)a.data)[i];
        memcpy(&u, &f, sizeof u);
        cr_assert_eq(u & 0xFFFFu, 0, "logit %zu is not a widened bf16", i);
        cr_assert(f > -10.0f && f < 10.0f, "logit %zu is %g", i, f);
    }
    gm_npy_free(&a);
}

Test(npy, reads_golden_layers_of_rank_3)
{
    gm_npy a;
    gm_status st;

    cr_assert_eq(gm_npy_read(SEQ24 "/fp32/layers.npy", &a, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(a.rank, 3);
    cr_assert_eq(a.shape[0], 3);
    cr_assert_eq(a.shape[1], 24);
    cr_assert_eq(a.shape[2], 96);
    gm_npy_free(&a);
}

Test(npy, writes_what_numpy_wrote_byte_for_byte, .init = make_dir, .fini = remove_dir)
{
    static const char *const goldens[] = {SEQ24 "/tokens.npy", SEQ24 "/bf16/logits.npy",
                                          SEQ24 "/fp32/layers.npy"};

    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        gm_npy a;
        gm_status st;
        size_t n_want, n_got;
        cr_assert_eq(gm_npy_read(goldens[i], &a, &st), GM_OK, "%s", st.msg);
        cr_assert_eq(gm_npy_write(tmp_path(), a.type, a.rank, a.shape, a.data, &st), GM_OK, "%s",
                     st.msg);
        uint8_t *want = slurp(goldens[i], &n_want), *got = slurp(tmp_path(), &n_got);
        cr_assert_eq(n_got, n_want, "%s", goldens[i]);
        cr_assert_eq(memcmp(got, want, n_want), 0, "%s", goldens[i]);
        free(want);
        free(got);
        gm_npy_free(&a);
    }
}

/* ---------------------------------------------------------------------- */
/* round trips */

static void round_trip(gm_npy_type type, int rank, const int64_t *shape)
{
    size_t count = 1, len;
    int32_t *data;
    gm_npy a;
    gm_status st;
    uint8_t *file;

    for (int i = 0; i < rank; i++)
        count *= (size_t)shape[i];
    cr_assert_not_null(data = malloc(count * 4 + 1));
    for (size_t i = 0; i < count; i++)
        data[i] = (int32_t)(i * 2654435761u); // any bit pattern, NaNs included for f4
    cr_assert_eq(gm_npy_write(tmp_path(), type, rank, shape, data, &st), GM_OK, "%s", st.msg);
    file = slurp(tmp_path(), &len);
    cr_assert_eq((len - count * 4) % 64, 0, "the preamble is a multiple of 64 bytes");
    cr_assert_eq(file[len - count * 4 - 1], '\n', "the header ends in a newline");
    free(file);
    cr_assert_eq(gm_npy_read(tmp_path(), &a, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(a.type, type);
    cr_assert_eq(a.rank, rank);
    cr_assert_eq(a.count, count);
    for (int i = 0; i < rank; i++)
        cr_assert_eq(a.shape[i], shape[i]);
    cr_assert_eq(memcmp(a.data, data, count * 4), 0);
    gm_npy_free(&a);
    free(data);
}

Test(npy, round_trips_a_rank_0_scalar, .init = make_dir, .fini = remove_dir)
{
    round_trip(GM_NPY_F4, 0, NULL);
    round_trip(GM_NPY_I4, 0, NULL);
}

Test(npy, round_trips_shapes_with_a_zero_dimension, .init = make_dir, .fini = remove_dir)
{
    round_trip(GM_NPY_F4, 1, (const int64_t[]){0});
    round_trip(GM_NPY_I4, 3, (const int64_t[]){2, 0, 3});
}

Test(npy, round_trips_rank_1_and_rank_3, .init = make_dir, .fini = remove_dir)
{
    round_trip(GM_NPY_I4, 1, (const int64_t[]){7});
    round_trip(GM_NPY_F4, 3, (const int64_t[]){2, 3, 5});
    round_trip(GM_NPY_F4, 8, (const int64_t[]){1, 2, 1, 3, 1, 1, 2, 1});
}

Test(npy, writes_the_python_tuple_forms, .init = make_dir, .fini = remove_dir)
{
    static const struct {
        int rank;
        int64_t shape[2];
        const char *text;
    } cases[] = {
        {0, {0}, "'shape': (), }"},
        {1, {5}, "'shape': (5,), }"},
        {2, {2, 3}, "'shape': (2, 3), }"},
    };
    float zero[6] = {0};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gm_status st;
        size_t len;
        cr_assert_eq(gm_npy_write(tmp_path(), GM_NPY_F4, cases[i].rank, cases[i].shape, zero, &st),
                     GM_OK, "%s", st.msg);
        uint8_t *file = slurp(tmp_path(), &len);
        cr_assert(memmem(file, len, cases[i].text, strlen(cases[i].text)) != NULL, "%s",
                  cases[i].text);
        cr_assert_eq(memcmp(file, "\x93NUMPY\x01\x00", 8), 0);
        free(file);
    }
}

Test(npy, leaves_no_temporary_file, .init = make_dir, .fini = remove_dir)
{
    char cmd[400];
    gm_status st;
    int32_t one = 1;

    cr_assert_eq(gm_npy_write(tmp_path(), GM_NPY_I4, 1, (const int64_t[]){1}, &one, &st), GM_OK);
    cr_assert_eq(access(tmp_path(), F_OK), 0);
    /* the temporary (<path>.<pid>.<n>.tmp) is gone: the file is the folder's only entry */
    snprintf(cmd, sizeof cmd, "test \"$(ls -A \"$(dirname '%s')\")\" = \"$(basename '%s')\"", tmp_path(), tmp_path());
    cr_assert_eq(system(cmd), 0, "a temporary file is left beside %s", tmp_path());
}

Test(npy, reports_a_folder_that_does_not_exist)
{
    gm_status st;
    int32_t one = 1;

    cr_assert_eq(gm_npy_write("/nonexistent-gm/a.npy", GM_NPY_I4, 1, (const int64_t[]){1}, &one,
                              &st), GM_EIO);
    cr_assert_str_eq(st.msg, "/nonexistent-gm/a.npy: cannot create: No such file or directory", "the path asked for, "
                     "not its temporary's");
    cr_assert_eq(gm_npy_read("/nonexistent-gm/a.npy", &(gm_npy){0}, &st), GM_EIO);
}

Test(npy, refuses_to_write_a_bad_shape)
{
    gm_status st;

    cr_assert_eq(gm_npy_write("/tmp/x.npy", GM_NPY_F4, 1, (const int64_t[]){-1}, NULL, &st),
                 GM_EUSAGE);
    cr_assert_eq(gm_npy_write("/tmp/x.npy", GM_NPY_F4, 9, (const int64_t[9]){0}, NULL, &st),
                 GM_EUSAGE);
}

/* ---------------------------------------------------------------------- */
/* malformed files, built here */

/* Write magic, version, a header of dict padded to 64 with '\n', then data_len bytes. */
static void put_npy(int major, const char *magic, const char *dict, int newline, size_t data_len)
{
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict), total = (pre + n + 1 + 63) / 64 * 64;
    size_t hlen = total - pre;
    uint8_t *buf = calloc(1, total + data_len);
    FILE *f;

    cr_assert_not_null(buf);
    memcpy(buf, magic, 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memset(buf + pre, ' ', hlen);
    memcpy(buf + pre, dict, n);
    buf[total - 1] = newline ? '\n' : ' ';
    cr_assert_not_null(f = fopen(tmp_path(), "wb"));
    cr_assert_eq(fwrite(buf, 1, total + data_len, f), total + data_len);
    fclose(f);
    free(buf);
}

static void expect_rejected(const char *fragment)
{
    gm_npy a;
    gm_status st;
    size_t n;

    cr_assert_eq(gm_npy_read(tmp_path(), &a, &st), GM_EFORMAT, "accepted; expected '%s'",
                 fragment);
    cr_assert_null(a.data);
    cr_assert(strstr(st.msg, fragment) != NULL, "message '%s' lacks '%s'", st.msg, fragment);
    cr_assert(strncmp(st.msg, tmp_path(), strlen(tmp_path())) == 0, "'%s' names no file", st.msg);
    n = strlen(st.msg);
    cr_assert(strchr(st.msg, '\n') == NULL && st.msg[n - 1] != '.', "%s", st.msg);
}

#define OK_DICT(shape) "{'descr': '<f4', 'fortran_order': False, 'shape': " shape ", }"

#define REJECTS(test, major, dict, data_len, fragment)                  \
    Test(npy_rules, test, .init = make_dir, .fini = remove_dir)         \
    {                                                                   \
        put_npy(major, "\x93NUMPY", dict, 1, data_len);                 \
        expect_rejected(fragment);                                      \
    }

REJECTS(rejects_float64, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16,
        "npy descr is '<f8', expected '<f4' or '<i4'")
REJECTS(rejects_big_endian, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8,
        "npy descr is '>f4'")
REJECTS(rejects_structured_descr, 1,
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
        "npy descr is not a string")
REJECTS(rejects_fortran_order, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16,
        "npy fortran_order is True, expected False")
REJECTS(rejects_fortran_order_spelled_otherwise, 1,
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8,
        "npy fortran_order is not False")
REJECTS(rejects_rank_1_shape_without_its_comma, 1, OK_DICT("(2)"), 8, "npy shape is not a tuple")
REJECTS(rejects_negative_dimension, 1, OK_DICT("(-2,)"), 0, "npy shape is not a tuple")
REJECTS(rejects_shape_list, 1, OK_DICT("[2]"), 8, "npy shape is not a tuple")
REJECTS(rejects_rank_above_8, 1, OK_DICT("(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4,
        "npy shape is not a tuple of at most 8")
REJECTS(rejects_dimension_that_overflows, 1, OK_DICT("(99999999999999999999,)"), 0,
        "npy shape is not a tuple")
REJECTS(rejects_element_count_that_overflows, 1, OK_DICT("(4611686018427387904, 8)"), 0,
        "npy shape overflows")
REJECTS(rejects_missing_shape, 1, "{'descr': '<f4', 'fortran_order': False, }", 0,
        "npy header has no 'shape'")
REJECTS(rejects_unknown_key, 1,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", 8,
        "npy header has an unexpected key 'x'")
REJECTS(rejects_repeated_key, 1,
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8,
        "npy header repeats key 'descr'")
REJECTS(rejects_bytes_after_the_dict, 1, OK_DICT("(2,)") " x", 8,
        "npy header has bytes after the dict")
REJECTS(rejects_header_that_is_not_a_dict, 1, "('descr', '<f4')", 8, "npy header is not a dict")
REJECTS(rejects_unterminated_dict, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", 8,
        "npy header dict is malformed")
REJECTS(rejects_data_shorter_than_the_shape, 1, OK_DICT("(2, 3)"), 20,
        "npy file is 148 bytes, expected 128 + 6 * 4 = 152")
REJECTS(rejects_data_longer_than_the_shape, 1, OK_DICT("(2, 3)"), 28, "npy file is 156 bytes")

Test(npy_rules, accepts_version_2_and_3_headers, .init = make_dir, .fini = remove_dir)
{
    gm_npy a;
    gm_status st;

    for (int major = 2; major <= 3; major++) {
        put_npy(major, "\x93NUMPY", OK_DICT("(2,)"), 1, 8);
        cr_assert_eq(gm_npy_read(tmp_path(), &a, &st), GM_OK, "%s", st.msg);
        cr_assert_eq(a.count, 2);
        gm_npy_free(&a);
    }
}

Test(npy_rules, rejects_other_versions, .init = make_dir, .fini = remove_dir)
{
    put_npy(4, "\x93NUMPY", OK_DICT("(2,)"), 1, 8);
    expect_rejected("npy version 4.0, expected 1.0, 2.0 or 3.0");
}

Test(npy_rules, rejects_bad_magic, .init = make_dir, .fini = remove_dir)
{
    put_npy(1, "\x93NUMPZ", OK_DICT("(2,)"), 1, 8);
    expect_rejected("not an npy file (bad magic)");
}

Test(npy_rules, rejects_header_without_final_newline, .init = make_dir, .fini = remove_dir)
{
    put_npy(1, "\x93NUMPY", OK_DICT("(2,)"), 0, 8);
    expect_rejected("npy header does not end in a newline");
}

Test(npy_rules, rejects_header_length_past_the_end, .init = make_dir, .fini = remove_dir)
{
    FILE *f = fopen(tmp_path(), "wb");

    cr_assert_not_null(f);
    fwrite("\x93NUMPY\x01\x00\xff\x00{'descr'", 1, 18, f);
    fclose(f);
    expect_rejected("npy header length 255 runs past the end of the file");
}

Test(npy_rules, rejects_a_truncated_preamble, .init = make_dir, .fini = remove_dir)
{
    FILE *f = fopen(tmp_path(), "wb");

    cr_assert_not_null(f);
    fwrite("\x93NUMPY\x01", 1, 7, f);
    fclose(f);
    expect_rejected("not an npy file");
}

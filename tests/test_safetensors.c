/*
** The strict safetensors reader: one test per rule of the reference
** implementation on a file built here, then the real goldens, the Hub
** header copies, sharded models and loading as bf16.
*/
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gm/io.h"
#include "gm/npy.h"
#include "gm/safetensors.h"
#include "gm/weights.h"

#define GOLDEN GM_SHARED_DIR "/golden"
#define HUB GM_SHARED_DIR "/hub"
#define WHAT "t.safetensors"

/* A tensor entry of a header, as JSON text. */
#define T(name, dtype, shape, begin, end)                                                     \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" begin "," \
    end "]}"

/* ---------------------------------------------------------------------- */
/* building files */

/* u64 little-endian n, then hdr_len bytes of hdr, then data_len bytes (value 1..). */
static uint8_t *raw_image(uint64_t n, const void *hdr, size_t hdr_len, size_t data_len,
                          size_t *len)
{
    uint8_t *buf = malloc(8 + hdr_len + data_len + 1);

    cr_assert_not_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, hdr, hdr_len);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + hdr_len + i] = (uint8_t)(i * 7 + 1);
    *len = 8 + hdr_len + data_len;
    return buf;
}

/* A well-formed image: json padded with spaces to a multiple of 8, then data. */
static uint8_t *image(const char *json, size_t data_len, size_t *len)
{
    size_t n = (strlen(json) + 7) / 8 * 8;
    char *hdr = malloc(n);
    uint8_t *buf;

    cr_assert_not_null(hdr);
    memset(hdr, ' ', n);
    memcpy(hdr, json, strlen(json));
    buf = raw_image(n, hdr, n, data_len, len);
    free(hdr);
    return buf;
}

static int parse_image(const uint8_t *buf, size_t len, uint64_t file_size, gm_status *st)
{
    st_header h;
    int rc = st_header_parse(&h, buf, len, file_size, WHAT, st);

    if (rc != GM_OK)
        cr_assert_eq(h.n_tensors, 0, "a failed parse leaves the header empty");
    st_header_free(&h);
    return rc;
}

/* Messages are one line, name the file, and have no trailing period. */
static void expect_message(const gm_status *st, const char *fragment)
{
    size_t n = strlen(st->msg);

    cr_assert(strstr(st->msg, fragment) != NULL, "message '%s' lacks '%s'", st->msg, fragment);
    cr_assert(strchr(st->msg, '\n') == NULL, "message '%s' spans lines", st->msg);
    cr_assert(n > 0 && st->msg[n - 1] != '.', "message '%s' ends in a period", st->msg);
}

static void expect_rejected_bytes(const uint8_t *buf, size_t len, const char *fragment)
{
    gm_status st;

    cr_assert_eq(parse_image(buf, len, len, &st), GM_EFORMAT, "accepted; expected '%s'",
                 fragment);
    cr_assert_eq(strncmp(st.msg, WHAT ": ", strlen(WHAT) + 2), 0, "'%s' names no file", st.msg);
    expect_message(&st, fragment);
}

static void expect_rejected(const char *json, size_t data_len, const char *fragment)
{
    size_t len;
    uint8_t *buf = image(json, data_len, &len);

    expect_rejected_bytes(buf, len, fragment);
    free(buf);
}

static void expect_accepted(const char *json, size_t data_len, st_header *h)
{
    size_t len;
    uint8_t *buf = image(json, data_len, &len);
    gm_status st;

    cr_assert_eq(st_header_parse(h, buf, len, len, WHAT, &st), GM_OK, "%s", st.msg);
    free(buf);
}

/* ---------------------------------------------------------------------- */
/* one test per rule */

#define REJECTS(test, json, data_len, fragment)   \
    Test(safetensors_rules, test)                 \
    {                                             \
        expect_rejected(json, data_len, fragment); \
    }

REJECTS(rejects_header_not_starting_with_brace, " {}", 0,
        "header must start with '{', found byte 0x20")
REJECTS(rejects_header_that_is_an_array, "[]", 0, "header must start with '{'")
/* the reference reads shapes and offsets as unsigned integers (serde): 4.0 and 4e0 are not, whole as they are */
REJECTS(rejects_a_shape_written_as_a_float, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0,16]}}", 16,
        "header: expected an integer, found '4.0' at byte")
REJECTS(rejects_an_offset_written_with_an_exponent,
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,1.6e1]}}", 16,
        "header: expected an integer, found '1.6e1' at byte")
REJECTS(rejects_invalid_json, "{\"a\":", 0, "header is not valid json")
REJECTS(rejects_raw_control_byte_in_header, "{\"a\x01\":{}}", 0, "control byte 0x01")
REJECTS(rejects_duplicate_tensor_names,
        "{" T("x", "U8", "[2]", "0", "2") "," T("x", "U8", "[2]", "2", "4") "}", 4,
        "duplicate tensor name 'x'")
REJECTS(rejects_two_metadata_entries,
        "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate tensor name '__metadata__'")
REJECTS(rejects_metadata_that_is_not_an_object, "{\"__metadata__\":[\"pt\"]}", 0,
        "__metadata__ is not an object")
REJECTS(rejects_metadata_with_a_non_string_value, "{\"__metadata__\":{\"format\":1}}", 0,
        "__metadata__ entry 'format' is not a string")
REJECTS(rejects_metadata_with_a_duplicate_key,
        "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, "__metadata__ has a duplicate key 'a'")
REJECTS(rejects_tensor_that_is_not_an_object, "{\"x\":[1]}", 0, "tensor 'x' is not an object")
REJECTS(rejects_tensor_with_a_duplicate_field,
        "{\"x\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1,
        "tensor 'x' has a duplicate key 'dtype'")
REJECTS(rejects_missing_dtype, "{\"x\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
        "tensor 'x' has no dtype string")
REJECTS(rejects_unknown_dtype, "{" T("x", "bf16", "[1]", "0", "2") "}", 2,
        "tensor 'x' has unknown dtype 'bf16'")
REJECTS(rejects_missing_shape, "{\"x\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1,
        "tensor 'x' has no shape array")
REJECTS(rejects_negative_dimension, "{" T("x", "U8", "[-1]", "0", "0") "}", 0,
        "tensor 'x' has shape entry 0 that is not an integer in [0, 2^53]")
REJECTS(rejects_fractional_dimension, "{" T("x", "U8", "[2, 1.5]", "0", "3") "}", 3,
        "tensor 'x' has shape entry 1 that is not an integer")
REJECTS(rejects_dimension_above_2_pow_53, "{" T("x", "U8", "[9007199254740994]", "0", "0") "}",
        0, "tensor 'x' has shape entry 0 that is not an integer")
REJECTS(rejects_string_dimension, "{" T("x", "U8", "[\"2\"]", "0", "2") "}", 2,
        "tensor 'x' has shape entry 0")
REJECTS(rejects_rank_above_the_maximum,
        "{" T("x", "U8", "[1,1,1,1,1,1,1,1,1]", "0", "1") "}", 1,
        "tensor 'x' has rank 9, expected at most 8")
REJECTS(rejects_offsets_that_are_not_a_pair,
        "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1,
        "tensor 'x' has bad data_offsets")
REJECTS(rejects_missing_offsets, "{\"x\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1,
        "tensor 'x' has bad data_offsets")
REJECTS(rejects_fractional_offset, "{" T("x", "U8", "[1]", "0", "1.5") "}", 1,
        "tensor 'x' has bad data_offsets")
REJECTS(rejects_negative_offset, "{" T("x", "U8", "[0]", "-1", "-1") "}", 0,
        "tensor 'x' has bad data_offsets")
REJECTS(rejects_offsets_with_begin_after_end, "{" T("x", "U8", "[0]", "2", "1") "}", 2,
        "tensor 'x' has data_offsets [2, 1], begin after end")
REJECTS(rejects_span_that_does_not_match_dtype_and_shape,
        "{" T("x", "BF16", "[2, 3]", "0", "10") "}", 10,
        WHAT ": tensor 'x' has data_offsets [0, 10], expected a span of 12 bytes for BF16 [2, 3]")
REJECTS(rejects_element_count_that_overflows,
        "{" T("x", "F64", "[9007199254740992, 9007199254740992]", "0", "8") "}", 8,
        "tensor 'x': the size of F64 [9007199254740992, 9007199254740992] overflows")
REJECTS(rejects_byte_size_that_overflows,
        "{" T("x", "F64", "[9007199254740992, 4096]", "0", "8") "}", 8,
        "the size of F64 [9007199254740992, 4096] overflows")
REJECTS(rejects_offsets_with_hole,
        "{" T("a", "U8", "[4]", "0", "4") "," T("b", "U8", "[4]", "6", "10") "}", 10,
        "tensor 'b' has data_offsets [6, 10], expected to start at byte 4 (a hole in the data)")
REJECTS(rejects_offsets_not_starting_at_zero, "{" T("a", "U8", "[4]", "2", "6") "}", 6,
        "tensor 'a' has data_offsets [2, 6], expected to start at byte 0")
REJECTS(rejects_overlapping_offsets,
        "{" T("a", "U8", "[4]", "0", "4") "," T("b", "U8", "[4]", "2", "6") "}", 6,
        "tensor 'b' has data_offsets [2, 6], expected to start at byte 4 (overlaps tensor 'a')")
REJECTS(rejects_two_tensors_on_the_same_bytes,
        "{" T("a", "U8", "[4]", "0", "4") "," T("b", "U8", "[4]", "0", "4") "}", 4,
        "(overlaps tensor '")
REJECTS(rejects_data_past_the_last_tensor, "{" T("a", "U8", "[4]", "0", "4") "}", 5,
        "file is 69 bytes, expected 8 + 56 + 4 = 68 (data section not fully covered)")

Test(safetensors_rules, rejects_buffer_shorter_than_8_bytes)
{
    static const uint8_t buf[7] = {2, 0, 0, 0, 0, 0, 0};
    gm_status st;
    uint64_t n;

    cr_assert_eq(st_header_len(buf, sizeof buf, &n, WHAT, &st), GM_EFORMAT);
    cr_assert_str_eq(st.msg, WHAT ": header too small: 7 bytes, expected at least 8");
    expect_rejected_bytes(buf, sizeof buf, "header too small");
    expect_rejected_bytes(buf, 0, "header too small: 0 bytes");
}

Test(safetensors_rules, rejects_header_length_above_100_000_000)
{
    size_t len;
    uint8_t *buf = raw_image(100000001u, "{}", 2, 0, &len);
    uint64_t n = 0;
    gm_status st;

    expect_rejected_bytes(buf, len, "header length 100000001 exceeds the limit of 100000000");
    free(buf);
    buf = raw_image(100000000u, "{}", 2, 0, &len);
    cr_assert_eq(st_header_len(buf, len, &n, WHAT, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(n, 100000000u);
    free(buf);
}

Test(safetensors_rules, rejects_header_length_past_the_end_of_the_buffer)
{
    size_t len;
    uint8_t *buf = raw_image(16, "{}              ", 15, 0, &len);

    expect_rejected_bytes(buf, len, "header length 16 runs past the end: 8 + 16 > 23 bytes");
    free(buf);
    buf = raw_image(UINT64_C(0xFFFFFFFFFFFFFFFF), "{}", 2, 0, &len);
    expect_rejected_bytes(buf, len, "exceeds the limit");
    free(buf);
}

Test(safetensors_rules, rejects_empty_header)
{
    size_t len;
    uint8_t *buf = raw_image(0, "", 0, 0, &len);

    expect_rejected_bytes(buf, len, "header must start with '{', found an empty header");
    free(buf);
}

Test(safetensors_rules, rejects_padding_other_than_spaces)
{
    static const char *const pads[] = {"{}\n     ", "{}\t     ", "{}     x", "{} \r    "};

    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
        size_t len;
        uint8_t *buf = raw_image(8, pads[i], 8, 0, &len);
        expect_rejected_bytes(buf, len, "after the json header, expected only space padding");
        free(buf);
    }
}

Test(safetensors_rules, rejects_nul_padding)
{
    size_t len;
    uint8_t *buf = raw_image(8, "{}\0\0\0\0\0\0", 8, 0, &len);

    expect_rejected_bytes(buf, len, "control byte 0x00 at byte 10");
    free(buf);
}

Test(safetensors_rules, rejects_invalid_utf8)
{
    static const char *const bad[] = {
        "{\"\xC3\x28\":1}",         // truncated 2-byte sequence
        "{\"\xC0\xAF\":1}",         // overlong '/'
        "{\"\xED\xA0\x80\":1}",     // UTF-16 surrogate
        "{\"\xF4\x90\x80\x80\":1}", // past U+10FFFF
        "{\"\xFF\":1}      ",
        "{\"a\":1}\x80",
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len;
        uint8_t *buf = raw_image(strlen(bad[i]), bad[i], strlen(bad[i]), 0, &len);
        expect_rejected_bytes(buf, len, i < 5 ? "header is not valid utf-8 at byte 10"
                                              : "header is not valid utf-8 at byte 15");
        free(buf);
    }
}

Test(safetensors_rules, rejects_header_only_buffer_without_its_data_when_size_is_known)
{
    size_t len;
    uint8_t *buf = image("{" T("a", "U8", "[4]", "0", "4") "}", 0, &len);
    gm_status st;

    cr_assert_eq(parse_image(buf, len, len, &st), GM_ESHORT); /* a short file: an interrupted download or copy */
    expect_message(&st, "file is 64 bytes, its header describes 8 + 56 + 4 = 68: the file is incomplete");
    cr_assert_eq(parse_image(buf, len, 0, &st), GM_OK, "file_size 0 means header only: %s",
                 st.msg);
    free(buf);
}

/* ---------------------------------------------------------------------- */
/* what a valid header may contain */

Test(safetensors_header, accepts_empty_and_rank_0_tensors)
{
    st_header h;

    expect_accepted("{\"__metadata__\":{\"format\":\"pt\"}," T("e", "F32", "[3, 0]", "0", "0") ","
                    T("s", "F32", "[]", "0", "4") "," T("z", "I64", "[0]", "4", "4") "}",
                    4, &h);
    cr_assert_eq(h.n_tensors, 3);
    cr_assert_eq(h.data_len, 4);
    cr_assert_eq(st_header_find(&h, "s")->rank, 0);
    cr_assert_eq(st_header_find(&h, "e")->rank, 2);
    cr_assert_eq(st_header_find(&h, "e")->shape[1], 0);
    st_header_free(&h);
}

Test(safetensors_header, accepts_an_empty_header_object)
{
    st_header h;

    expect_accepted("{}", 0, &h);
    cr_assert_eq(h.n_tensors, 0);
    cr_assert_null(st_header_find(&h, "x"));
    st_header_free(&h);
}

Test(safetensors_header, accepts_tensors_listed_out_of_offset_order)
{
    st_header h;

    expect_accepted("{" T("c", "U8", "[2]", "4", "6") "," T("a", "U8", "[2]", "2", "4") ","
                    T("b", "I16", "[1]", "0", "2") "}",
                    6, &h);
    cr_assert_eq(h.n_tensors, 3);
    cr_assert_eq(h.data_len, 6);
    cr_assert_eq(h.header_len % 8, 0);
    st_header_free(&h);
}

Test(safetensors_header, stores_tensors_sorted_by_name_and_finds_them)
{
    st_header h;
    const st_tensor *t;

    expect_accepted("{" T("zeta", "BF16", "[2, 3]", "0", "12") ","
                    T("alpha", "F16", "[1]", "12", "14") ","
                    T("mid", "I32", "[1, 1, 1]", "14", "18") "}",
                    18, &h);
    cr_assert_str_eq(h.tensors[0].name, "alpha");
    cr_assert_str_eq(h.tensors[1].name, "mid");
    cr_assert_str_eq(h.tensors[2].name, "zeta");
    t = st_header_find(&h, "zeta");
    cr_assert_not_null(t);
    cr_assert_eq(t->dtype, ST_BF16);
    cr_assert_eq(t->rank, 2);
    cr_assert_eq(t->shape[0], 2);
    cr_assert_eq(t->shape[1], 3);
    cr_assert_eq(t->begin, 0);
    cr_assert_eq(t->end, 12);
    cr_assert_null(st_header_find(&h, "zet"));
    cr_assert_null(st_header_find(&h, "__metadata__"));
    st_header_free(&h);
}

Test(safetensors_header, ignores_unknown_fields_in_a_tensor_entry)
{
    st_header h;

    expect_accepted("{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
                    "\"extra\":1}}",
                    1, &h);
    cr_assert_eq(h.n_tensors, 1);
    st_header_free(&h);
}

Test(safetensors_header, names_every_dtype_with_its_size)
{
    static const char *const names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                        "I16",  "U16", "F16", "BF16",    "I32",
                                        "U32",  "F32", "F64", "I64",     "U64"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};

    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        cr_assert_str_eq(st_dtype_name((st_dtype)d), names[d]);
        cr_assert_eq(st_dtype_size((st_dtype)d), sizes[d], "%s", names[d]);
    }
    cr_assert_null(st_dtype_name(ST_DTYPE_COUNT));
    cr_assert_eq(st_dtype_size(ST_DTYPE_COUNT), 0);
}

/* ---------------------------------------------------------------------- */
/* real files */

static const char *const golden_models[] = {
    "llama_untied", "llama_untied_sharded", "llama3_tied", "llama_f32_checkpoint",
    "qwen2_tied",   "qwen3_tied",           "mistral_untied",
};

Test(safetensors_files, opens_every_golden_model)
{
    static const size_t tensors[] = {30, 30, 20, 21, 26, 24, 30};

    for (size_t i = 0; i < sizeof golden_models / sizeof golden_models[0]; i++) {
        char dir[512];
        st_model *m;
        gm_status st;
        snprintf(dir, sizeof dir, GOLDEN "/%s", golden_models[i]);
        cr_assert_eq(st_model_open(&m, dir, &st), GM_OK, "%s", st.msg);
        cr_expect_eq(st_model_n_tensors(m), tensors[i], "%s: %zu tensors", golden_models[i],
                     st_model_n_tensors(m));
        cr_assert_not_null(st_model_find(m, "model.norm.weight", NULL));
        st_model_close(m);
    }
}

Test(safetensors_files, reads_only_the_header_bytes_of_a_full_file)
{
    const char *path = GOLDEN "/llama_untied/model.safetensors";
    uint8_t *bytes;
    size_t n;
    st_header h;
    gm_status st;
    struct stat sb;

    cr_assert_eq(st_read_header_bytes(path, &bytes, &n, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(n, 8 + 3096, "8 + N bytes, not the %lld-byte file", (long long)sb.st_size);
    cr_assert_eq(st_header_parse(&h, bytes, n, (uint64_t)sb.st_size, "model.safetensors", &st),
                 GM_OK, "%s", st.msg);
    cr_assert_eq(h.header_len + 8 + h.data_len, (uint64_t)sb.st_size);
    st_header_free(&h);
    free(bytes);
}

Test(safetensors_files, reports_a_truncated_header_file)
{
    char path[] = "/tmp/gm_st_XXXXXX";
    int fd = mkstemp(path);
    uint8_t *bytes = NULL;
    size_t n = 0;
    gm_status st;

    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "\x20\0\0\0\0\0\0\0{}", 10), 10);
    close(fd);
    cr_assert_eq(st_read_header_bytes(path, &bytes, &n, &st), GM_ESHORT);
    expect_message(&st, "file ends after 10 bytes, the header needs 8 + 32: the file is incomplete");
    cr_assert_null(bytes);
    unlink(path);
    cr_assert_eq(st_read_header_bytes(path, &bytes, &n, &st), GM_EIO);
    expect_message(&st, "cannot open");
}

/* The full size of a Hub file, from the folder's .hub.json. */
static uint64_t hub_file_size(const char *dir, const char *file)
{
    char path[1024];
    FILE *f;
    char *text;
    long len;
    cJSON *root;
    uint64_t size;

    cr_assert_lt((size_t)snprintf(path, sizeof path, "%s/.hub.json", dir), sizeof path);
    cr_assert_not_null(f = fopen(path, "rb"));
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    cr_assert_not_null(text = malloc((size_t)len));
    cr_assert_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    root = cJSON_ParseWithLength(text, (size_t)len);
    cr_assert_not_null(root);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(files, file);
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(entry, "size");
    cr_assert(cJSON_IsNumber(sz), "%s: no size for %s", path, file);
    size = (uint64_t)sz->valuedouble;
    cJSON_Delete(root);
    free(text);
    return size;
}

/* Parse one header-only copy, with file_size 0 and with the Hub's real size. */
static void check_hub_head(const char *dir, const char *head)
{
    char path[1024], file[256];
    uint8_t *bytes;
    size_t n;
    st_header h;
    gm_status st;
    struct stat sb;

    cr_assert_lt((size_t)snprintf(path, sizeof path, "%s/%s", dir, head), sizeof path);
    snprintf(file, sizeof file, "%.*s", (int)(strlen(head) - strlen(".head")), head);
    cr_assert_eq(st_read_header_bytes(path, &bytes, &n, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(n, (size_t)sb.st_size, "%s: the copy is exactly 8 + N bytes", path);
    cr_assert_eq(st_header_parse(&h, bytes, n, 0, file, &st), GM_OK, "%s", st.msg);
    cr_assert_gt(h.n_tensors, 0);
    st_header_free(&h);
    cr_assert_eq(st_header_parse(&h, bytes, n, hub_file_size(dir, file), file, &st), GM_OK,
                 "%s: %s", path, st.msg);
    st_header_free(&h);
    free(bytes);
}

/* Every *.safetensors.head two levels under hub/ (org/name/); returns how many. */
static int check_hub_heads(void)
{
    int count = 0;
    DIR *orgs = opendir(HUB);
    struct dirent *org, *repo, *file;

    cr_assert_not_null(orgs);
    while ((org = readdir(orgs)) != NULL) {
        char org_dir[512];
        DIR *repos;
        if (org->d_name[0] == '.')
            continue;
        snprintf(org_dir, sizeof org_dir, HUB "/%s", org->d_name);
        if ((repos = opendir(org_dir)) == NULL)
            continue;
        while ((repo = readdir(repos)) != NULL) {
            char repo_dir[1024];
            DIR *files;
            if (repo->d_name[0] == '.')
                continue;
            snprintf(repo_dir, sizeof repo_dir, "%s/%s", org_dir, repo->d_name);
            if ((files = opendir(repo_dir)) == NULL)
                continue;
            while ((file = readdir(files)) != NULL) {
                size_t len = strlen(file->d_name), suffix = strlen(".safetensors.head");
                if (len > suffix && strcmp(file->d_name + len - suffix, ".safetensors.head") == 0) {
                    check_hub_head(repo_dir, file->d_name);
                    count++;
                }
            }
            closedir(files);
        }
        closedir(repos);
    }
    closedir(orgs);
    return count;
}

Test(safetensors_files, parses_every_hub_header_copy)
{
    cr_assert_eq(check_hub_heads(), 12);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *text;

    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    cr_assert_not_null(text = malloc(*len + 1));
    cr_assert_eq(fread(text, 1, *len, f), *len);
    text[*len] = '\0';
    fclose(f);
    return text;
}

Test(safetensors_files, lists_the_shards_of_hub_indexes)
{
    size_t len, n;
    char *text = slurp(HUB "/meta-llama/Meta-Llama-3-8B/model.safetensors.index.json", &len);
    char **shards;
    gm_status st;

    cr_assert_eq(st_index_shards(text, len, "index", &shards, &n, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(shards[0], "model-00001-of-00004.safetensors");
    cr_assert_str_eq(shards[3], "model-00004-of-00004.safetensors");
    st_free_names(shards, n);
    free(text);
    text = slurp(HUB "/mistralai/Mistral-7B-v0.3/model.safetensors.index.json", &len);
    cr_assert_eq(st_index_shards(text, len, "index", &shards, &n, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(n, 3);
    st_free_names(shards, n);
    free(text);
}

Test(safetensors_files, finds_each_tensor_of_the_sharded_model_in_its_shard)
{
    st_model *sharded, *single;
    gm_status st;
    const char *file;
    const st_tensor *t, *u;

    cr_assert_eq(st_model_open(&sharded, GOLDEN "/llama_untied_sharded", &st), GM_OK, "%s", st.msg);
    cr_assert_eq(st_model_open(&single, GOLDEN "/llama_untied", &st), GM_OK, "%s", st.msg);
    cr_assert_not_null(st_model_find(sharded, "model.embed_tokens.weight", &file));
    cr_assert_str_eq(file, "model-00001-of-00003.safetensors");
    cr_assert_not_null(st_model_find(sharded, "model.layers.1.mlp.up_proj.weight", &file));
    cr_assert_str_eq(file, "model-00002-of-00003.safetensors");
    cr_assert_not_null(st_model_find(sharded, "lm_head.weight", &file));
    cr_assert_str_eq(file, "model-00003-of-00003.safetensors");
    cr_assert_null(st_model_find(sharded, "model.layers.3.mlp.up_proj.weight", &file));
    // The same weights as llama_untied, byte for byte.
    cr_assert_not_null(t = st_model_find(single, "model.layers.2.self_attn.v_proj.weight", NULL));
    cr_assert_not_null(u = st_model_find(sharded, "model.layers.2.self_attn.v_proj.weight", NULL));
    cr_assert_eq(t->end - t->begin, u->end - u->begin);
    cr_assert_eq(memcmp(st_model_data(single, t), st_model_data(sharded, u), t->end - t->begin), 0);
    st_model_close(sharded);
    st_model_close(single);
}

/* ---------------------------------------------------------------------- */
/* index files */

static int shards_of(const char *json, char ***shards, size_t *n, gm_status *st)
{
    return st_index_shards(json, strlen(json), "index.json", shards, n, st);
}

static void expect_bad_index(const char *json, const char *fragment)
{
    char **shards = NULL;
    size_t n = 0;
    gm_status st;

    cr_assert_eq(shards_of(json, &shards, &n, &st), GM_EFORMAT, "accepted %s", json);
    cr_assert_null(shards);
    expect_message(&st, fragment);
}

Test(safetensors_index, lists_distinct_shards_sorted)
{
    char **shards;
    size_t n;
    gm_status st;

    cr_assert_eq(shards_of("{\"metadata\":{},\"weight_map\":{\"a\":\"b.safetensors\",\"c\":"
                           "\"a.safetensors\",\"d\":\"b.safetensors\"}}",
                           &shards, &n, &st),
                 GM_OK, "%s", st.msg);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(shards[0], "a.safetensors");
    cr_assert_str_eq(shards[1], "b.safetensors");
    st_free_names(shards, n);
}

Test(safetensors_index, rejects_shard_names_that_are_not_plain_files)
{
    expect_bad_index("{\"weight_map\":{\"a\":\"../x.safetensors\"}}",
                     "'../x.safetensors' is not a plain file name");
    expect_bad_index("{\"weight_map\":{\"a\":\"sub/x.safetensors\"}}", "is not a plain file name");
    expect_bad_index("{\"weight_map\":{\"a\":\"/etc/x.safetensors\"}}", "is not a plain file name");
    expect_bad_index("{\"weight_map\":{\"a\":\"x..safetensors\"}}", "is not a plain file name");
    expect_bad_index("{\"weight_map\":{\"a\":\"x.bin\"}}", "ending in '.safetensors'");
    expect_bad_index("{\"weight_map\":{\"a\":\".safetensors\"}}", "ending in '.safetensors'");
    expect_bad_index("{\"weight_map\":{\"a\":\"x\\n.safetensors\"}}", "control byte 0x0a");
    expect_bad_index("{\"weight_map\":{\"a\":\"x\\u007f.safetensors\"}}", "control byte 0x7f");
}

Test(safetensors_index, rejects_a_malformed_weight_map)
{
    expect_bad_index("{\"weight_map\":{\"a\":3}}", "weight_map entry 'a' is not a string");
    expect_bad_index("{\"weight_map\":[]}", "weight_map is missing or not an object");
    expect_bad_index("{\"metadata\":{}}", "weight_map is missing or not an object");
    expect_bad_index("{\"weight_map\":{}}", "weight_map is empty");
    expect_bad_index("{\"weight_map\":", "not a json object");
    /* more after the object: Python's json.load refuses it ("Extra data"), and so does the loader */
    expect_bad_index("{\"weight_map\":{\"a\":\"m.safetensors\"}}}}garbage",
                     "expected the end of the file after the JSON object at byte 36, found more");
}

/* ---------------------------------------------------------------------- */
/* model folders built in the test */

static char fixture_dir[64];

static void make_dir(void)
{
    strcpy(fixture_dir, "/tmp/gm_st_model_XXXXXX");
    cr_assert_not_null(mkdtemp(fixture_dir));
}

static void remove_dir(void)
{
    DIR *d = opendir(fixture_dir);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", fixture_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fixture_dir);
}

static void put_file(const char *name, const void *data, size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    cr_assert_not_null(f = fopen(path, "wb"));
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A safetensors file from a header and data bytes. */
static void put_safetensors(const char *name, const char *json, const void *data, size_t n)
{
    size_t len;
    uint8_t *buf = image(json, n, &len);

    if (n > 0)
        memcpy(buf + len - n, data, n);
    put_file(name, buf, len);
    free(buf);
}

static void put_text(const char *name, const char *text)
{
    put_file(name, text, strlen(text));
}

static int open_fixture(st_model **m, gm_status *st)
{
    return st_model_open(m, fixture_dir, st);
}

#define TWO_SHARDS()                                                                          \
    do {                                                                                      \
        put_safetensors("a.safetensors", "{" T("w1", "U8", "[2]", "0", "2") "}", "ab", 2);     \
        put_safetensors("b.safetensors", "{" T("w2", "U8", "[1]", "0", "1") "}", "c", 1);      \
    } while (0)

Test(safetensors_model, opens_shards_that_match_the_index, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;
    const char *file;

    TWO_SHARDS();
    put_text("model.safetensors.index.json",
             "{\"weight_map\":{\"w2\":\"b.safetensors\",\"w1\":\"a.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(st_model_n_tensors(m), 2);
    const st_tensor *t = st_model_find(m, "w2", &file);
    cr_assert_str_eq(file, "b.safetensors");
    cr_assert_eq(memcmp(st_model_data(m, t), "c", 1), 0);
    st_model_close(m);
}

Test(safetensors_model, rejects_index_tensor_missing_from_its_shard, .init = make_dir,
     .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    TWO_SHARDS();
    put_text("model.safetensors.index.json",
             "{\"weight_map\":{\"w1\":\"a.safetensors\",\"w2\":\"b.safetensors\","
             "\"w3\":\"b.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_EMISSING);
    cr_assert_null(m);
    cr_assert_str_eq(st.msg, "model.safetensors.index.json: tensor 'w3' is mapped to b.safetensors "
                             "but missing from it");
}

Test(safetensors_model, rejects_shard_tensor_absent_from_the_index, .init = make_dir,
     .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    TWO_SHARDS();
    put_text("model.safetensors.index.json", "{\"weight_map\":{\"w1\":\"a.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "b.safetensors is not named, so not opened: %s",
                 st.msg);
    st_model_close(m);
    put_safetensors("a.safetensors",
                    "{" T("w1", "U8", "[2]", "0", "2") "," T("extra", "U8", "[1]", "2", "3") "}",
                    "abc", 3);
    cr_assert_eq(open_fixture(&m, &st), GM_EFORMAT);
    cr_assert_str_eq(st.msg, "a.safetensors: tensor 'extra' is not in the weight_map of "
                             "model.safetensors.index.json");
}

Test(safetensors_model, rejects_tensor_mapped_to_another_shard, .init = make_dir,
     .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    TWO_SHARDS();
    put_safetensors("a.safetensors",
                    "{" T("w1", "U8", "[2]", "0", "2") "," T("w3", "U8", "[1]", "2", "3") "}",
                    "abc", 3);
    put_text("model.safetensors.index.json",
             "{\"weight_map\":{\"w1\":\"a.safetensors\",\"w2\":\"b.safetensors\","
             "\"w3\":\"b.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_EFORMAT);
    cr_assert_str_eq(st.msg, "model.safetensors.index.json: tensor 'w3' is mapped to b.safetensors "
                             "but found in a.safetensors");
}

Test(safetensors_model, rejects_tensor_in_two_shards, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    TWO_SHARDS();
    put_safetensors("b.safetensors",
                    "{" T("w1", "U8", "[2]", "0", "2") "," T("w2", "U8", "[1]", "2", "3") "}",
                    "abc", 3);
    put_text("model.safetensors.index.json",
             "{\"weight_map\":{\"w1\":\"a.safetensors\",\"w2\":\"b.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_EFORMAT);
    expect_message(&st, "tensor 'w1' is in both a.safetensors and b.safetensors");
}

Test(safetensors_model, rejects_a_missing_shard_file, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    TWO_SHARDS();
    put_text("model.safetensors.index.json",
             "{\"weight_map\":{\"w1\":\"a.safetensors\",\"w2\":\"c.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_EIO);
    expect_message(&st, "/c.safetensors: cannot open");
}

Test(safetensors_model, rejects_a_file_with_bytes_past_its_data, .init = make_dir,
     .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    put_safetensors("model.safetensors", "{" T("w", "U8", "[2]", "0", "2") "}", "abc", 3);
    cr_assert_eq(open_fixture(&m, &st), GM_EFORMAT);
    expect_message(&st, "model.safetensors: file is 67 bytes, expected 8 + 56 + 2 = 66");
    /* named with its folder: a program that opens several models can tell which one */
    cr_expect(strncmp(st.msg, fixture_dir, strlen(fixture_dir)) == 0, "%s", st.msg);
}

Test(safetensors_model, rejects_an_empty_file, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    put_text("model.safetensors", "");
    cr_assert_eq(open_fixture(&m, &st), GM_EFORMAT);
    expect_message(&st, "model.safetensors: header too small: 0 bytes");
}

/*
** A FIFO where a file belongs (a path mistyped, a test harness's pipe): each
** reader refuses it at once, with no writer to wait for. Criterion's timeout
** fails the test if one blocks in open or read instead.
*/
Test(safetensors_model, refuses_a_fifo_in_place_of_a_file_without_blocking, .init = make_dir,
     .fini = remove_dir, .timeout = 20)
{
    st_model *m;
    gm_status st;
    char path[512], *text;
    uint8_t *bytes;
    size_t n;

    snprintf(path, sizeof path, "%s/model.safetensors", fixture_dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_assert_eq(open_fixture(&m, &st), GM_EIO);
    expect_message(&st, "/model.safetensors: expected a regular file");
    cr_assert_eq(st_read_header_bytes(path, &bytes, &n, &st), GM_EIO);
    expect_message(&st, "/model.safetensors: expected a regular file");
    cr_assert_eq(gm_read_file(path, 1 << 20, &text, &n, &st), GM_EIO);
    expect_message(&st, "/model.safetensors: expected a regular file");
    cr_assert_null(text);
}

Test(safetensors_model, reports_a_folder_without_weights, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    cr_assert_eq(open_fixture(&m, &st), GM_EMISSING);
    expect_message(&st, "neither model.safetensors nor model.safetensors.index.json is present");
}

/* A cache snapshot whose blob was deleted: the link and where it pointed, not "not present". */
Test(safetensors_model, names_a_symlink_to_nothing_in_place_of_a_weights_file, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;
    char link[512];
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "model.q4nx"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(link, sizeof link, "%s/%s", fixture_dir, names[i]);
        cr_assert_eq(symlink("../../blobs/deleted", link), 0);
        cr_assert_eq(open_fixture(&m, &st), GM_EMISSING, "%s", names[i]);
        char want[600];
        snprintf(want, sizeof want, "%s: a symlink to ../../blobs/deleted, which is not there", link);
        cr_assert(strstr(st.msg, want) && strstr(st.msg, "fetch the repo again"), "%s", st.msg);
        unlink(link);
    }
    TWO_SHARDS(); /* and a shard the index names */
    put_text("model.safetensors.index.json", "{\"weight_map\":{\"w1\":\"a.safetensors\",\"w2\":\"b.safetensors\"}}");
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "%s", st.msg);
    st_model_close(m);
    snprintf(link, sizeof link, "%s/b.safetensors", fixture_dir);
    cr_assert_eq(unlink(link), 0);
    cr_assert_eq(symlink("gone", link), 0);
    cr_assert_eq(open_fixture(&m, &st), GM_EMISSING);
    cr_assert(strstr(st.msg, "/b.safetensors: a symlink to gone, which is not there"), "%s", st.msg);
}

Test(safetensors_model, prefers_the_single_file_over_an_index, .init = make_dir,
     .fini = remove_dir)
{
    st_model *m;
    gm_status st;

    put_safetensors("model.safetensors", "{" T("w", "U8", "[2]", "0", "2") "}", "ab", 2);
    put_text("model.safetensors.index.json", "not json");
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(st_model_n_tensors(m), 1);
    st_model_close(m);
}

/* ---------------------------------------------------------------------- */
/* loading as bf16 */

static uint16_t raw_u16(const st_model *m, const st_tensor *t, size_t i)
{
    uint16_t v;
    memcpy(&v, (const uint8_t *)st_model_data(m, t) + 2 * i, sizeof v);
    return v;
}

/* Load name transposed and straight, and compare both with the file's bytes. */
static void check_transpose(const st_model *m, const char *name, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    gm_bf16 *tr, *flat;
    gm_status st;
    const st_tensor *t = st_model_find(m, name, NULL);

    cr_assert_not_null(t);
    cr_assert_eq(gm_weights_load_tensor(m, name, 2, shape, 1, &tr, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(m, name, 2, shape, 0, &flat, &st), GM_OK, "%s", st.msg);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            uint16_t want = raw_u16(m, t, (size_t)(r * cols + c));
            cr_assert_eq(tr[c * rows + r], want, "%s[%lld][%lld]", name, (long long)r,
                         (long long)c);
            cr_assert_eq(flat[r * cols + c], want);
        }
    }
    free(tr);
    free(flat);
}

Test(safetensors_load, transposes_out_in_to_in_out_element_by_element)
{
    st_model *m;
    gm_status st;

    cr_assert_eq(st_model_open(&m, GOLDEN "/llama_untied", &st), GM_OK, "%s", st.msg);
    check_transpose(m, "model.layers.0.self_attn.q_proj.weight", 96, 96);
    check_transpose(m, "model.layers.0.self_attn.k_proj.weight", 32, 96);
    check_transpose(m, "model.layers.2.mlp.down_proj.weight", 96, 256);
    st_model_close(m);
    // Sizes that are not multiples of the tile: 263 x 64 and 16 x 64.
    cr_assert_eq(st_model_open(&m, GOLDEN "/mistral_untied", &st), GM_OK, "%s", st.msg);
    check_transpose(m, "lm_head.weight", 263, 64);
    check_transpose(m, "model.layers.0.self_attn.v_proj.weight", 16, 64);
    check_transpose(m, "model.layers.0.mlp.down_proj.weight", 64, 176);
    st_model_close(m);
}

Test(safetensors_load, loads_the_same_weights_from_shards)
{
    st_model *a, *b;
    gm_status st;
    int64_t shape[2] = {384, 96};
    gm_bf16 *x, *y;

    cr_assert_eq(st_model_open(&a, GOLDEN "/llama_untied", &st), GM_OK, "%s", st.msg);
    cr_assert_eq(st_model_open(&b, GOLDEN "/llama_untied_sharded", &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(a, "lm_head.weight", 2, shape, 1, &x, &st), GM_OK, "%s",
                 st.msg);
    cr_assert_eq(gm_weights_load_tensor(b, "lm_head.weight", 2, shape, 1, &y, &st), GM_OK, "%s",
                 st.msg);
    cr_assert_eq(memcmp(x, y, 384 * 96 * sizeof *x), 0);
    free(x);
    free(y);
    st_model_close(a);
    st_model_close(b);
}

Test(safetensors_load, rejects_a_wrong_shape_naming_file_and_tensor)
{
    st_model *m;
    gm_status st;
    gm_bf16 *out = (gm_bf16 *)1;
    int64_t shape[2] = {96, 96};

    cr_assert_eq(st_model_open(&m, GOLDEN "/llama_untied_sharded", &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(m, "model.layers.1.self_attn.k_proj.weight", 2, shape, 1, &out,
                                    &st), GM_ESHAPE);
    cr_assert_null(out);
    cr_assert_str_eq(st.msg, "model-00002-of-00003.safetensors: tensor "
                             "'model.layers.1.self_attn.k_proj.weight' has shape [32, 96], "
                             "expected [96, 96]");
    cr_assert_eq(gm_weights_load_tensor(m, "model.norm.weight", 2, shape, 0, &out, &st), GM_ESHAPE);
    expect_message(&st, "tensor 'model.norm.weight' has shape [96], expected [96, 96]");
    cr_assert_eq(gm_weights_load_tensor(m, "model.norm.weight", 1, shape, 1, &out, &st), GM_ESHAPE);
    expect_message(&st, "transposing needs rank 2");
    st_model_close(m);
}

Test(safetensors_load, reports_a_missing_tensor_with_the_folder)
{
    st_model *m;
    gm_status st;
    gm_bf16 *out;
    int64_t shape[1] = {96};

    cr_assert_eq(st_model_open(&m, GOLDEN "/qwen2_tied", &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(m, "lm_head.weight", 1, shape, 0, &out, &st), GM_EMISSING);
    cr_assert_str_eq(st.msg, GOLDEN "/qwen2_tied: tensor 'lm_head.weight' is missing");
    st_model_close(m);
}

Test(safetensors_load, rejects_a_non_float_dtype, .init = make_dir, .fini = remove_dir)
{
    st_model *m;
    gm_status st;
    gm_bf16 *out;
    int64_t shape[1] = {2};

    put_safetensors("model.safetensors", "{" T("ids", "I32", "[2]", "0", "8") "}",
                    "\1\0\0\0\2\0\0\0", 8);
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(m, "ids", 1, shape, 0, &out, &st), GM_EDTYPE);
    cr_assert_str_eq(st.msg, "model.safetensors: tensor 'ids' has dtype I32, expected BF16, F16 "
                             "or F32");
    st_model_close(m);
}

Test(safetensors_load, converts_f16_and_transposes, .init = make_dir, .fini = remove_dir)
{
    // 2 x 3 halves: 1, -2, 0.5 / 65504, 2^-24, inf; then a 1-byte pad tensor so the
    // F16 data starts at an odd address.
    static const uint16_t halves[6] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x7C00};
    uint8_t data[13];
    st_model *m;
    gm_status st;
    gm_bf16 *out;
    int64_t shape[2] = {2, 3};

    data[0] = 0xAA;
    memcpy(data + 1, halves, sizeof halves);
    put_safetensors("model.safetensors",
                    "{" T("a", "U8", "[1]", "0", "1") "," T("h", "F16", "[2, 3]", "1", "13") "}",
                    data, sizeof data);
    cr_assert_eq(open_fixture(&m, &st), GM_OK, "%s", st.msg);
    cr_assert_eq(gm_weights_load_tensor(m, "h", 2, shape, 1, &out, &st), GM_OK, "%s", st.msg);
    // (3, 2) row-major: column 0 of the file first.
    const gm_bf16 want[6] = {0x3F80, 0x4780 /* 65504 rounds to 65536 */,
                             0xC000, 0x3380 /* 2^-24 */,
                             0x3F00, 0x7F80};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], want[i], "element %d: 0x%04x", i, out[i]);
    free(out);
    st_model_close(m);
}

/* ---------------------------------------------------------------------- */
/* F32 -> bf16 on the golden checkpoint, checked with the sha256 in meta.json */

/* SHA-256 (FIPS 180-4), enough for hashing a loaded tensor in a test. */
typedef struct sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t fill;
    uint64_t bits;
} sha256;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha256_block(sha256 *s)
{
    uint32_t w[64], v[8];

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)s->block[4 * i] << 24 | (uint32_t)s->block[4 * i + 1] << 16 |
               (uint32_t)s->block[4 * i + 2] << 8 | s->block[4 * i + 3];
    for (int i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10));
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha256_k[i] + w[i];
        uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += v[i];
}

static void sha256_add(sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;

    for (size_t i = 0; i < n; i++) {
        s->block[s->fill++] = p[i];
        if (s->fill == 64) {
            sha256_block(s);
            s->fill = 0;
        }
    }
    s->bits += 8 * (uint64_t)n;
}

static void sha256_hex(const void *data, size_t n, char hex[65])
{
    sha256 s = {{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c,
                 0x1f83d9ab, 0x5be0cd19},
                {0},
                0,
                0};
    uint64_t bits;
    uint8_t len[8];

    sha256_add(&s, data, n);
    bits = s.bits;
    sha256_add(&s, "\x80", 1);
    while (s.fill != 56)
        sha256_add(&s, "", 1);
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_add(&s, len, 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s.h[i]);
}

Test(safetensors_load, hashes_a_known_string_with_the_test_sha256)
{
    char hex[65];

    sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(safetensors_load, rounds_the_f32_checkpoint_to_the_expected_bf16_bits)
{
    size_t len;
    char *text = slurp(GOLDEN "/llama_f32_checkpoint/golden/meta.json", &len);
    cJSON *meta = cJSON_ParseWithLength(text, len);
    const cJSON *hashes, *item;
    st_model *m;
    gm_status st;
    int checked = 0;

    cr_assert_not_null(meta);
    hashes = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "f32_checkpoint"), "bf16_sha256");
    cr_assert(cJSON_IsObject(hashes));
    cr_assert_eq(st_model_open(&m, GOLDEN "/llama_f32_checkpoint", &st), GM_OK, "%s", st.msg);
    cJSON_ArrayForEach(item, hashes) {
        const st_tensor *t = st_model_find(m, item->string, NULL);
        gm_bf16 *out;
        char hex[65];
        cr_assert_not_null(t, "%s", item->string);
        cr_assert_eq(gm_weights_load_tensor(m, t->name, t->rank, t->shape, 0, &out, &st), GM_OK, "%s",
                     st.msg);
        sha256_hex(out, (t->end - t->begin) / 2, hex);
        cr_expect_str_eq(hex, item->valuestring, "%s", item->string);
        free(out);
        checked++;
    }
    cr_assert_eq(checked, 21);
    st_model_close(m);
    cJSON_Delete(meta);
    free(text);
}

/* ---------------------------------------------------------------------- */
/* the arena loader (gm/weights.h) on a folder built here */

typedef struct fixture_weights {
    gm_bf16 *big, *small, *vec;
} fixture_weights;

Test(weights_load, loads_pieces_and_blocks_of_rows_bit_exact, .init = make_dir, .fini = remove_dir)
{
    /*
    ** big: 1100 rows of 8 KB, bf16, transposed: two pieces (the loader's
    ** pieces are about 8 MB of rows), each read in blocks of 256 rows, the
    ** last one short. small: f32, transposed and rounded. vec: bf16 as is.
    ** In every form: (out, in) as the file holds it, (in, out), and (in, out)
    ** in panels of 16 and 32 outputs (the last, 12 wide).
    */
    enum { BR = 1100, BC = 4096, SR = 300, SC = 24, VN = 1000 };
    const size_t big_bytes = 2u * BR * BC, small_bytes = 4u * SR * SC, vec_bytes = 2u * VN;
    uint8_t *data = malloc(big_bytes + small_bytes + vec_bytes);
    gm_bf16 *big = (gm_bf16 *)(void *)data, *vec = (gm_bf16 *)(void *)(data + big_bytes + small_bytes);
    float small[SR * SC];
    for (size_t i = 0; i < (size_t)BR * BC; i++)
        big[i] = (gm_bf16)(i * 2654435761u >> 9);
    for (int i = 0; i < SR * SC; i++)
        small[i] = (float)i * 0.37f - 100.0f;
    memcpy(data + big_bytes, small, small_bytes);
    for (int i = 0; i < VN; i++)
        vec[i] = (gm_bf16)(i * 40503u);
    char json[512];
    snprintf(json, sizeof json,
             "{\"big\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[0,%zu]},"
             "\"small\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]},"
             "\"vec\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}}",
             BR, BC, big_bytes, SR, SC, big_bytes, big_bytes + small_bytes, VN, big_bytes + small_bytes,
             big_bytes + small_bytes + vec_bytes);
    put_safetensors("model.safetensors", json, data, big_bytes + small_bytes + vec_bytes);

    const gm_tensor_spec specs[] = {
        {"big", 0, offsetof(fixture_weights, big), 2, {BR, BC}, 1, 0, 0, 0},
        {"small", 0, offsetof(fixture_weights, small), 2, {SR, SC}, 1, 0, 0, 0},
        {"vec", 0, offsetof(fixture_weights, vec), 1, {VN, 0}, 0, 0, 0, 0},
    };
    /* every placement (gm_place); the automatic one, which is one of the other two here, on 2 threads only */
    for (int place = GM_PLACE_AUTO; place <= GM_PLACE_ARENA; place++)
        for (int form = 0; form < GM_W_FORMS; form++)
            for (int threads = place == GM_PLACE_AUTO ? 2 : 1; threads <= (place == GM_PLACE_AUTO ? 2 : 3); threads++) {
                fixture_weights w = {0};
                gm_arena arena;
                const gm_weights_layout lay = {&w, NULL, 0, 0, &arena, (gm_wform)form, NULL};
                gm_weights_set_place((gm_place)place);
                const int copy = gm_weights_place_arena((gm_place)place, NULL);
                gm_status st = {0};
                cr_assert_eq(gm_weights_load(&lay, specs, 3, fixture_dir, threads, &st), GM_OK, "%s", st.msg);
                const int kn = form != GM_W_NK; /* held (in, out): row-major, or in panels of P outputs */
                const size_t P = form == GM_W_PANEL16 ? 16 : form == GM_W_PANEL32 ? 32 : 0;
                for (size_t r = 0; r < BR; r++)
                    for (size_t c = 0; c < BC; c++) {
                        const size_t p0 = P ? r / P * P : 0, pw = !P ? BR : BR - p0 < P ? BR - p0 : P;
                        if (w.big[kn ? p0 * BC + c * pw + r - p0 : r * BC + c] != big[r * BC + c])
                            cr_assert_fail("form %d, %d threads: big[%zu][%zu] differs from the file's 0x%04x", form,
                                           threads, r, c, big[r * BC + c]);
                    }
                for (size_t r = 0; r < SR; r++)
                    for (size_t c = 0; c < SC; c++) {
                        const size_t p0 = P ? r / P * P : 0, pw = !P ? SR : SR - p0 < P ? SR - p0 : P;
                        cr_assert_eq(w.small[kn ? p0 * SC + c * pw + r - p0 : r * SC + c],
                                     gm_f32_to_bf16(small[r * SC + c]), "form %d, %d threads: small[%zu][%zu]", form,
                                     threads, r, c);
                    }
                cr_assert_eq(memcmp(w.vec, vec, vec_bytes), 0, "%d threads: vec differs", threads);
                /*
                ** what the file holds as it is used stays in its mapping, or with
                ** a copy goes to the arena, each tensor on a line of its own; what
                ** is transformed always takes the arena
                */
                const char *lo = arena.base, *hi = lo + arena.size;
                const size_t want = (kn || copy ? (big_bytes + 63) / 64 * 64 : 0) + (SR * SC * 2 + 63) / 64 * 64 +
                                    (copy ? (vec_bytes + 63) / 64 * 64 : 0);
                cr_assert_eq(arena.size, want, "place %d, form %d: an arena of %zu bytes, expected %zu", place, form,
                             arena.size, want);
                const int vec_in = (const char *)w.vec >= lo && (const char *)w.vec < hi;
                const int big_in = (const char *)w.big >= lo && (const char *)w.big < hi;
                cr_assert_eq(vec_in, copy, "place %d: vec %s", place, vec_in ? "was copied" : "was not copied");
                cr_assert_eq(big_in, kn || copy, "place %d, form %d: big %s", place, form,
                             big_in ? "was copied" : "was not copied");
                cr_assert(!big_in || (uintptr_t)w.big % 64 == 0, "place %d: big at %p, not on a line", place,
                          (void *)w.big);
                gm_weights_free(&lay, specs, 3);
                cr_assert_null(w.big);
            }
    gm_weights_set_place(GM_PLACE_AUTO);
    free(data);
}

/* GM_PLACE_AUTO copies into the arena where the kernel gives anonymous memory huge pages, on its own word */
Test(weights_load, places_in_the_arena_where_huge_pages_are)
{
    cr_assert(gm_weights_place_arena(GM_PLACE_AUTO, "always [madvise] never\n"));
    cr_assert(gm_weights_place_arena(GM_PLACE_AUTO, "[always] madvise never\n"));
    cr_assert_not(gm_weights_place_arena(GM_PLACE_AUTO, "always madvise [never]\n"));
    cr_assert_not(gm_weights_place_arena(GM_PLACE_AUTO, "")); /* no such file: a kernel without them */
    cr_assert_not(gm_weights_place_arena(GM_PLACE_MAPPED, "always [madvise] never\n"));
    cr_assert(gm_weights_place_arena(GM_PLACE_ARENA, "always madvise [never]\n"));
}

/* gm/status.h: a NULL status is allowed: each entry point gives its code, and nothing is written through it */
Test(safetensors_status, a_null_status_gives_the_code_and_no_crash)
{
    const uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    st_header h;
    cr_expect_neq(st_header_parse(&h, huge, sizeof huge, 0, "x", NULL), GM_OK);
    st_model *m = NULL;
    cr_expect_neq(st_model_open(&m, "/nonexistent/gm-model", NULL), GM_OK);
    gm_npy a;
    cr_expect_neq(gm_npy_read("/nonexistent/gm.npy", &a, NULL), GM_OK);
    const int64_t bad[1] = {-1};
    const float f = 0;
    cr_expect_neq(gm_npy_write("/nonexistent/gm.npy", GM_NPY_F4, 1, bad, &f, NULL), GM_OK);
}

/*
** make_tiny_model OUT_DIR TOKENIZER_DIR: a tiny random-weight Qwen2 model with
** a real tokenizer's full vocabulary (151936 rows), so that phase0 can run the
** canonical prompt through a real tokenizer in the tests. Deterministic.
*/
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gm/bf16.h"
#include "gm/io.h"

enum { V = 151936, H = 64, F = 128, NH = 4, NKV = 2, HD = 16, L = 2 };

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float uniform(void) /* in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

typedef struct spec {
    char name[96];
    int rank;
    long shape[2];
    float scale; /* 0: a norm weight around 1 */
} spec;

static int add(spec *s, int n, const char *name, int rank, long a, long b, float scale)
{
    snprintf(s[n].name, sizeof s[n].name, "%s", name);
    s[n].rank = rank;
    s[n].shape[0] = a;
    s[n].shape[1] = b;
    s[n].scale = scale;
    return n + 1;
}

static int by_name(const void *a, const void *b) { return strcmp(((const spec *)a)->name, ((const spec *)b)->name); }

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_tiny_model OUT_DIR TOKENIZER_DIR\n");
        return 2;
    }
    const char *out = argv[1], *tok = argv[2];
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        perror(out);
        return 1;
    }
    spec s[64];
    int n = 0;
    n = add(s, n, "model.embed_tokens.weight", 2, V, H, 1.0f);
    n = add(s, n, "model.norm.weight", 1, H, 0, 0);
    for (int l = 0; l < L; l++) {
        char p[64];
#define T(suffix, rank, a, b, scale) (snprintf(p, sizeof p, "model.layers.%d.%s", l, suffix), n = add(s, n, p, rank, a, b, scale))
        T("input_layernorm.weight", 1, H, 0, 0);
        T("post_attention_layernorm.weight", 1, H, 0, 0);
        T("self_attn.q_proj.weight", 2, NH * HD, H, 0.2165f);
        T("self_attn.k_proj.weight", 2, NKV * HD, H, 0.2165f);
        T("self_attn.v_proj.weight", 2, NKV * HD, H, 0.2165f);
        T("self_attn.q_proj.bias", 1, NH * HD, 0, 0.2f);
        T("self_attn.k_proj.bias", 1, NKV * HD, 0, 0.2f);
        T("self_attn.v_proj.bias", 1, NKV * HD, 0, 0.2f);
        T("self_attn.o_proj.weight", 2, H, NH * HD, 0.2165f);
        T("mlp.gate_proj.weight", 2, F, H, 0.2165f);
        T("mlp.up_proj.weight", 2, F, H, 0.2165f);
        T("mlp.down_proj.weight", 2, H, F, 0.153f);
#undef T
    }
    qsort(s, (size_t)n, sizeof *s, by_name);

    /* the header: names in sorted order, packed offsets, padded with spaces to a multiple of 8 */
    size_t cap = 1 << 16, hl = 0, off = 0;
    char *hdr = malloc(cap);
    hl += (size_t)snprintf(hdr + hl, cap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        const size_t bytes = 2u * (size_t)s[i].shape[0] * (size_t)(s[i].rank == 2 ? s[i].shape[1] : 1);
        if (s[i].rank == 2)
            hl += (size_t)snprintf(hdr + hl, cap - hl, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%ld,%ld],\"data_offsets\":[%zu,%zu]}",
                                   s[i].name, s[i].shape[0], s[i].shape[1], off, off + bytes);
        else
            hl += (size_t)snprintf(hdr + hl, cap - hl, ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%ld],\"data_offsets\":[%zu,%zu]}",
                                   s[i].name, s[i].shape[0], off, off + bytes);
        off += bytes;
    }
    hdr[hl++] = '}';
    while (hl % 8)
        hdr[hl++] = ' ';
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    FILE *f = fopen(path, "wb");
    const uint64_t len = hl;
    if (!f || fwrite(&len, 8, 1, f) != 1 || fwrite(hdr, 1, hl, f) != hl) {
        perror(path);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const size_t count = (size_t)s[i].shape[0] * (size_t)(s[i].rank == 2 ? s[i].shape[1] : 1);
        for (size_t k = 0; k < count; k++) {
            const float v = s[i].scale == 0 ? 1.0f + 0.1f * uniform() : s[i].scale * uniform();
            const gm_bf16 b = gm_f32_to_bf16(v);
            fwrite(&b, 2, 1, f);
        }
    }
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }
    free(hdr);

    static const char config[] =
        "{\n  \"architectures\": [\"Qwen2ForCausalLM\"],\n  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151645,\n"
        "  \"hidden_act\": \"silu\",\n  \"hidden_size\": 64,\n  \"intermediate_size\": 128,\n"
        "  \"max_position_embeddings\": 4096,\n  \"model_type\": \"qwen2\",\n  \"num_attention_heads\": 4,\n"
        "  \"num_hidden_layers\": 2,\n  \"num_key_value_heads\": 2,\n  \"rms_norm_eps\": 1e-06,\n"
        "  \"rope_theta\": 1000000.0,\n  \"sliding_window\": 4096,\n  \"tie_word_embeddings\": true,\n"
        "  \"torch_dtype\": \"bfloat16\",\n  \"use_sliding_window\": false,\n  \"vocab_size\": 151936\n}\n";
    gm_status st = {0};
    snprintf(path, sizeof path, "%s/config.json", out);
    if (gm_write_file(path, config, strlen(config), &st))
        goto fail;
    const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[4096], *data = NULL;
        size_t dlen = 0;
        snprintf(src, sizeof src, "%s/%s", tok, files[i]);
        snprintf(path, sizeof path, "%s/%s", out, files[i]);
        if (gm_read_file(src, 64u << 20, &data, &dlen, &st) || gm_write_file(path, data, dlen, &st))
            goto fail;
        free(data);
    }
    return 0;
fail:
    fprintf(stderr, "make_tiny_model: %s\n", st.msg);
    return 1;
}

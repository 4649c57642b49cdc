/*
** mlir-air's NPU capture as a candidate: the file `verify_runner.py
** --gate-phase capture-npu --gate-file F` writes, a JSON object with one
** member per prompt, keyed by the prompt's index in the prompts file ("0",
** "1", ...), each {"chosen": [the step's chosen id, ...], "topk": [[its top-k
** ids, best first], ...]}. Read here into arrays, every field checked: what
** does not hold is one line naming the file and the field.
*/
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>


void vf_gate_file_free(vf_gate_file *g)
{
    for (int i = 0; g->p && i < g->n; i++) {
        free(g->p[i].chosen);
        free(g->p[i].topk);
    }
    free(g->p);
    memset(g, 0, sizeof *g);
}

/* v, an id of a vocabulary of `vocab`, into *out; else one line naming path and `field` */
static int id_of(const cJSON *v, int vocab, int32_t *out, const char *path, const char *field, gm_status *st)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble >= vocab)
        return gm_fail(st, GM_EFORMAT, "%s: %s: expected a token id in [0, %d), found %s", path, field, vocab,
                       !cJSON_IsNumber(v) ? "something else"
                       : v->valuedouble != floor(v->valuedouble) ? "a number that is not a whole one"
                                                                 : "a number outside it");
    *out = (int32_t)v->valuedouble;
    return 0;
}

/* prompt `key`: its chosen ids and top-k rows (each row's first VF_GATE_K ids) */
static int read_prompt(const cJSON *o, const char *key, int vocab, vf_gate_prompt *p, const char *path, gm_status *st)
{
    char field[96];
    const cJSON *chosen = cJSON_GetObjectItemCaseSensitive(o, "chosen");
    const cJSON *topk = cJSON_GetObjectItemCaseSensitive(o, "topk");
    if (!cJSON_IsObject(o))
        return gm_fail(st, GM_EFORMAT, "%s: \"%s\": expected an object with chosen and topk", path, key);
    if (!cJSON_IsArray(chosen) || !cJSON_IsArray(topk))
        return gm_fail(st, GM_EFORMAT, "%s: \"%s\".%s: expected a list", path, key,
                       cJSON_IsArray(chosen) ? "topk" : "chosen");
    p->steps = cJSON_GetArraySize(chosen);
    if (cJSON_GetArraySize(topk) != p->steps)
        return gm_fail(st, GM_EFORMAT, "%s: \"%s\": expected a top-k row for each chosen id, found %d chosen ids and "
                       "%d topk rows", path, key, p->steps, cJSON_GetArraySize(topk));
    p->chosen = malloc(sizeof *p->chosen * (size_t)(p->steps ? p->steps : 1));
    p->topk = malloc(sizeof *p->topk * (size_t)(p->steps ? p->steps : 1) * VF_GATE_K);
    if (!p->chosen || !p->topk)
        return gm_fail(st, GM_ENOMEM, "out of memory");
    for (int s = 0; s < p->steps; s++) {
        snprintf(field, sizeof field, "\"%s\".chosen[%d]", key, s);
        if (id_of(cJSON_GetArrayItem(chosen, s), vocab, &p->chosen[s], path, field, st))
            return st->code;
        const cJSON *row = cJSON_GetArrayItem(topk, s);
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) < VF_GATE_K)
            return gm_fail(st, GM_EFORMAT, "%s: \"%s\".topk[%d]: expected a row of at least %d ids (their k), found %s%d",
                           path, key, s, VF_GATE_K, cJSON_IsArray(row) ? "" : "no list, ",
                           cJSON_IsArray(row) ? cJSON_GetArraySize(row) : 0);
        for (int k = 0; k < VF_GATE_K; k++) {
            snprintf(field, sizeof field, "\"%s\".topk[%d][%d]", key, s, k);
            if (id_of(cJSON_GetArrayItem(row, k), vocab, &p->topk[(size_t)s * VF_GATE_K + k], path, field, st))
                return st->code;
        }
        const int rep = vf_first_repeat(p->topk + (size_t)s * VF_GATE_K, VF_GATE_K);
        if (rep >= 0)
            return gm_fail(st, GM_EFORMAT, "%s: \"%s\".topk[%d]: expected %d different ids, found %d twice", path, key,
                           s, VF_GATE_K, p->topk[(size_t)s * VF_GATE_K + rep]);
    }
    return 0;
}

int vf_gate_file_read(const char *path, int n, int at_least, int vocab, vf_gate_file *g, gm_status *st)
{
    char key[16];
    memset(g, 0, sizeof *g);
    cJSON *j = vf_read_json(path, 256u << 20, st);
    if (!j)
        return st->code;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return gm_fail(st, GM_EFORMAT, "%s: expected a JSON object of prompts \"0\", \"1\", ... (as verify_runner.py "
                       "--gate-phase capture-npu writes), found another JSON value", path);
    }
    const int found = cJSON_GetArraySize(j);
    if (at_least ? found < n : found != n) {
        cJSON_Delete(j);
        return gm_fail(st, GM_EFORMAT, "%s: prompts: expected %s%d (the reference's%s), found %d", path,
                       at_least ? "at least " : "", n, at_least ? ", cut by --max-prompts" : "", found);
    }
    if (!(g->p = calloc((size_t)(n ? n : 1), sizeof *g->p))) {
        cJSON_Delete(j);
        return gm_fail(st, GM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%d", i);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, key);
        g->n = i + 1;
        if (!o) {
            gm_fail(st, GM_EFORMAT, "%s: \"%s\": missing (the reference's prompt %d of %d, in the prompts file's order)",
                    path, key, i, n);
            break;
        }
        if (read_prompt(o, key, vocab, &g->p[i], path, st))
            break;
    }
    cJSON_Delete(j);
    if (st->code)
        vf_gate_file_free(g);
    return st->code;
}

/*
** gen-model regen and gen-model preview: a template or generator change reviewed as the diff of
** every model it touches.
**
**   regen    every models/<id>/ (or those named) from its own snapshot/: rewritten where its
**            files differ from a fresh generation, or, with --check, the diff printed and exit 1
**   preview  each SOURCE rendered with the built-in templates and with DIR's, the diff between
**            the two per model, then a summary; a refused source is listed, not fatal
*/
#include "review.h"

#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "diff.h"
#include "gm/cli.h"
#include "gm/io.h"
#include "gm/lock.h"
#include "output.h"
#include "source.h"

static const char regen_usage[] =
    "usage: gen-model regen [ID...] [--check] [--models DIR] [--templates DIR] [--verbose]\n"
    "\n"
    "Regenerate every DIR/<id>/ (or the ids named) from its own snapshot/, offline, and\n"
    "print one line per model: unchanged, or the files rewritten. A model whose files all\n"
    "match is not touched; one that differs is rewritten atomically, as a scaffold is.\n"
    "The living documents TODO.md and docs/development_progress/progress.md are kept as\n"
    "they are (written only when missing).\n"
    "\n"
    "options:\n"
    "  -c, --check          write nothing: print the unified diff of what would change and\n"
    "                       exit 1 when anything would (for CI and a pre-commit hook)\n"
    "  -m, --models DIR     the folder holding the models (default: models)\n"
    "      --templates DIR  render with the templates in DIR instead of the built-in ones\n"
    "  -v, --verbose        a Lua traceback with internal errors\n"
    "  -h, --help           this text\n"
    "\n"
    "exit status: 0 every model matches its snapshot (or was rewritten to); 1 a model would\n"
    "change (--check) or its snapshot is bad input; 2 usage; 4 file system error;\n"
    "70 internal error (a template or generator bug); 130 interrupted\n";

static const char preview_usage[] =
    "usage: gen-model preview --templates DIR SOURCE... [--revision REV] [--verbose]\n"
    "\n"
    "Render each SOURCE with the built-in templates and with DIR's, and print the unified\n"
    "diff between the two per model, then a summary: how many models change and which\n"
    "files, and which sources were refused. Nothing is written under models/.\n"
    "\n"
    "SOURCE      a model folder (config.json and safetensors files or their headers, as\n"
    "            models/<id>/snapshot/), a Hub repo id ORG/NAME (fetched as gen-model does:\n"
    "            kilobytes), or a folder of model folders at any depth up to 3, such as\n"
    "            ../shared/hub or models/\n"
    "\n"
    "options:\n"
    "      --templates DIR  the templates to preview (required): a copy of templates/ edited\n"
    "  -R, --revision REV   a branch, tag or commit of each Hub repo id (default: main)\n"
    "  -v, --verbose        a Lua traceback with internal errors\n"
    "  -h, --help           this text\n"
    "\n"
    "exit status: 0 every source was rendered or refused (whether or not anything changes);\n"
    "else the status of the first source that failed (1 bad input, 5 network or Hub error,\n"
    "70 a template of DIR or the generator failed), after the summary; 2 usage; 130 interrupted\n";

/* ---------------------------------------------------------------------- */
/* small helpers */

typedef struct strlist {
    char **v;
    size_t n, cap;
} strlist;

static void push(strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(strlist *l, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    if (s)
        l->v[l->n++] = s;
}

static int contains(const strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return 1;
    return 0;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Sorted names of the entries of dir that are folders, without the hidden ones. */
static void subdirs(const char *dir, strlist *out)
{
    DIR *d = opendir(dir);
    char path[PATH_MAX];
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path &&
            is_dir(path))
            push(out, "%s", e->d_name);
    closedir(d);
    if (out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
}

/* "a/" + path (relative), for diff labels a patch tool applies from where gen-model ran: no "." or empty parts. */
static void label(char *out, size_t size, const char *side, const char *path)
{
    size_t n = (size_t)snprintf(out, size, "%s", side);
    for (const char *p = path; *p && n < size;) {
        while (*p == '/')
            p++;
        const size_t k = strcspn(p, "/");
        if (k && !(k == 1 && p[0] == '.'))
            n += (size_t)snprintf(out + n, size - n, "/%.*s", (int)k, p);
        p += k;
    }
}

/* What follows dir/ in path ("" for dir itself), or NULL when path is not in dir. */
static const char *inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 0 && dir[n - 1] == '/')
        n--;
    if (strncmp(path, dir, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        return NULL;
    return path + n + (path[n] == '/');
}

/*
** The folder of models as the diff labels name it: relative to the working folder, so that a label
** is a path to open (and to patch) from where gen-model ran, whichever way --models was given. A
** relative one as it is; an absolute one in the working folder ($PWD/models) as the relative one
** would be (models), one elsewhere as the way there (../other/models). Malloc'd, or NULL.
*/
static char *label_base(const char *models)
{
    char cwd[PATH_MAX];
    const char *pwd = getenv("PWD"), *rest;
    struct stat a, b;
    if (models[0] != '/' || !getcwd(cwd, sizeof cwd))
        return strdup(models);
    if ((pwd && pwd[0] == '/' && stat(pwd, &a) == 0 && stat(".", &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino && (rest = inside(models, pwd))) || /* $PWD: as the shell names it, through links */
        (rest = inside(models, cwd)))
        return strdup(rest);
    char *real = realpath(models, NULL), *out = NULL;
    if (!real)
        return strdup(models);
    if ((rest = inside(real, cwd))) {
        out = strdup(rest);
    } else { /* up from the working folder to the one both are in, then down */
        size_t common = 0, i = 0, ups = 0;
        for (; cwd[i] && cwd[i] == real[i]; i++)
            if (cwd[i] == '/')
                common = i;
        if (cwd[i] == '/' && real[i] == '\0')
            common = i;
        for (const char *p = cwd + common; *p; p++)
            ups += *p == '/';
        const char *down = real + common + (real[common] == '/');
        if ((out = malloc(3 * ups + strlen(down) + 1)) != NULL) {
            out[0] = '\0';
            for (size_t u = 0; u < ups; u++)
                strcat(out, "../");
            strcat(out, down);
        }
    }
    free(real);
    return out;
}

/*
** The whole of a plain file, or NULL (with *exists saying whether anything is at path, and *size its
** size when it is a plain file larger than any gen-model writes, GM_GEN_FILE_MAX: not read, else 0).
*/
static char *read_old(const char *path, size_t *len, int *exists, long long *size, gm_status *st)
{
    struct stat sb;
    char *text = NULL;
    *exists = lstat(path, &sb) == 0;
    *size = *exists && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > GM_GEN_FILE_MAX ? (long long)sb.st_size : 0;
    if (!*exists || !S_ISREG(sb.st_mode) || *size)
        return NULL;
    if (gm_read_file(path, GM_GEN_FILE_MAX, &text, len, st))
        return NULL;
    return text;
}

/* ---------------------------------------------------------------------- */
/* regen */

typedef struct regen_run {
    const char *models; /* the folder of models */
    char *shown;        /* models as diff labels name it (label_base) */
    int check;
    gm_gen_options opt;
    gm_sources src;
    int n_models, n_changed, first_error;
    strlist stale; /* the ids that differ */
} regen_run;

/* Every file under dir/rel (a model folder), relative to the model folder, into out. */
static void walk_files(const char *dir, const char *rel, int depth, strlist *out)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    strlist names = {0};
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            push(&names, "%s", e->d_name);
    closedir(d);
    if (names.n)
        qsort(names.v, names.n, sizeof *names.v, cmp_str);
    for (size_t i = 0; i < names.n; i++) {
        char sub[PATH_MAX], full[PATH_MAX + 300];
        struct stat sb;
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", names.v[i]);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        if (lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode) && depth < 8)
            walk_files(dir, sub, depth + 1, out);
        else
            push(out, "%s", sub);
    }
    strlist_free(&names);
}

/*
** One path of models/<id>/ compared with what regeneration makes of it (new NULL: nothing, the
** swap removes it). Prints its diff in check mode; adds its name to changed when it differs.
*/
static int compare(regen_run *r, const char *folder, const char *rel, const char *text, size_t len,
                   strlist *changed, gm_status *st)
{
    char path[PATH_MAX], shown[2 * PATH_MAX], la[2 * PATH_MAX + 8], lb[2 * PATH_MAX + 8];
    size_t old_len = 0;
    long long big;
    int exists;
    snprintf(path, sizeof path, "%s/%s", folder, rel);
    char *old = read_old(path, &old_len, &exists, &big, st);
    if (st->code) {
        free(old);
        return st->code;
    }
    int differs = 0;
    if (exists && !old && text && !gm_model_file_ours(path, rel)) { /* the user's: regen refuses it, so does --check */
        free(old);
        return gm_model_file_refuse(path, rel, st);
    }
    if (big) { /* no file gen-model wrote (it writes none this large), but one with its mark: the swap replaces it */
        differs = 1;
        if (r->check)
            printf("%s: %s is %lld bytes, more than gen-model writes (at most %u); its diff is not shown\n", path, rel,
                   big, GM_GEN_FILE_MAX);
    } else if (exists && !old) { /* a folder, a link or another special file where text belongs: the swap replaces it */
        differs = 1;
        if (r->check)
            printf("%s: %s is not a plain file%s\n", path, rel, text ? "" : " and is not generated");
    } else if (!r->check) {
        differs = (old == NULL) != (text == NULL) || (old && (old_len != len || memcmp(old, text, len) != 0));
    } else {
        snprintf(shown, sizeof shown, "%s/%s", r->shown, path + strlen(r->models)); /* path is models/<id>/rel */
        label(la, sizeof la, "a", shown);
        label(lb, sizeof lb, "b", shown);
        differs = gm_diff_print(stdout, old ? la : "/dev/null", old, old_len, text ? lb : "/dev/null", text, len, st);
        if (differs < 0) {
            free(old);
            return st->code;
        }
    }
    free(old);
    if (differs)
        push(changed, "%s%s", rel, text ? (exists ? "" : " (new)") : " (removed)");
    return 0;
}

/* Regenerate (or check) DIR/id; 0, or st says why it could not be. */
static int regen_one(regen_run *r, const char *id, gm_status *st)
{
    char folder[PATH_MAX], snapdir[PATH_MAX + 16];
    gm_snapshot snap = {0};
    gm_gen_result res = {0};
    gm_gen_options opt = r->opt;
    gm_snapshot_file *sf = NULL;
    size_t n_sf = 0;
    strlist changed = {0}, expected = {0}, present = {0};
    int from_hub;
    snprintf(folder, sizeof folder, "%s/%s", r->models, id);
    snprintf(snapdir, sizeof snapdir, "%s/snapshot", folder);
    if (gm_source_read(&r->src, snapdir, NULL, &opt, &snap, &from_hub, st))
        goto out;
    opt.name = snap.name;
    if (gm_generate(&snap, &opt, &res, st))
        goto out;
    if (strcmp(res.id, id) != 0) {
        gm_fail(st, GM_EFORMAT, "%s: it makes model '%s', not '%s' (the id comes from source.json's name, else "
                "its repo); rename the folder or scaffold it again with --name %s", snapdir, res.id, id, id);
        goto out;
    }
    for (size_t i = 0; i < res.n_files; i++) {
        const gm_gen_file *f = &res.files[i];
        char path[PATH_MAX + 300];
        struct stat sb;
        push(&expected, "%s", f->path);
        snprintf(path, sizeof path, "%s/%s", folder, f->path);
        if (f->keep && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            continue; /* a living document: kept as it is */
        if (compare(r, folder, f->path, f->text, f->len, &changed, st))
            goto out;
    }
    if (gm_snapshot_files(&snap, &sf, &n_sf, st))
        goto out;
    for (size_t i = 0; i < n_sf; i++) {
        push(&expected, "snapshot/%s", sf[i].name);
        if (compare(r, folder, expected.v[expected.n - 1], sf[i].data, sf[i].len, &changed, st))
            goto out;
    }
    walk_files(folder, "", 0, &present);
    for (size_t i = 0; i < present.n; i++) { /* a file no longer generated goes; the user's own stay (output.h) */
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", folder, present.v[i]);
        if (!contains(&expected, present.v[i]) && gm_model_file_ours(path, present.v[i]) &&
            compare(r, folder, present.v[i], NULL, 0, &changed, st))
            goto out;
    }

    r->n_models++;
    if (changed.n == 0) {
        printf("%s: unchanged\n", folder);
        goto out;
    }
    r->n_changed++;
    push(&r->stale, "%s", id);
    if (!r->check && gm_write_model(r->models, &res, &snap, st))
        goto out;
    printf("%s: %s ", folder, r->check ? "would change" : "rewrote");
    for (size_t i = 0; i < changed.n; i++)
        printf("%s%s", i ? ", " : "", changed.v[i]);
    printf("\n");
out:
    strlist_free(&changed);
    strlist_free(&expected);
    strlist_free(&present);
    gm_snapshot_files_free(sf, n_sf);
    gm_gen_result_free(&res);
    gm_snapshot_free(&snap);
    return st->code;
}

int gm_regen_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"check", no_argument, 0, 'c'},   {"models", required_argument, 0, 'm'},
        {"templates", required_argument, 0, 'T'}, {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},    {0, 0, 0, 0}};
    regen_run r = {.models = "models"};
    gm_status st = {0};
    int c;
    while ((c = getopt_long(argc, argv, ":cm:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': r.check = 1; break;
        case 'm': r.models = optarg; break;
        case 'T': r.opt.templates_dir = optarg; break;
        case 'v': r.opt.verbose = 1; break;
        case 'h': fputs(regen_usage, stdout); return GM_EXIT_OK;
        default: gm_cli_bad_option("gen-model regen", c, argv); return GM_EXIT_USAGE;
        }
    }
    if (!is_dir(r.models)) {
        fprintf(stderr, "gen-model: regen: --models %s: expected a folder of models/<id>/ folders, found none\n",
                r.models);
        return GM_EXIT_USAGE;
    }
    if (r.opt.templates_dir && gm_templates_check(r.opt.templates_dir, &st)) {
        fprintf(stderr, "gen-model: regen: --templates: %s\n", st.msg);
        return GM_EXIT_USAGE;
    }
    strlist ids = {0};
    char path[PATH_MAX];
    if (optind < argc) {
        for (int i = optind; i < argc; i++) {
            /* a folder name is accepted too: regen models/qwen2_1_5b/ */
            const char *id = argv[i], *slash;
            char buf[256];
            while ((slash = strrchr(id, '/')) && slash[1] == '\0' && slash > id) {
                snprintf(buf, sizeof buf, "%.*s", (int)(slash - id), id);
                id = buf;
            }
            if ((slash = strrchr(id, '/'))) {
                /* a path names its folder: one that is not under --models would be checked in --models' stead */
                char parent[PATH_MAX], *in = NULL, *of = realpath(r.models, NULL);
                snprintf(parent, sizeof parent, "%.*s", slash == id ? 1 : (int)(slash - id), id);
                const int elsewhere = (in = realpath(parent, NULL)) && of && strcmp(in, of) != 0;
                free(in);
                free(of);
                if (elsewhere) {
                    fprintf(stderr, "gen-model: regen: %s: not under --models %s; give --models %s\n", argv[i],
                            r.models, parent);
                    strlist_free(&ids);
                    return GM_EXIT_USAGE;
                }
                id = slash + 1;
            }
            snprintf(path, sizeof path, "%s/%s/snapshot", r.models, id);
            if (!gm_model_id_valid(id) || !is_dir(path)) {
                fprintf(stderr, "gen-model: regen: %s: expected the id of a model folder with a snapshot/ "
                        "(%s/<id>/snapshot/), found none\n", argv[i], r.models);
                strlist_free(&ids);
                return GM_EXIT_USAGE;
            }
            if (!contains(&ids, id))
                push(&ids, "%s", id);
        }
    } else {
        strlist all = {0};
        subdirs(r.models, &all);
        for (size_t i = 0; i < all.n; i++) {
            snprintf(path, sizeof path, "%s/%s/snapshot", r.models, all.v[i]);
            if (is_dir(path))
                push(&ids, "%s", all.v[i]);
        }
        strlist_free(&all);
        if (ids.n == 0) {
            fprintf(stderr, "gen-model: regen: %s: expected models/<id>/snapshot/ folders, found none\n", r.models);
            return GM_EXIT_USAGE;
        }
    }
    if (!(r.shown = label_base(r.models)) || gm_command_start()) {
        if (!r.shown)
            fprintf(stderr, "gen-model: regen: out of memory\n");
        free(r.shown);
        strlist_free(&ids);
        return GM_EXIT_INTERNAL;
    }
    for (size_t i = 0; i < ids.n && !gm_interrupted(); i++) {
        gm_status one = {0};
        if (regen_one(&r, ids.v[i], &one)) {
            /* named by the model folder, unless the message starts with a path in it already */
            char folder[4096];
            const int n = snprintf(folder, sizeof folder, "%s/%s", r.models, ids.v[i]);
            if (n > 0 && (size_t)n < sizeof folder && !strncmp(one.msg, folder, (size_t)n) &&
                (one.msg[n] == '/' || one.msg[n] == ':'))
                fprintf(stderr, "gen-model: %s\n", one.msg);
            else
                fprintf(stderr, "gen-model: %s/%s: %s\n", r.models, ids.v[i], one.msg);
            if (!r.first_error)
                r.first_error = gm_exit_code(one.code);
        }
        fflush(stdout);
    }
    int rc = r.first_error;
    if (gm_interrupted()) {
        fprintf(stderr, "gen-model: regen: interrupted; every model folder is as it was or wholly rewritten\n");
        rc = GM_EXIT_INTERRUPTED;
    } else if (r.check && r.n_changed) {
        fprintf(stderr, "gen-model: regen --check: %d of %zu model%s would change; to fix run: gen-model regen",
                r.n_changed, ids.n, ids.n == 1 ? "" : "s");
        if (strcmp(r.models, "models") != 0)
            fprintf(stderr, " --models %s", r.models);
        if (r.opt.templates_dir)
            fprintf(stderr, " --templates %s", r.opt.templates_dir);
        for (size_t i = 0; r.stale.n < ids.n && i < r.stale.n; i++)
            fprintf(stderr, " %s", r.stale.v[i]);
        fprintf(stderr, "\n");
        if (!rc)
            rc = GM_EXIT_INPUT;
    } else if (!rc) {
        printf("gen-model: regen: %zu model%s under %s/ %s %s\n", ids.n, ids.n == 1 ? "" : "s", r.models,
               r.n_changed && !r.check ? (ids.n == 1 ? "now matches" : "now match") : (ids.n == 1 ? "matches" : "match"),
               ids.n == 1 ? "its snapshot" : "their snapshots");
    }
    strlist_free(&ids);
    strlist_free(&r.stale);
    free(r.shown);
    gm_sources_free(&r.src);
    gm_command_end();
    return rc;
}

/* ---------------------------------------------------------------------- */
/* preview */

typedef struct preview_run {
    gm_gen_options base, with; /* the built-in templates, DIR's */
    gm_sources src;
    int n_models, first_error;
    int n_fetched; /* Hub repo ids read (rendered or refused): the transfer summary is theirs */
    strlist changes, refused, failed;
} preview_run;

/* A failed source: listed now and in the summary; the first failure's status is the exit status. */
/* msg without its leading "source: ", which the lines below put first themselves */
static const char *after_source(const char *msg, const char *source)
{
    const size_t n = strlen(source);
    return strncmp(msg, source, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg;
}

static void preview_failed(preview_run *p, const char *source, const char *what, const gm_status *st)
{
    const char *msg = after_source(st->msg, source);
    printf("preview: %s: %s%s\n", source, what, msg);
    push(&p->failed, "%s: %s%s", source, what, msg);
    if (!p->first_error)
        p->first_error = gm_exit_code(st->code);
}

/* The file of r at path, or NULL. */
static const gm_gen_file *file_of(const gm_gen_result *r, const char *path)
{
    for (size_t i = 0; i < r->n_files; i++)
        if (strcmp(r->files[i].path, path) == 0)
            return &r->files[i];
    return NULL;
}

static void preview_one(preview_run *p, const char *source)
{
    gm_status st = {0};
    gm_snapshot snap = {0};
    gm_gen_result a = {0}, b = {0};
    gm_gen_options base = p->base, with = p->with;
    int from_hub;
    if (gm_source_read(&p->src, source, NULL, &base, &snap, &from_hub, &st) == 0) {
        base.name = snap.name;
        gm_generate(&snap, &base, &a, &st);
        p->n_fetched += from_hub;
    } else if (st.code == GM_EUNSUPPORTED) {
        p->n_fetched += from_hub; /* its config.json came, and said no */
    }
    if (st.code) {
        if (st.code == GM_EUNSUPPORTED) {
            printf("preview: %s: refused: %s\n", source, after_source(st.msg, source));
            push(&p->refused, "%s: %s", source, after_source(st.msg, source));
        } else {
            preview_failed(p, source, "", &st);
        }
        goto out;
    }
    with.name = snap.name;
    if (gm_generate(&snap, &with, &b, &st)) {
        preview_failed(p, source, "with the templates of --templates: ", &st);
        goto out;
    }
    p->n_models++;
    /* the files that differ, named first, then their diffs */
    strlist changed = {0};
    for (size_t i = 0; i < a.n_files + b.n_files; i++) {
        const gm_gen_file *fa = i < a.n_files ? &a.files[i] : file_of(&a, b.files[i - a.n_files].path);
        const gm_gen_file *fb = i < a.n_files ? file_of(&b, a.files[i].path) : &b.files[i - a.n_files];
        if (i >= a.n_files && fa)
            continue; /* in both: seen above */
        if (!fa || !fb || fa->len != fb->len || memcmp(fa->text, fb->text, fa->len) != 0)
            push(&changed, "%s", (fa ? fa : fb)->path);
    }
    if (changed.n == 0) {
        printf("preview: %s (%s): unchanged\n", a.id, source);
    } else {
        char files[2048] = "";
        size_t used = 0;
        for (size_t i = 0; i < changed.n && used < sizeof files; i++)
            used += (size_t)snprintf(files + used, sizeof files - used, "%s%s", i ? ", " : "", changed.v[i]);
        printf("preview: %s (%s): %zu file%s change%s: %s\n", a.id, source, changed.n, changed.n == 1 ? "" : "s",
               changed.n == 1 ? "s" : "", files);
        push(&p->changes, "%s (%s): %s", a.id, source, files);
        for (size_t i = 0; i < changed.n; i++) {
            const gm_gen_file *fa = file_of(&a, changed.v[i]), *fb = file_of(&b, changed.v[i]);
            char la[PATH_MAX], lb[PATH_MAX];
            snprintf(la, sizeof la, "a/%s/%s", a.id, changed.v[i]);
            snprintf(lb, sizeof lb, "b/%s/%s", a.id, changed.v[i]);
            if (gm_diff_print(stdout, fa ? la : "/dev/null", fa ? fa->text : NULL, fa ? fa->len : 0,
                              fb ? lb : "/dev/null", fb ? fb->text : NULL, fb ? fb->len : 0, &st) < 0) {
                preview_failed(p, source, "", &st);
                break;
            }
        }
    }
    strlist_free(&changed);
out:
    gm_gen_result_free(&a);
    gm_gen_result_free(&b);
    gm_snapshot_free(&snap);
    fflush(stdout);
}

/* The model folders of one SOURCE argument: itself, or those found in it (depth <= 3). */
static void expand(const char *arg, int depth, strlist *out)
{
    char path[PATH_MAX];
    struct stat sb;
    if (depth == 0 && !is_dir(arg)) {
        push(out, "%s", arg); /* a Hub repo id, judged by gm_source_read */
        return;
    }
    if (snprintf(path, sizeof path, "%s/config.json", arg) >= (int)sizeof path)
        return;
    if (stat(path, &sb) == 0) {
        push(out, "%s", arg);
        return;
    }
    if (depth == 3)
        return;
    strlist subs = {0};
    subdirs(arg, &subs);
    for (size_t i = 0; i < subs.n; i++) {
        if (snprintf(path, sizeof path, "%s%s%s", arg, arg[strlen(arg) - 1] == '/' ? "" : "/", subs.v[i]) <
            (int)sizeof path)
            expand(path, depth + 1, out);
    }
    strlist_free(&subs);
}

static void print_list(const char *what, const strlist *l)
{
    printf("preview: %zu %s%s\n", l->n, what, l->n ? ":" : "");
    for (size_t i = 0; i < l->n; i++)
        printf("  %s\n", l->v[i]);
}

int gm_preview_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"templates", required_argument, 0, 'T'}, {"revision", required_argument, 0, 'R'},
        {"verbose", no_argument, 0, 'v'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    preview_run p = {0};
    gm_status st = {0};
    int c;
    p.src.revision = "main";
    while ((c = getopt_long(argc, argv, ":R:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'T': p.with.templates_dir = optarg; break;
        case 'R':
            if (gm_revision_arg("gen-model: preview", p.src.revision = optarg))
                return GM_EXIT_USAGE;
            break;
        case 'v': p.base.verbose = p.with.verbose = 1; break;
        case 'h': fputs(preview_usage, stdout); return GM_EXIT_OK;
        default: gm_cli_bad_option("gen-model preview", c, argv); return GM_EXIT_USAGE;
        }
    }
    if (!p.with.templates_dir) {
        fprintf(stderr, "gen-model: preview: expected --templates DIR, the templates to preview; see gen-model "
                "preview --help\n");
        return GM_EXIT_USAGE;
    }
    if (optind == argc) {
        fprintf(stderr, "gen-model: preview: expected at least one SOURCE (a model folder, a Hub repo id or a "
                "folder of them), found none\n");
        return GM_EXIT_USAGE;
    }
    if (gm_templates_check(p.with.templates_dir, &st)) {
        fprintf(stderr, "gen-model: preview: --templates: %s\n", st.msg);
        return GM_EXIT_USAGE;
    }
    if (gm_command_start())
        return GM_EXIT_INTERNAL;
    for (int i = optind; i < argc && !gm_interrupted(); i++) {
        strlist sources = {0};
        expand(argv[i], 0, &sources);
        if (sources.n == 0) {
            gm_status none = {0};
            gm_fail(&none, GM_EMISSING, "expected a model folder (config.json) in it or below, found none");
            preview_failed(&p, argv[i], "", &none);
        }
        for (size_t k = 0; k < sources.n && !gm_interrupted(); k++)
            preview_one(&p, sources.v[k]);
        strlist_free(&sources);
    }
    gm_command_end();
    int rc = p.first_error;
    if (gm_interrupted()) {
        fprintf(stderr, "gen-model: preview: interrupted\n");
        rc = GM_EXIT_INTERRUPTED;
    } else {
        printf("preview: %d model%s rendered with the built-in templates and with %s: %zu with changes, "
               "%zu unchanged\n", p.n_models, p.n_models == 1 ? "" : "s", p.with.templates_dir, p.changes.n,
               (size_t)p.n_models - p.changes.n);
        for (size_t i = 0; i < p.changes.n; i++)
            printf("  %s\n", p.changes.v[i]);
        print_list("refused", &p.refused);
        if (p.failed.n)
            print_list("failed", &p.failed);
        if (p.n_fetched) /* as after a scaffold: the transfer of a source read, not of failures alone */
            gm_sources_report(&p.src);
    }
    strlist_free(&p.changes);
    strlist_free(&p.refused);
    strlist_free(&p.failed);
    gm_sources_free(&p.src);
    return rc;
}

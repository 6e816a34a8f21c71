/* nb_air_scan: reads an mlir-air checkout's LLM examples into exec deployments, from what
 * their Makefiles and scripts say (docs/mlir-air.md, "The 19 models"); nothing per model name. */
#include "nb_air_scan.h"

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nb_db_import.h"
#include "nb_file.h"

#define SCAN_FILE_MAX ((size_t)4 << 20)
#define SCAN_MODELS_MAX 256
#define MK_VARS_MAX 256
#define MK_RULES_MAX 256

/* ---- a Makefile, as far as its variables and rules go ---- */

typedef struct mk_var {
    char name[64];
    char value[512];
} mk_var;

typedef struct mk_rule {
    char name[64];
    char prereq[256];
    char recipe[2048]; /* the recipe lines joined, continuations folded */
} mk_rule;

typedef struct makefile {
    mk_var vars[MK_VARS_MAX];
    size_t n_vars;
    mk_rule rules[MK_RULES_MAX];
    size_t n_rules;
} makefile;

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t k = strspn(s, " \t");
    if (k)
        memmove(s, s + k, strlen(s + k) + 1);
}

static void append(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (n + 1 < cap)
        snprintf(buf + n, cap - n, "%s%s", n ? " " : "", s);
}

/* "NAME ?= v", "NAME := v", "NAME = v": the first definition (the default a user's command
 * line overrides). 1 when line is one. */
static int parse_var(makefile *mk, const char *line)
{
    const char *p = line;
    if (!isupper((unsigned char)*p) && *p != '_')
        return 0;
    while (isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')
        p++;
    size_t nl = (size_t)(p - line);
    p += strspn(p, " \t");
    const char *eq = p;
    if (*eq == '?' || *eq == ':' || *eq == '+')
        eq++;
    if (*eq != '=')
        return 0;
    for (size_t i = 0; i < mk->n_vars; i++)
        if (strlen(mk->vars[i].name) == nl && !strncmp(mk->vars[i].name, line, nl))
            return 1;
    if (mk->n_vars == MK_VARS_MAX || nl >= sizeof mk->vars[0].name)
        return 1;
    mk_var *v = &mk->vars[mk->n_vars++];
    snprintf(v->name, sizeof v->name, "%.*s", (int)nl, line);
    snprintf(v->value, sizeof v->value, "%s", eq + 1);
    trim(v->value);
    return 1;
}

/* "target: prereqs" (not ":=") at a line's start. */
static mk_rule *parse_rule(makefile *mk, const char *line)
{
    const char *p = line;
    while (isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.')
        p++;
    if (p == line || *p != ':' || p[1] == '=' || p[1] == ':')
        return NULL;
    size_t nl = (size_t)(p - line);
    if (mk->n_rules == MK_RULES_MAX || nl >= sizeof mk->rules[0].name)
        return NULL;
    mk_rule *r = &mk->rules[mk->n_rules++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%.*s", (int)nl, line);
    snprintf(r->prereq, sizeof r->prereq, "%s", p + 1);
    trim(r->prereq);
    return r;
}

static void parse_makefile(const char *text, makefile *mk)
{
    memset(mk, 0, sizeof *mk);
    mk_rule *cur = NULL;
    char line[4096];
    const char *p = text;
    int cont = 0; /* the previous recipe line ended in a backslash */
    while (*p) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        p += n + (p[n] == '\n');
        size_t len = strlen(line);
        int ends_bs = len && line[len - 1] == '\\';
        if (ends_bs)
            line[--len] = '\0';
        if (line[0] == '\t' || (cont && cur)) {
            if (cur) {
                char *body = line + strspn(line, "\t @-");
                trim(body);
                append(cur->recipe, sizeof cur->recipe, body);
            }
            cont = ends_bs;
            continue;
        }
        cont = 0;
        if (line[0] == '#' || !line[0]) {
            if (!line[0])
                cur = NULL;
            continue;
        }
        if (parse_var(mk, line)) {
            cur = NULL;
            continue;
        }
        cur = parse_rule(mk, line);
    }
}

static const mk_rule *rule(const makefile *mk, const char *name)
{
    for (size_t i = 0; i < mk->n_rules; i++)
        if (!strcmp(mk->rules[i].name, name))
            return &mk->rules[i];
    return NULL;
}

static const char *var(const makefile *mk, const char *name)
{
    for (size_t i = 0; i < mk->n_vars; i++)
        if (!strcmp(mk->vars[i].name, name))
            return mk->vars[i].value;
    return NULL;
}

static int uses(const mk_rule *r, const char *name)
{
    char ref[80];
    snprintf(ref, sizeof ref, "$(%s)", name);
    return r && strstr(r->recipe, ref) != NULL;
}

/* The first word of r's recipe naming a .py file, its $(VAR)s expanded (twice at most) and
 * reduced to the file name: "llama32_3b_q4nx_inference.py". */
static int script_of(const makefile *mk, const mk_rule *r, char *out, size_t cap)
{
    char text[4096];
    snprintf(text, sizeof text, "%s", r->recipe);
    for (int round = 0; round < 2; round++) {
        char next[4096] = "";
        size_t o = 0;
        for (const char *p = text; *p && o + 1 < sizeof next;) {
            if (p[0] == '$' && p[1] == '(') {
                const char *e = strchr(p, ')');
                char name[64];
                if (e && (size_t)(e - p - 2) < sizeof name) {
                    snprintf(name, sizeof name, "%.*s", (int)(e - p - 2), p + 2);
                    const char *v = var(mk, name);
                    if (v) {
                        o += (size_t)snprintf(next + o, sizeof next - o, "%s", v);
                        p = e + 1;
                        continue;
                    }
                }
            }
            next[o++] = *p++;
            next[o] = '\0';
        }
        snprintf(text, sizeof text, "%s", next);
    }
    char *save = NULL;
    for (char *w = strtok_r(text, " \t\"'", &save); w; w = strtok_r(NULL, " \t\"'", &save)) {
        size_t n = strlen(w);
        if (n > 3 && !strcmp(w + n - 3, ".py")) {
            const char *base = strrchr(w, '/');
            snprintf(out, cap, "%s", base ? base + 1 : w);
            return 1;
        }
    }
    return 0;
}

/* ---- an inference script: which of extract_perf's formats it prints, and when ---- */

typedef struct script_facts {
    int rate;          /* a throughput format: "(Y tok/s)", "Tokens/second:", per-token row */
    int rate_unguarded; /* one of them outside any `if ... profile` block */
    int action;        /* "Action chunk (...): N ms" */
} script_facts;

static int indent_of(const char *line)
{
    int n = 0;
    while (line[n] == ' ' || line[n] == '\t')
        n++;
    return n;
}

/* Whether some block enclosing lines[i] (by indentation, upwards) is an if/elif testing a
 * profile flag: the line is printed only with --profile. */
static int profile_guarded(char **lines, size_t i)
{
    int want = indent_of(lines[i]);
    for (size_t k = i; k-- > 0 && want > 0;) {
        const char *l = lines[k];
        int in = indent_of(l);
        if (!l[in] || l[in] == '#' || in >= want)
            continue;
        want = in;
        if ((!strncmp(l + in, "if ", 3) || !strncmp(l + in, "elif ", 5)) &&
            strstr(l + in, "profile"))
            return 1;
    }
    return 0;
}

static void read_script(const char *llms, const char *path, script_facts *f, int depth);

/* "from NAME import ..." of a module beside the models (smollm2_1_7b's printers are
 * llama32_1b_inference's): its prints count as the script's, one level deep. */
static void read_imports(const char *llms, char **lines, size_t n, script_facts *f, int depth)
{
    DIR *d = NULL;
    for (size_t i = 0; i < n && depth < 1; i++) {
        char mod[128];
        if (sscanf(lines[i], "from %127[A-Za-z0-9_] import", mod) != 1)
            continue;
        if (!d && !(d = opendir(llms)))
            return;
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char p[2048];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s/%s.py", llms, de->d_name, mod);
            if (!stat(p, &st) && S_ISREG(st.st_mode)) {
                script_facts g;
                read_script(llms, p, &g, depth + 1);
                f->rate |= g.rate;
                f->rate_unguarded |= g.rate_unguarded;
                f->action |= g.action;
                break;
            }
        }
    }
    if (d)
        closedir(d);
}

static void read_script(const char *llms, const char *path, script_facts *f, int depth)
{
    memset(f, 0, sizeof *f);
    char *text = NULL;
    size_t len = 0;
    nb_err e;
    if (nb_file_read(path, SCAN_FILE_MAX, &text, &len, &e))
        return;
    size_t nl = 1;
    for (size_t i = 0; i < len; i++)
        nl += text[i] == '\n';
    char **lines = malloc(nl * sizeof *lines);
    if (!lines) {
        free(text);
        return;
    }
    size_t n = 0;
    for (char *p = text; p && n < nl;) {
        lines[n++] = p;
        p = strchr(p, '\n');
        if (p)
            *p++ = '\0';
    }
    for (size_t i = 0; i < n; i++) {
        const char *l = lines[i];
        const char *code = l + indent_of(l);
        if (*code == '#')
            continue;
        int rate = strstr(l, "tok/s)") || strstr(l, "Tokens/second:") ||
                   strstr(l, "End-to-end (per token)");
        if (strstr(l, "Action chunk ("))
            f->action = 1;
        if (!rate)
            continue;
        f->rate = 1;
        if (!profile_guarded(lines, i))
            f->rate_unguarded = 1;
    }
    /* a script printing none of the formats itself may print them through another's
     * printers; one that prints them decides alone (its decode modules' own summaries, such
     * as q4nx_decode_3b's "[q4nx-3b] ... tok/s)", are not what a run prints) */
    if (!f->rate && !f->action)
        read_imports(llms, lines, n, f, depth);
    free(lines);
    free(text);
}

/* ---- one model ---- */

static void note(nb_air_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(nb_air_model *m, const char *fmt, ...)
{
    char one[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    size_t n = strlen(m->notes);
    if (n + 3 < sizeof m->notes)
        snprintf(m->notes + n, sizeof m->notes - n, "%s%s", n ? "; " : "", one);
}

/* "make TARGET" plus VAR={ph} when the recipe takes $(VAR). */
static void make_cmd(char *buf, size_t cap, const char *target, const mk_rule *r,
                     const char *var_name, const char *ph)
{
    if (var_name && uses(r, var_name))
        snprintf(buf, cap, "make %s %s=%s", target, var_name, ph);
    else
        snprintf(buf, cap, "make %s", target);
}

/* verify: the model's own prompt-count variable (--max-prompts $(MAX_PROMPTS)), or the
 * count the recipe fixes. */
static void verify_cmd(nb_air_model *m, const mk_rule *r)
{
    const char *mp = strstr(r->recipe, "--max-prompts");
    char vname[64] = "";
    if (mp) {
        mp += strlen("--max-prompts");
        mp += strspn(mp, " \t=");
        if (mp[0] == '$' && mp[1] == '(') {
            const char *e = strchr(mp, ')');
            if (e && (size_t)(e - mp - 2) < sizeof vname)
                snprintf(vname, sizeof vname, "%.*s", (int)(e - mp - 2), mp + 2);
        }
    }
    if (vname[0]) {
        snprintf(m->verify, sizeof m->verify, "make verify %s={max_prompts}", vname);
    } else {
        snprintf(m->verify, sizeof m->verify, "make verify");
        if (mp)
            note(m, "verify: the Makefile fixes --max-prompts %d (no variable takes a count)",
                 atoi(mp));
    }
}

/* The string literal after `name = ` at a line's start in text, into out; 0 when none. */
static int py_assign_str(const char *text, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl))
            continue;
        const char *q = p + nl;
        q += strspn(q, " \t");
        if (*q != '=')
            continue;
        q++;
        q += strspn(q, " \t");
        if (*q != '"' && *q != '\'')
            return 0;
        const char *e = strchr(q + 1, *q);
        if (!e || (size_t)(e - q - 1) >= cap)
            return 0;
        snprintf(out, cap, "%.*s", (int)(e - q - 1), q + 1);
        return 1;
    }
    return 0;
}

/* What an air entry needs from verify_adapter.py: build_runner, DEFAULT_MODEL and the HF id
 * MODEL_CHOICES gives it (a string literal: a name bound elsewhere cannot be read here). */
static void air_facts(const char *adapter, nb_air_model *m)
{
    if (!adapter) {
        snprintf(m->air_why, sizeof m->air_why, "no readable verify_adapter.py");
        return;
    }
    if (!strstr(adapter, "def build_runner(")) {
        snprintf(m->air_why, sizeof m->air_why,
                 "verify_adapter.py has no build_runner (no runner the air host can drive)");
        return;
    }
    if (!py_assign_str(adapter, "DEFAULT_MODEL", m->air_choice, sizeof m->air_choice))
        snprintf(m->air_choice, sizeof m->air_choice, "instruct");
    const char *mc = strstr(adapter, "\nMODEL_CHOICES");
    const char *end = mc ? strchr(mc, '}') : NULL;
    char key[80];
    snprintf(key, sizeof key, "\"%s\"", m->air_choice);
    const char *k = mc ? strstr(mc, key) : NULL;
    if (!k || k > end) {
        snprintf(m->air_why, sizeof m->air_why, "MODEL_CHOICES names no '%s' (its DEFAULT_MODEL)",
                 m->air_choice);
        return;
    }
    const char *v = k + strlen(key);
    v += strspn(v, " \t:");
    const char *e = *v == '"' ? strchr(v + 1, '"') : NULL;
    if (!e || e > end || (size_t)(e - v - 1) >= sizeof m->air_hf_id) {
        snprintf(m->air_why, sizeof m->air_why,
                 "MODEL_CHOICES['%s'] is no HF id literal (a name bound elsewhere)",
                 m->air_choice);
        return;
    }
    snprintf(m->air_hf_id, sizeof m->air_hf_id, "%.*s", (int)(e - v - 1), v + 1);
}

static void scan_model(const char *dir, const char *name, nb_air_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->cwd, sizeof m->cwd, "%s/%s", dir, name);
    const char *dt = nb_db_dtype_of_model(name, NULL, 0);
    snprintf(m->dtype, sizeof m->dtype, "%s", dt ? dt : "bf16");
    char path[1400];
    snprintf(path, sizeof path, "%s/Makefile", m->cwd);
    char *text = NULL, *adapter = NULL;
    size_t len = 0, alen = 0;
    nb_err e;
    if (nb_file_read(path, SCAN_FILE_MAX, &text, &len, &e)) {
        snprintf(m->why, sizeof m->why, "%s", e.msg);
        return;
    }
    makefile *mk = malloc(sizeof *mk);
    if (!mk) {
        free(text);
        snprintf(m->why, sizeof m->why, "out of memory");
        return;
    }
    parse_makefile(text, mk);
    free(text);
    snprintf(path, sizeof path, "%s/verify_adapter.py", m->cwd);
    if (nb_file_read(path, SCAN_FILE_MAX, &adapter, &alen, &e))
        adapter = NULL;

    const mk_rule *run = rule(mk, "run"), *prof = rule(mk, "profile"),
                  *inf = rule(mk, "run-inference"), *ver = rule(mk, "verify"),
                  *vfull = rule(mk, "verify-full"), *diag = rule(mk, "diagnosis"),
                  *ask = rule(mk, "ask");
    /* What the inference scripts print. */
    char script[256] = "", pscript[256] = "";
    script_facts rf = {0}, pf = {0};
    if (run && script_of(mk, run, script, sizeof script)) {
        snprintf(path, sizeof path, "%s/%s", m->cwd, script);
        read_script(dir, path, &rf, 0);
    }
    if (prof && script_of(mk, prof, pscript, sizeof pscript)) {
        snprintf(path, sizeof path, "%s/%s", m->cwd, pscript);
        read_script(dir, path, &pf, 0);
    }
    int run_is_prefill = script[0] && strstr(script, "_prefill") != NULL;
    m->no_throughput = (rf.action || pf.action) && !rf.rate && !pf.rate;

    /* profile: the nightly's measurement (run_npu2_profile.lit runs `make profile`) */
    if (prof)
        make_cmd(m->profile, sizeof m->profile, "profile", prof, "N_TOKENS", "{n_tokens}");
    /* run */
    if (inf && (run_is_prefill || !run)) {
        make_cmd(m->run, sizeof m->run, "run-inference", inf, "N_TOKENS", "{n_tokens}");
        note(m, "run: `make run` runs %s (a prefill check); `make run-inference` is the "
                "inference target",
             script);
    } else if (run && run_is_prefill) {
        if (prof) {
            snprintf(m->run, sizeof m->run, "%s", m->profile);
            note(m, "run: `make run` runs %s, prefill only (no decode, no throughput); "
                    "run jobs use `make profile`",
                 script);
        } else {
            note(m, "run: `make run` runs %s, prefill only, and there is no profile target",
                 script);
        }
    } else if (run && script[0] && !rf.rate && !rf.action && !m->no_throughput) {
        note(m, "run: %s prints no metric line at all%s", script,
             prof ? "; run jobs use `make profile`" : "");
        if (prof)
            snprintf(m->run, sizeof m->run, "%s", m->profile);
    } else if (run && script[0] && rf.rate && !rf.rate_unguarded) {
        if (prof) {
            snprintf(m->run, sizeof m->run, "%s", m->profile);
            note(m, "run: %s prints its metric lines only with --profile; run jobs use `make "
                    "profile`",
                 script);
        } else {
            note(m, "run: %s prints its metric lines only with --profile", script);
        }
    } else if (run && m->no_throughput) {
        if (prof) {
            snprintf(m->run, sizeof m->run, "%s", m->profile);
            note(m, "run: %s prints no latency line; run jobs use `make profile` (its action "
                    "chunk latency)",
                 script);
        }
    } else if (run) {
        if (uses(run, "N_TOKENS")) {
            make_cmd(m->run, sizeof m->run, "run", run, "N_TOKENS", "{n_tokens}");
        } else if (ask && uses(ask, "N_TOKENS")) {
            make_cmd(m->run, sizeof m->run, "ask", ask, "N_TOKENS", "{n_tokens}");
            note(m, "run: `make run` fixes its token count; `make ask` takes N_TOKENS");
        } else {
            snprintf(m->run, sizeof m->run, "make run");
            note(m, "run: `make run` fixes its token count");
        }
    }
    if (m->no_throughput)
        note(m, "profile: a latency only (Action chunk), no tok/s");

    /* verify */
    if (ver) {
        int runner = strstr(ver->recipe, "VERIFY_RUNNER") || strstr(ver->recipe, "verify_runner");
        int own = strstr(ver->recipe, "verify_adapter.py") != NULL;
        if (runner) {
            verify_cmd(m, ver);
        } else if (own && adapter && strstr(adapter, "regression_gate")) {
            snprintf(m->verify, sizeof m->verify, "make verify");
            m->verdict_only = 1;
            note(m, "verify: verify_adapter.py runs a regression gate and prints [verify] "
                    "PASS/FAIL, no report");
        } else {
            note(m, "verify: the target runs neither the verify runner nor a gate npubench "
                    "reads");
        }
    }
    if (vfull && (strstr(vfull->recipe, "VERIFY_RUNNER") || strstr(vfull->recipe, "verify_runner")))
        snprintf(m->verify_full, sizeof m->verify_full, "make verify-full");
    if (diag && (strstr(diag->recipe, "VERIFY_RUNNER") || strstr(diag->recipe, "verify_runner")))
        snprintf(m->diagnosis, sizeof m->diagnosis, "make diagnosis");
    if (!m->run[0] && !m->profile[0] && !m->verify[0] && !m->verify_full[0] && !m->diagnosis[0])
        snprintf(m->why, sizeof m->why, "no target npubench can read: %.400s",
                 m->notes[0] ? m->notes : "no run, profile or verify target");
    air_facts(adapter, m);
    free(adapter);
    free(mk);
}

static int cmp_model(const void *a, const void *b)
{
    return strcmp(((const nb_air_model *)a)->name, ((const nb_air_model *)b)->name);
}

static int is_file(const char *dir, const char *sub, const char *file)
{
    char p[2048];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s", dir, sub, file);
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

nb_code nb_air_scan(const char *llms_dir, nb_air_model **out, size_t *n, nb_err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(llms_dir);
    if (!d)
        return nb_err_set(err, NB_ENOTFOUND, "%s: cannot read the directory (expected mlir-air's "
                          "programming_examples/llms)", llms_dir);
    nb_air_model *m = calloc(SCAN_MODELS_MAX, sizeof *m);
    if (!m) {
        closedir(d);
        return nb_err_set(err, NB_ENOMEM, "air scan: out of memory");
    }
    size_t k = 0;
    struct dirent *de;
    while ((de = readdir(d)) && k < SCAN_MODELS_MAX) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof m->name)
            continue;
        /* a model: a Makefile and a verify adapter (bench/, shared/, verify/ are tools) */
        if (!is_file(llms_dir, de->d_name, "Makefile") ||
            !is_file(llms_dir, de->d_name, "verify_adapter.py"))
            continue;
        scan_model(llms_dir, de->d_name, &m[k++]);
    }
    closedir(d);
    if (!k) {
        free(m);
        return nb_err_set(err, NB_ENOTFOUND, "%s: no model directory (one with a Makefile and "
                          "a verify_adapter.py)", llms_dir);
    }
    qsort(m, k, sizeof *m, cmp_model);
    *out = m;
    *n = k;
    return NB_OK;
}

static void add_cmd(json_object *exec, const char *key, const char *cmd)
{
    if (cmd[0])
        json_object_object_add(exec, key, json_object_new_string(cmd));
}

/* "<model>-air": the adapter kept resident by the air host; the model named by the HF
 * checkout its MODEL_CHOICES names, the nightly's key as its alias. */
static json_object *air_entry(const nb_air_model *m, const char *llms_dir,
                              const nb_air_scan_air *air)
{
    char name[160], model[1400], adapter[200];
    const char *base = strrchr(m->air_hf_id, '/');
    snprintf(name, sizeof name, "%s-air", m->name);
    snprintf(model, sizeof model, "%s/%s", air->models_dir, base ? base + 1 : m->air_hf_id);
    snprintf(adapter, sizeof adapter, "%s.verify_adapter", m->name);
    json_object *o = json_object_new_object(), *a = json_object_new_object(),
                *al = json_object_new_array();
    json_object_object_add(o, "name", json_object_new_string(name));
    json_object_object_add(o, "model", json_object_new_string(model));
    json_object_object_add(o, "backend", json_object_new_string("air"));
    json_object_array_add(al, json_object_new_string(m->name));
    json_object_object_add(o, "aliases", al);
    json_object_object_add(a, "llms_dir", json_object_new_string(llms_dir));
    json_object_object_add(a, "adapter", json_object_new_string(adapter));
    json_object_object_add(a, "model", json_object_new_string(m->air_choice));
    if (air->python)
        json_object_object_add(a, "python", json_object_new_string(air->python));
    json_object_object_add(o, "air", a);
    return o;
}

json_object *nb_air_scan_json(const nb_air_model *m, size_t n, const char *llms_dir,
                              const nb_air_scan_air *air)
{
    json_object *doc = json_object_new_object(), *deps = json_object_new_array(),
                *unmapped = json_object_new_array(), *notes = json_object_new_object();
    for (size_t i = 0; i < n; i++) {
        if (m[i].notes[0])
            json_object_object_add(notes, m[i].name, json_object_new_string(m[i].notes));
        if (m[i].why[0]) {
            json_object *u = json_object_new_object();
            json_object_object_add(u, "model", json_object_new_string(m[i].name));
            json_object_object_add(u, "why", json_object_new_string(m[i].why));
            json_object_array_add(unmapped, u);
            continue;
        }
        json_object *o = json_object_new_object(), *ex = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(m[i].name));
        json_object_object_add(o, "model", json_object_new_string(m[i].name));
        json_object_object_add(o, "backend", json_object_new_string("exec"));
        json_object_object_add(o, "dtype", json_object_new_string(m[i].dtype));
        json_object_object_add(ex, "cwd", json_object_new_string(m[i].cwd));
        add_cmd(ex, "run", m[i].run);
        add_cmd(ex, "profile", m[i].profile);
        add_cmd(ex, "verify", m[i].verify);
        add_cmd(ex, "verify_full", m[i].verify_full);
        add_cmd(ex, "diagnosis", m[i].diagnosis);
        /* twice the nightly's lit --timeout 1800 for verify and profile */
        json_object_object_add(ex, "timeout_s", json_object_new_int(3600));
        if (m[i].no_throughput)
            json_object_object_add(ex, "throughput", json_object_new_boolean(0));
        if (m[i].verdict_only)
            json_object_object_add(ex, "verify_report", json_object_new_boolean(0));
        json_object_object_add(o, "exec", ex);
        json_object_array_add(deps, o);
    }
    for (size_t i = 0; air && air->models_dir && i < n; i++) {
        if (!m[i].air_why[0]) {
            json_object_array_add(deps, air_entry(&m[i], llms_dir, air));
            continue;
        }
        json_object *u = json_object_new_object();
        char nm[160];
        snprintf(nm, sizeof nm, "%s-air", m[i].name);
        json_object_object_add(u, "model", json_object_new_string(nm));
        json_object_object_add(u, "why", json_object_new_string(m[i].air_why));
        json_object_array_add(unmapped, u);
    }
    json_object_object_add(doc, "deployments", deps);
    json_object_object_add(doc, "unmapped", unmapped);
    json_object_object_add(doc, "notes", notes);
    return doc;
}

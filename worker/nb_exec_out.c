/* nb_exec_out: line matchers for mlir-air's printed summaries (extract_perf's formats and
 * precedence), npubench's own CLI lines, and the verify runner's verdict and report path. */
#include "nb_exec_out.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 4096
#define MAX_SAMPLES 10000

/* ---- lexing ----------------------------------------------------------------------------- */

static const char *blanks(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* extract_perf's number, [\d.]+, that Python's float() accepts: the end of it, else NULL. */
static const char *number(const char *p, double *v)
{
    size_t n = strspn(p, "0123456789.");
    if (!n || n > 64)
        return NULL;
    char buf[72];
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *e;
    errno = 0;
    double x = strtod(buf, &e);
    if (*e || errno || !isfinite(x))
        return NULL; /* "1.2.3", "." */
    *v = x;
    return p + n;
}

/* extract_perf rounds every metric to 0.01 (Python's round(x, 2): the exact binary value
 * rounded half-even, which is what glibc's printf does too). */
static double round2(double x)
{
    char b[64];
    snprintf(b, sizeof b, "%.2f", x);
    return strtod(b, NULL);
}

/* "<label><sep><number><blanks><unit>" at any occurrence of label in line: the first that
 * matches.  sep: 0 = optional blanks, 1 = at least one blank. */
static int labelled(const char *line, const char *label, int need_blank, const char *unit,
                    double *v)
{
    size_t ll = strlen(label), ul = strlen(unit);
    for (const char *q = strstr(line, label); q; q = strstr(q + 1, label)) {
        const char *p = q + ll;
        if (need_blank && *p != ' ' && *p != '\t')
            continue;
        const char *e = number(blanks(p), v);
        if (e && !strncmp(blanks(e), unit, ul))
            return 1;
    }
    return 0;
}

/* ---- the formats, in extract_perf's precedence ------------------------------------------ */

static int m_warm(const char *line, double *v)
{
    if (!labelled(line, "Warm time to first token (TTFT):", 0, "s", v))
        return 0;
    *v *= 1000.0;
    return 1;
}

/* Anchored at the line's start (extract_perf's ^\s*): "[profile] ... prefill TTFT 1.2s" and
 * the warm line do not count as the cold one. */
static int m_cold(const char *line, double *v)
{
    const char *label = "Time to first token (TTFT):";
    const char *p = blanks(line);
    if (strncmp(p, label, strlen(label)) || !labelled(p, label, 0, "s", v))
        return 0;
    *v *= 1000.0;
    return 1;
}

static int m_prefill(const char *line, double *v)
{
    return labelled(line, "End-to-end (prefill, per query)", 1, "ms", v);
}

static int m_action(const char *line, double *v)
{
    const char *label = "Action chunk (";
    for (const char *q = strstr(line, label); q; q = strstr(q + 1, label)) {
        const char *close = strchr(q + strlen(label), ')');
        if (!close || close[1] != ':')
            continue;
        const char *e = number(blanks(close + 2), v);
        if (e && !strncmp(blanks(e), "ms", 2))
            return 1;
    }
    return 0;
}

static int m_paren(const char *line, double *v)
{
    for (const char *q = strchr(line, '('); q; q = strchr(q + 1, '(')) {
        const char *e = number(q + 1, v);
        if (e && !strncmp(blanks(e), "tok/s)", 6))
            return 1;
    }
    return 0;
}

/* NAN: the line is there but says 0 ms, which extract_perf reports as no throughput. */
static int m_decode_ms(const char *line, double *v)
{
    double ms;
    if (!labelled(line, "End-to-end (per token)", 1, "ms", &ms))
        return 0;
    *v = ms > 0 ? 1000.0 / ms : NAN;
    return 1;
}

static int m_label(const char *line, double *v)
{
    return labelled(line, "Tokens/second:", 0, "", v);
}

typedef int (*matcher)(const char *line, double *v);

static const struct {
    matcher m;
    const char *name;
} ttft_fmts[NB_EXEC_OUT_TTFT_N] = {
    {m_warm, "Warm time to first token (TTFT): X.XXXs"},
    {m_cold, "Time to first token (TTFT): X.XXs"},
    {m_prefill, "End-to-end (prefill, per query) N ms"},
    {m_action, "Action chunk (...): N ms"},
}, tps_fmts[NB_EXEC_OUT_TPS_N] = {
    {m_paren, "(Y.YY tok/s)"},
    {m_decode_ms, "End-to-end (per token) N ms"},
    {m_label, "Tokens/second: Y.YY"},
};

const char *nb_exec_out_ttft_fmt_name(nb_exec_out_ttft_fmt f)
{
    return f >= 0 && f < NB_EXEC_OUT_TTFT_N ? ttft_fmts[f].name : "none";
}

const char *nb_exec_out_tps_fmt_name(nb_exec_out_tps_fmt f)
{
    return f >= 0 && f < NB_EXEC_OUT_TPS_N ? tps_fmts[f].name : "none";
}

/* ---- counts, verdicts, paths ------------------------------------------------------------- */

/* A non-negative integer right after label (and blanks); -1 when absent or over 1e9. */
static int count_after(const char *line, const char *label)
{
    const char *p = strstr(line, label);
    if (!p)
        return -1;
    p = blanks(p + strlen(label));
    size_t n = strspn(p, "0123456789");
    if (!n || n > 9)
        return -1;
    return atoi(p);
}

/* "prompt_len=N" or "prompt_len: N" (extract_perf's prompt_len[=:]\s*(\d+)). */
static int context_len_of(const char *line)
{
    for (const char *q = strstr(line, "prompt_len"); q; q = strstr(q + 1, "prompt_len")) {
        const char *p = q + strlen("prompt_len");
        if (*p != '=' && *p != ':')
            continue;
        char label[2] = {*p, '\0'};
        int n = count_after(p, label);
        if (n >= 0)
            return n;
    }
    return -1;
}

/* The decode summary: "Generated N tokens in X.XXs" (most inference scripts) or
 * "[inference] decode: N tokens in X.XXs ..." (gemma3_4b_q4nx, qwen25_7b_q4nx,
 * qwen3_8b_q4nx, the fused-decode drivers). */
static int generated_of(const char *line)
{
    static const char *const heads[] = {"Generated ", "[inference] decode: "};
    const char *p = blanks(line);
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        size_t hl = strlen(heads[i]);
        if (strncmp(p, heads[i], hl))
            continue;
        int n = count_after(p, heads[i]);
        const char *q = p + hl + strspn(p + hl, "0123456789");
        return n >= 0 && !strncmp(q, " tokens in ", 11) ? n : -1;
    }
    return -1;
}

/* "[verify] PASS" / "[verify] FAIL — see report ..." / npubench's "[verify] PASS (2/2 ...)". */
static int verdict_of(const char *line)
{
    if (strncmp(line, "[verify] PASS", 13) && strncmp(line, "[verify] FAIL", 13))
        return -1;
    char next = line[13];
    if (next != '\0' && next != ' ' && next != '(')
        return -1; /* "[verify] PASSED?" is no verdict */
    return line[9] == 'P' ? 0 : 1;
}

/* The path after label up to the line's end (the verify runner prints it whole, spaces
 * and all) or, with stop_at_blank, up to the first blank; kept only when it is a .json. */
static void path_after(const char *line, const char *label, int stop_at_blank, char *buf,
                       size_t cap)
{
    const char *p = strstr(line, label);
    if (!p)
        return;
    p = blanks(p + strlen(label));
    size_t n = stop_at_blank ? strcspn(p, " \t") : strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n < 6 || n >= cap || strncmp(p + n - 5, ".json", 5))
        return;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* ---- scanning ------------------------------------------------------------------------------ */

/* Calls fn for each line of output (a copy, NUL-terminated, at most LINE_MAX_BYTES). */
static void each_line(const char *s, size_t len, void (*fn)(void *, const char *), void *u)
{
    char line[LINE_MAX_BYTES + 1];
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != '\n')
            j++;
        size_t n = j - i < LINE_MAX_BYTES ? j - i : LINE_MAX_BYTES;
        memcpy(line, s + i, n);
        line[n] = '\0';
        if (n && line[n - 1] == '\r')
            line[n - 1] = '\0';
        fn(u, line);
        i = j + 1;
    }
}

typedef struct scan {
    nb_exec_out *o;
    int seen_ttft[NB_EXEC_OUT_TTFT_N], seen_tps[NB_EXEC_OUT_TPS_N];
    double first_ttft[NB_EXEC_OUT_TTFT_N], first_tps[NB_EXEC_OUT_TPS_N];
    int npb_generated; /* npubench's "generated tokens: N", the fallback */
} scan;

static void scan_line(void *u, const char *line)
{
    scan *s = u;
    nb_exec_out *o = s->o;
    double v;
    for (int f = 0; f < NB_EXEC_OUT_TTFT_N; f++)
        if (!s->seen_ttft[f] && ttft_fmts[f].m(line, &v)) {
            s->seen_ttft[f] = 1;
            s->first_ttft[f] = v;
        }
    for (int f = 0; f < NB_EXEC_OUT_TPS_N; f++)
        if (!s->seen_tps[f] && tps_fmts[f].m(line, &v)) {
            s->seen_tps[f] = 1;
            s->first_tps[f] = v;
        }
    int n;
    if (o->context_len < 0)
        o->context_len = context_len_of(line);
    if (o->generated_tokens < 0 && (n = generated_of(line)) >= 0)
        o->generated_tokens = n;
    if (s->npb_generated < 0)
        s->npb_generated = count_after(line, "generated tokens:");
    if (o->prompt_tokens < 0)
        o->prompt_tokens = count_after(line, "Prompt tokens:");
    if ((n = verdict_of(line)) >= 0) {
        o->gate = n;
        int a, b;
        const char *paren = strchr(line, '(');
        if (paren && sscanf(paren, "(%d/%d prompts pass)", &a, &b) == 2 && a >= 0 && b >= a) {
            o->gate_passed = a;
            o->gate_total = b;
        }
    }
    if (!strncmp(line, "[verify] Summary:", 17)) {
        int p = count_after(line, "'topk_passed':"), f = count_after(line, "'topk_failed':");
        if (p >= 0 && f >= 0) {
            o->gate_passed = p;
            o->gate_total = p + f;
        }
    }
    if (!strncmp(line, "[verify] JSON:", 14))
        path_after(line, "[verify] JSON:", 0, o->report_path, sizeof o->report_path);
    else if (!strncmp(line, "Report: ", 8) && !o->report_path[0])
        path_after(line, "Report:", 1, o->report_path, sizeof o->report_path);
}

void nb_exec_out_parse(const char *output, size_t len, nb_exec_out *out)
{
    memset(out, 0, sizeof *out);
    out->ttft_fmt = NB_EXEC_OUT_TTFT_NONE;
    out->tps_fmt = NB_EXEC_OUT_TPS_NONE;
    out->context_len = out->generated_tokens = out->prompt_tokens = -1;
    out->gate = out->gate_passed = out->gate_total = -1;
    scan s = {.o = out, .npb_generated = -1};
    each_line(output, len, scan_line, &s);
    if (out->generated_tokens < 0)
        out->generated_tokens = s.npb_generated;
    for (int f = 0; f < NB_EXEC_OUT_TTFT_N && out->ttft_fmt < 0; f++)
        if (s.seen_ttft[f]) {
            out->ttft_fmt = (nb_exec_out_ttft_fmt)f;
            out->has_ttft = 1;
            out->ttft_ms = round2(s.first_ttft[f]);
        }
    for (int f = 0; f < NB_EXEC_OUT_TPS_N && out->tps_fmt < 0; f++)
        if (s.seen_tps[f]) {
            out->tps_fmt = (nb_exec_out_tps_fmt)f;
            out->has_tps = !isnan(s.first_tps[f]);
            out->tps = out->has_tps ? round2(s.first_tps[f]) : 0;
            out->decode_ms_per_token = f == NB_EXEC_OUT_TPS_DECODE_MS && out->has_tps
                                           ? 1000.0 / s.first_tps[f]
                                       : out->has_tps ? 1000.0 / out->tps : 0;
        }
}

typedef struct samples {
    matcher ttft, tps;
    double *vt, *vp;
    int nt, np;
} samples;

static void sample_line(void *u, const char *line)
{
    samples *a = u;
    double v;
    if (a->ttft && a->nt < MAX_SAMPLES && a->ttft(line, &v))
        a->vt[a->nt++] = round2(v);
    if (a->tps && a->np < MAX_SAMPLES && a->tps(line, &v) && !isnan(v))
        a->vp[a->np++] = round2(v);
}

nb_code nb_exec_out_samples(const char *output, size_t len, double **ttft, int *n_ttft,
                            double **tps, int *n_tps, nb_err *err)
{
    *ttft = *tps = NULL;
    *n_ttft = *n_tps = 0;
    nb_exec_out o;
    nb_exec_out_parse(output, len, &o);
    samples a = {.ttft = o.ttft_fmt >= 0 ? ttft_fmts[o.ttft_fmt].m : NULL,
                 .tps = o.tps_fmt >= 0 ? tps_fmts[o.tps_fmt].m : NULL};
    a.vt = malloc(sizeof(double) * MAX_SAMPLES);
    a.vp = malloc(sizeof(double) * MAX_SAMPLES);
    if (!a.vt || !a.vp) {
        free(a.vt);
        free(a.vp);
        return nb_err_set(err, NB_ENOMEM, "out of memory reading %d samples", MAX_SAMPLES);
    }
    each_line(output, len, sample_line, &a);
    *ttft = a.vt;
    *n_ttft = a.nt;
    *tps = a.vp;
    *n_tps = a.np;
    return NB_OK;
}

/* nb_chat: recognises a chat template by its tokens and renders the single user turn a
 * benchmark or verification sends, byte for byte as transformers' Jinja rendering would. */
#include "nb_chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nb_utf8.h"

struct nb_chat {
    nb_chat_style style;
    char *system;  /* ChatML: default system turn the template injects, or NULL */
    char *bos;     /* the bos_token's text, or NULL */
    int with_bos;  /* Llama-3: template starts with bos_token */
    int dates;     /* Llama-3.1: template injects the knowledge-cutoff system turn */
    int today;     /* Llama-3.2: ... dated today (strftime_now) instead of 26 Jul 2024 */
    int unknown;   /* a template neither ChatML nor Llama-3 */
    char src[256]; /* where the template came from, for messages */
};

/* Reads a Jinja string literal starting at the quote at s[0], unescaping
 * Python-style escapes, into malloc'ed *out; *next is past the closing
 * quote. Returns 1, 0 when unterminated, -1 when out of memory. */
static int jinja_literal(const char *s, const char *end, char **out, const char **next)
{
    char q = *s++;
    const char *e = s;
    while (e < end && *e != q)
        e += *e == '\\' && e + 1 < end ? 2 : 1;
    *out = NULL;
    if (e >= end)
        return 0;
    char *o = malloc((size_t)(e - s) + 1);
    size_t k = 0;
    if (!o)
        return -1;
    while (s < e) {
        if (*s == '\\' && s + 1 < end) {
            s++;
            switch (*s) {
            case 'n': o[k++] = '\n'; break;
            case 't': o[k++] = '\t'; break;
            case 'r': o[k++] = '\r'; break;
            default: o[k++] = *s; break;
            }
            s++;
        } else {
            o[k++] = *s++;
        }
    }
    o[k] = '\0';
    *out = o;
    *next = e + 1;
    return 1;
}

/* The first string literal inside the template's {{ }} / {% %} tags that is a whole ChatML
 * system turn, malloc'ed into *out (NULL when none).  The template's own text is not looked
 * at: only what it would print. */
static nb_code find_system_turn(const char *tmpl, const char *end, const char *src, char **out,
                                nb_err *err)
{
    static const char pre[] = "<|im_start|>system\n", post[] = "<|im_end|>\n";
    *out = NULL;
    for (const char *p = tmpl; p + 1 < end;) {
        if (!(p[0] == '{' && (p[1] == '{' || p[1] == '%'))) {
            p++;
            continue;
        }
        char close = p[1] == '{' ? '}' : '%';
        p += 2;
        while (p + 1 < end && !(p[0] == close && p[1] == '}')) {
            if (*p != '\'' && *p != '"') {
                p++;
                continue;
            }
            char *lit;
            const char *next;
            int got = jinja_literal(p, end, &lit, &next);
            if (got < 0)
                return nb_err_set(err, NB_ENOMEM, "%s: out of memory", src);
            if (got == 0)
                return NB_OK; /* unterminated literal: nothing more to learn */
            size_t ln = strlen(lit);
            if (ln > sizeof pre - 1 + sizeof post - 1 && !memcmp(lit, pre, sizeof pre - 1) &&
                !memcmp(lit + ln - (sizeof post - 1), post, sizeof post - 1)) {
                *out = lit;
                return NB_OK;
            }
            free(lit);
            p = next;
        }
        p += 2;
    }
    return NB_OK;
}

/* The style and flags of c from the template (or, lacking one, from the vocabulary). */
static nb_code classify(nb_chat *c, const char *tmpl, size_t len, const nb_chat_vocab *v,
                        nb_err *err)
{
    if (!tmpl) {
        c->style = v->has_chatml ? NB_CHAT_CHATML : v->has_llama3 ? NB_CHAT_LLAMA3 : NB_CHAT_NONE;
        c->with_bos = c->style == NB_CHAT_LLAMA3;
        return NB_OK;
    }
    if (memmem(tmpl, len, "<|im_start|>", 12))
        c->style = NB_CHAT_CHATML;
    else if (memmem(tmpl, len, "<|start_header_id|>", 19))
        c->style = NB_CHAT_LLAMA3;
    else {
        c->unknown = 1; /* render() refuses rather than render it wrongly */
        return NB_OK;
    }
    if (c->style == NB_CHAT_CHATML && !v->has_chatml)
        return nb_err_set(err, NB_EFORMAT, "%s: chat template uses <|im_start|>/<|im_end|> "
                          "but the vocabulary lacks them", c->src);
    if (c->style == NB_CHAT_LLAMA3 && !v->has_llama3)
        return nb_err_set(err, NB_EFORMAT, "%s: chat template uses <|start_header_id|> but the "
                          "vocabulary lacks the Llama-3 header/eot tokens", c->src);
    c->with_bos = memmem(tmpl, len, "bos_token", 9) != NULL;
    c->dates = memmem(tmpl, len, "Cutting Knowledge Date", 22) != NULL;
    c->today = memmem(tmpl, len, "strftime_now", 12) != NULL;
    if (c->style == NB_CHAT_CHATML)
        return find_system_turn(tmpl, tmpl + len, c->src, &c->system, err);
    return NB_OK;
}

nb_code nb_chat_parse(const char *tmpl, size_t len, const nb_chat_vocab *v, const char *src,
                      nb_chat **out, nb_err *err)
{
    *out = NULL;
    nb_chat *c = calloc(1, sizeof *c);
    if (!c || (v->bos && !(c->bos = strdup(v->bos)))) {
        free(c);
        return nb_err_set(err, NB_ENOMEM, "%s: out of memory", src);
    }
    snprintf(c->src, sizeof c->src, "%s", src);
    nb_code rc = classify(c, tmpl, len, v, err);
    if (rc) {
        nb_chat_free(c);
        return rc;
    }
    *out = c;
    return NB_OK;
}

void nb_chat_free(nb_chat *c)
{
    if (!c)
        return;
    free(c->system);
    free(c->bos);
    free(c);
}

/* Python's str.isspace, which Jinja's trim uses. */
static int py_space(uint32_t c)
{
    return nb_utf8_is_space(c) || (c >= 0x1c && c <= 0x1f);
}

/* The rendered text, growing; the first failure sticks, so a render is one straight line. */
typedef struct out_buf {
    char *p;
    size_t n, cap;
    int oom;
} out_buf;

static void put(out_buf *b, const char *s, size_t sl)
{
    if (b->oom || sl > SIZE_MAX / 2 - b->n) {
        b->oom = 1;
        return;
    }
    if (b->n + sl + 1 > b->cap) {
        size_t nc = (b->n + sl + 1) * 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, sl);
    b->n += sl;
    b->p[b->n] = '\0';
}

static void put_str(out_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Jinja's `| trim` on [*s, *e): Python whitespace off both ends. */
static void trim_py(const char **s, const char **e)
{
    uint32_t cp;
    while (*s < *e) {
        size_t l = nb_utf8_decode(*s, &cp);
        if (!py_space(cp))
            break;
        *s += l;
    }
    while (*e > *s) {
        const char *q = *e - 1;
        while (q > *s && ((unsigned char)*q & 0xc0) == 0x80)
            q--;
        nb_utf8_decode(q, &cp);
        if (!py_space(cp))
            break;
        *e = q;
    }
}

static void render_llama3(const nb_chat *c, out_buf *b, const char *msg, size_t ml)
{
    const char *s = msg, *e = msg + ml;
    trim_py(&s, &e);
    if (c->with_bos && c->bos)
        put_str(b, c->bos);
    if (c->dates) {
        char day[32] = "26 Jul 2024"; /* the templates' fallback date_string */
        time_t now = time(NULL);
        struct tm tm;
        if (c->today && localtime_r(&now, &tm)) /* HF's strftime_now: local time */
            strftime(day, sizeof day, "%d %b %Y", &tm);
        put_str(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                   "December 2023\nToday Date: ");
        put_str(b, day);
        put_str(b, "\n\n<|eot_id|>");
    }
    put_str(b, "<|start_header_id|>user<|end_header_id|>\n\n");
    put(b, s, (size_t)(e - s));
    put_str(b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

nb_code nb_chat_render(const nb_chat *c, const char *msg, char **out, nb_err *err)
{
    *out = NULL;
    if (!msg)
        return nb_err_set(err, NB_EINVAL, "chat: message is NULL");
    size_t ml = strlen(msg), bad;
    if (!nb_utf8_valid(msg, ml, &bad))
        return nb_err_set(err, NB_EINVAL, "chat: message has invalid UTF-8 at byte offset %zu "
                          "(byte 0x%02x)", bad, (unsigned char)msg[bad]);
    if (c->unknown)
        return nb_err_set(err, NB_EUNSUPPORTED, "%s: chat template is neither ChatML nor "
                          "Llama-3; cannot render it", c->src);
    out_buf b = {0};
    switch (c->style) {
    case NB_CHAT_NONE:
        put(&b, msg, ml);
        break;
    case NB_CHAT_CHATML:
        if (c->system)
            put_str(&b, c->system);
        put_str(&b, "<|im_start|>user\n");
        put(&b, msg, ml);
        put_str(&b, "<|im_end|>\n<|im_start|>assistant\n");
        break;
    case NB_CHAT_LLAMA3:
        render_llama3(c, &b, msg, ml);
        break;
    }
    if (b.oom || !b.p) {
        free(b.p);
        return nb_err_set(err, NB_ENOMEM, "chat: out of memory for a %zu-byte message", ml);
    }
    *out = b.p;
    return NB_OK;
}

nb_chat_style nb_chat_get_style(const nb_chat *c)
{
    return c->style;
}

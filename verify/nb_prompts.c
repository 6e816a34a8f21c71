/* nb_prompts: reads and validates prompt-set files, in the one format docs/mlir-air.md
 * ("Prompt files") defines and verify/prompt_file.py implements for the HF reference. */
#include "nb_prompts.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_sha256.h"
#include "nb_utf8.h"

/* The format follows mlir-air's verify runner, which reads a prompt file with Python's
 * str.splitlines() and str.strip(): these two classes are exactly the code points those
 * treat as line boundaries and as whitespace (tests/test_prompts.c checks every code
 * point against python3), so a prompt is the same text on both sides. */
int nb_prompts_is_line_break(uint32_t c)
{
    return (c >= 0x0a && c <= 0x0d) || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
}

int nb_prompts_is_space(uint32_t c)
{
    return c == 0x09 || nb_prompts_is_line_break(c) || c == 0x1f || c == 0x20 || c == 0xa0 ||
           c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point at s (valid UTF-8, checked before) and its length in *len. */
static uint32_t decode(const unsigned char *s, size_t *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    uint32_t c = s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++)
        c = (c << 6) | (s[i] & 0x3f);
    *len = n;
    return c;
}

/* The start of the code point that ends at s + end (exclusive). */
static size_t prev_start(const unsigned char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && (s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

/* The line (1-based, as the format counts lines) holding byte offset at; [0, at) is valid. */
static int line_of(const unsigned char *d, size_t at)
{
    int line = 1;
    size_t len;
    for (size_t i = 0; i < at; i += len) {
        uint32_t c = decode(d + i, &len);
        line += nb_prompts_is_line_break(c) && !(c == '\r' && i + 1 < at && d[i + 1] == '\n');
    }
    return line;
}

static nb_code push(nb_prompts *p, const char *s, size_t n, nb_err *err)
{
    if (p->n >= NB_PROMPTS_MAX)
        return nb_err_set(err, NB_EINVAL, "%s: more than %d prompts", p->path, NB_PROMPTS_MAX);
    char **items = realloc(p->items, sizeof(char *) * (size_t)(p->n + 1));
    if (!items)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    p->items = items;
    char *c = malloc(n + 1);
    if (!c)
        return nb_err_set(err, NB_ENOMEM, "out of memory");
    memcpy(c, s, n);
    c[n] = '\0';
    p->items[p->n++] = c;
    return NB_OK;
}

/* Line line is data[b, e), without its boundary: checks it, strips it and keeps it
 * unless it is blank or a comment. */
static nb_code take_line(nb_prompts *out, const unsigned char *d, size_t b, size_t e, int line,
                         nb_err *err)
{
    size_t len;
    while (b < e && nb_prompts_is_space(decode(d + b, &len)))
        b += len;
    while (e > b && nb_prompts_is_space(decode(d + prev_start(d, e), &len)))
        e = prev_start(d, e);
    if (b == e || d[b] == '#')
        return NB_OK;
    /* A prompt travels as a C string (and NUL is no text a tokenizer should see). */
    if (memchr(d + b, '\0', e - b))
        return nb_err_set(err, NB_EINVAL, "%s:%d: NUL character in a prompt", out->path, line);
    if (e - b > NB_PROMPT_MAX_BYTES)
        return nb_err_set(err, NB_EINVAL, "%s:%d: prompt of %zu bytes exceeds %d", out->path,
                          line, e - b, NB_PROMPT_MAX_BYTES);
    return push(out, (const char *)d + b, e - b, err);
}

static nb_code parse(nb_prompts *out, const unsigned char *d, size_t n, nb_err *err)
{
    size_t i = 0;
    if (n >= 3 && d[0] == 0xef && d[1] == 0xbb && d[2] == 0xbf)
        i = 3; /* a byte-order mark is no part of the first prompt */
    int line = 1;
    size_t b = i;
    nb_code rc = NB_OK;
    while (i < n && !rc) {
        size_t len;
        uint32_t c = decode(d + i, &len);
        if (!nb_prompts_is_line_break(c)) {
            i += len;
            continue;
        }
        rc = take_line(out, d, b, i, line++, err);
        i += len + (c == '\r' && i + 1 < n && d[i + 1] == '\n');
        b = i;
    }
    if (!rc && b < n)
        rc = take_line(out, d, b, n, line, err);
    return rc;
}

nb_code nb_prompts_load(const char *path, nb_prompts *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    char *data;
    size_t len;
    nb_code rc = nb_file_read(path, (size_t)NB_PROMPTS_MAX * NB_PROMPT_MAX_BYTES, &data, &len, err);
    if (rc)
        return rc;
    nb_sha256_mem_hex(data, len, out->sha256);
    size_t bad;
    if (!nb_utf8_valid(data, len, &bad)) {
        int line = line_of((const unsigned char *)data, bad);
        free(data);
        return nb_err_set(err, NB_EINVAL, "%s:%d: invalid UTF-8 at byte offset %zu", path, line,
                          bad);
    }
    rc = parse(out, (const unsigned char *)data, len, err);
    free(data);
    if (!rc && out->n == 0)
        rc = nb_err_set(err, NB_EINVAL, "%s: no prompts (only comments or blank lines)", path);
    if (rc)
        nb_prompts_free(out);
    return rc;
}

nb_code nb_prompts_single(const char *text, nb_prompts *out, nb_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "--prompt");
    size_t n = strlen(text), bad;
    if (n == 0)
        return nb_err_set(err, NB_EINVAL, "--prompt: empty prompt");
    if (n > NB_PROMPT_MAX_BYTES)
        return nb_err_set(err, NB_EINVAL, "--prompt: %zu bytes exceeds %d", n,
                          NB_PROMPT_MAX_BYTES);
    if (!nb_utf8_valid(text, n, &bad))
        return nb_err_set(err, NB_EINVAL, "--prompt: invalid UTF-8 at byte offset %zu", bad);
    nb_sha256_mem_hex(text, n, out->sha256);
    return push(out, text, n, err);
}

void nb_prompts_free(nb_prompts *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->items[i]);
    free(p->items);
    p->items = NULL;
    p->n = 0;
}

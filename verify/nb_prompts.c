/* nb_prompts: reads and validates prompt-set files.
 * Lines keep their inner whitespace; only the trailing newline (and \r) is dropped. */
#include "nb_prompts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_sha256.h"
#include "nb_utf8.h"

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
        int line = 1;
        for (size_t i = 0; i < bad; i++)
            line += data[i] == '\n';
        free(data);
        return nb_err_set(err, NB_EINVAL, "%s:%d: invalid UTF-8 at byte offset %zu", path, line,
                          bad);
    }
    int line = 0;
    for (size_t i = 0; i < len && !rc;) {
        size_t j = i;
        while (j < len && data[j] != '\n')
            j++;
        line++;
        size_t e = j;
        if (e > i && data[e - 1] == '\r')
            e--;
        size_t s = i;
        while (s < e && (data[s] == ' ' || data[s] == '\t'))
            s++;
        if (s < e && data[s] != '#') {
            if (memchr(data + i, '\0', e - i))
                rc = nb_err_set(err, NB_EINVAL, "%s:%d: NUL byte in prompt", path, line);
            else if (e - i > NB_PROMPT_MAX_BYTES)
                rc = nb_err_set(err, NB_EINVAL, "%s:%d: prompt of %zu bytes exceeds %d", path,
                                line, e - i, NB_PROMPT_MAX_BYTES);
            else
                rc = push(out, data + i, e - i, err);
        }
        i = j + 1;
    }
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

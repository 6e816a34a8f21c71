/* nb_prompts: prompt-set files (format: docs/mlir-air.md, "Prompt files"), read exactly as
 * verify/prompt_file.py reads them. The digest is the sha256 of the file bytes. */
#ifndef NB_PROMPTS_H
#define NB_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

#define NB_PROMPT_MAX_BYTES 65536
#define NB_PROMPTS_MAX 4096

typedef struct nb_prompts {
    char **items;
    int n;
    char sha256[65];
    char path[1024];
} nb_prompts;

/* Loads path: UTF-8 text (a leading byte-order mark dropped), split into lines where
 * Python's str.splitlines() splits, each stripped of the whitespace str.strip() strips;
 * blank lines and lines starting with '#' are skipped, the rest are the prompts in order.
 * NB_EINVAL for invalid UTF-8, a NUL character in a prompt (naming the line), a prompt over
 * NB_PROMPT_MAX_BYTES (naming the line), more than NB_PROMPTS_MAX prompts or none.
 * Caller frees with nb_prompts_free. */
nb_code nb_prompts_load(const char *path, nb_prompts *out, nb_err *err);
/* A one-prompt set from a string (digest of the text). */
nb_code nb_prompts_single(const char *text, nb_prompts *out, nb_err *err);
void nb_prompts_free(nb_prompts *p);

/* The format's two character classes, by Unicode code point: where a line ends (as
 * Python's str.splitlines()) and what surrounding whitespace is stripped (as str.strip()).
 * Public so that tests can check them against Python's, code point by code point. */
int nb_prompts_is_line_break(uint32_t c);
int nb_prompts_is_space(uint32_t c);

#endif

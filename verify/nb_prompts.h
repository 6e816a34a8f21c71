/* nb_prompts: prompt-set files: one prompt per line, '#' comments and blank lines ignored.
 * The set's digest is the sha256 of the file bytes, which is how HF traces are found. */
#ifndef NB_PROMPTS_H
#define NB_PROMPTS_H

#include <stddef.h>

#include "nb_err.h"

#define NB_PROMPT_MAX_BYTES 65536
#define NB_PROMPTS_MAX 4096

typedef struct nb_prompts {
    char **items;
    int n;
    char sha256[65];
    char path[1024];
} nb_prompts;

/* Loads path; invalid UTF-8, over-long lines or too many prompts are
 * NB_EINVAL naming the line. Caller frees with nb_prompts_free. */
nb_code nb_prompts_load(const char *path, nb_prompts *out, nb_err *err);
/* A one-prompt set from a string (digest of the text). */
nb_code nb_prompts_single(const char *text, nb_prompts *out, nb_err *err);
void nb_prompts_free(nb_prompts *p);

#endif

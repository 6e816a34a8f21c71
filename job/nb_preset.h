/* nb_preset: the preset catalog: the words a model selector may use instead of a path, the
 * file each names under the models directory, the model's name and its prompt set. */
#ifndef NB_PRESET_H
#define NB_PRESET_H

typedef struct nb_preset {
    const char *word;    /* "instruct", "base", "gemma3" */
    const char *file;    /* under the models directory */
    const char *model;   /* the name the history and matching know it by: what a path to
                          * the file canonicalizes to (nb_job_model_canon: its stem less the
                          * quantisation tag, "gemma-3-270m") */
    const char *prompts; /* its prompt set: verify/prompts/<prompts>.txt */
} nb_preset;

/* The preset of word (exact), or NULL. */
const nb_preset *nb_preset_find(const char *word);
/* The model name a preset word stands for ("instruct" -> "SmolLM2-135M-Instruct"), or NULL
 * when word is no preset.  Needs no file system. */
const char *nb_preset_model(const char *word);
/* The prompt set of a preset word; the first preset's ("instruct") for anything else. */
const char *nb_preset_prompts(const char *word);

#endif

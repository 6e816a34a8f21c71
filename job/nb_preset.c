/* nb_preset: the catalog itself, one row per preset word; the engine resolves the file, the
 * matching rule and the prompt sets read the rest. */
#include "nb_preset.h"

#include <string.h>

static const nb_preset presets[] = {
    {"instruct", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct", "instruct"},
    {"base", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct", "base"},
    {"gemma3", "gemma-3-270m-q4_k_m.gguf", "gemma-3-270m", "gemma3"},
};

const nb_preset *nb_preset_find(const char *word)
{
    for (size_t i = 0; word && i < sizeof presets / sizeof *presets; i++)
        if (!strcmp(word, presets[i].word))
            return &presets[i];
    return NULL;
}

const char *nb_preset_model(const char *word)
{
    const nb_preset *p = nb_preset_find(word);
    return p ? p->model : NULL;
}

const char *nb_preset_prompts(const char *word)
{
    const nb_preset *p = nb_preset_find(word);
    return (p ? p : &presets[0])->prompts;
}

/* nb_chat: chat templates apart from the vocabulary — which template family a model's
 * chat_template is, and rendering one user turn as HF's apply_chat_template does. */
#ifndef NB_CHAT_H
#define NB_CHAT_H

#include <stddef.h>

#include "nb_err.h"

typedef enum nb_chat_style {
    NB_CHAT_NONE = 0,  /* base model: no template */
    NB_CHAT_CHATML,    /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen) */
    NB_CHAT_LLAMA3     /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
} nb_chat_style;

/* What a template may use from the vocabulary it comes with. */
typedef struct nb_chat_vocab {
    int has_chatml;  /* <|im_start|> and <|im_end|> are tokens */
    int has_llama3;  /* <|start_header_id|>, <|end_header_id|> and <|eot_id|> are tokens */
    const char *bos; /* the bos_token's text, or NULL when the model has none */
} nb_chat_vocab;

typedef struct nb_chat nb_chat;

/* The chat style of tmpl[0, len) (NULL: no template, so the style follows the vocabulary)
 * and the parts of the template a single user turn depends on: ChatML's default system turn,
 * Llama-3's bos_token and date header.  A template that is neither ChatML nor Llama-3 loads
 * but does not render.  NB_EFORMAT naming src when the template uses tokens the vocabulary
 * lacks.  Free *out with nb_chat_free. */
nb_code nb_chat_parse(const char *tmpl, size_t len, const nb_chat_vocab *v, const char *src,
                      nb_chat **out, nb_err *err);
void nb_chat_free(nb_chat *c);

/* Wraps one user message in the template with the assistant turn opened
 * (add_generation_prompt), as HF's apply_chat_template renders it, including a default
 * system turn the template injects (SmolLM2, Qwen2.5) and Llama-3's bos_token / 3.1 date
 * header.  *out is malloc'ed.  NB_CHAT_NONE copies the message unchanged; a template that
 * is neither ChatML nor Llama-3 is NB_EUNSUPPORTED; invalid UTF-8 is NB_EINVAL. */
nb_code nb_chat_render(const nb_chat *c, const char *user_msg, char **out, nb_err *err);

nb_chat_style nb_chat_get_style(const nb_chat *c);

#endif

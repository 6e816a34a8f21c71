/* nb_tokenizer: byte-level BPE (GPT-2 family) from GGUF metadata or an HF
 * tokenizer.json, with the model's pre-tokenizer regex, special tokens and chat template. */
#ifndef NB_TOKENIZER_H
#define NB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"
#include "nb_gguf.h"

typedef struct nb_tokenizer nb_tokenizer;

typedef enum nb_chat_style {
    NB_CHAT_NONE = 0,  /* base model: no template */
    NB_CHAT_CHATML,    /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen) */
    NB_CHAT_LLAMA3     /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
} nb_chat_style;

nb_code nb_tokenizer_from_gguf(const nb_gguf *g, nb_tokenizer **out, nb_err *err);
nb_code nb_tokenizer_from_hf_json(const char *tokenizer_json_path, nb_tokenizer **out,
                                  nb_err *err);
void nb_tokenizer_free(nb_tokenizer *t);

/* Encodes UTF-8 text (invalid UTF-8 is NB_EINVAL naming the byte offset).
 * add_bos: prepend BOS when the model's metadata asks for it.
 * parse_special: text matching a special token becomes that token.
 * *ids is malloc'ed and owned by the caller. */
nb_code nb_tokenizer_encode(const nb_tokenizer *t, const char *text, size_t len, int add_bos,
                            int parse_special, int32_t **ids, size_t *n_ids, nb_err *err);

/* Decodes ids to UTF-8 (byte-level tokens mapped back to raw bytes; special
 * tokens rendered as their text unless skip_special). *text is malloc'ed,
 * NUL-terminated; invalid ids are NB_EINVAL. */
nb_code nb_tokenizer_decode(const nb_tokenizer *t, const int32_t *ids, size_t n_ids,
                            int skip_special, char **text, size_t *len, nb_err *err);

/* Wraps one user message in the model's chat template with the assistant
 * turn opened (add_generation_prompt). *out is malloc'ed. NB_CHAT_NONE
 * copies the message unchanged. */
nb_code nb_tokenizer_chat(const nb_tokenizer *t, const char *user_msg, char **out, nb_err *err);

nb_chat_style nb_tokenizer_chat_style(const nb_tokenizer *t);
size_t nb_tokenizer_vocab(const nb_tokenizer *t);
int32_t nb_tokenizer_bos(const nb_tokenizer *t); /* -1 when none */
int32_t nb_tokenizer_eos(const nb_tokenizer *t); /* -1 when none */
int nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id); /* eos, eot, im_end */
/* "smollm", "llama-bpe", "gpt2", ... as recognised. */
const char *nb_tokenizer_pre_name(const nb_tokenizer *t);

#endif

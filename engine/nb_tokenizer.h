/* nb_tokenizer: byte-level BPE (GPT-2 family) from GGUF metadata or an HF tokenizer.json, and
 * the SentencePiece-style vocabulary of Gemma GGUF files, with special tokens; the chat
 * template it loads is rendered by nb_chat. */
#ifndef NB_TOKENIZER_H
#define NB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "nb_chat.h"
#include "nb_err.h"
#include "nb_gguf.h"

typedef struct nb_tokenizer nb_tokenizer;


/* Both loaders reproduce what transformers 5 AutoTokenizer builds from the
 * same source. From GGUF, tokenizer.ggml.model picks the kind: "gpt2" uses
 * transformers' "pre" table, so "smollm" gets GPT-2's split with no digit
 * split (llama.cpp would split digits), no unk token; "llama" (SentencePiece)
 * is supported for the gemma architectures as transformers' Gemma builder
 * has it: spaces as U+2581, byte fallback <0xHH>, merges derived from the
 * token order (not the scores, as llama.cpp's SPM does), BOS added unless
 * the file says not; other architectures are NB_EUNSUPPORTED. From
 * tokenizer.json: that file's pipeline, with bos/eos/chat_template/add_bos
 * from a tokenizer_config.json beside it; when that names tokenizer_class
 * GPT2Tokenizer (SmolLM2's), transformers uses the class's own GPT-2
 * ByteLevel pipeline instead of the file's, and so do we. *out is freed with
 * nb_tokenizer_free; a loaded tokenizer is read-only and thread-safe. */
nb_code nb_tokenizer_from_gguf(const nb_gguf *g, nb_tokenizer **out, nb_err *err);
nb_code nb_tokenizer_from_hf_json(const char *tokenizer_json_path, nb_tokenizer **out,
                                  nb_err *err);
void nb_tokenizer_free(nb_tokenizer *t);

/* Encodes UTF-8 text (invalid UTF-8 is NB_EINVAL naming the byte offset).
 * add_bos: add the model's special tokens as HF's add_special_tokens=True
 * does (BOS when the metadata / post-processor asks for it; EOS likewise).
 * parse_special: text matching a special token becomes that token (HF's
 * default; 0 is split_special_tokens=True). Non-special added tokens
 * (GGUF user-defined) always match.
 * *ids is malloc'ed and owned by the caller. */
nb_code nb_tokenizer_encode(const nb_tokenizer *t, const char *text, size_t len, int add_bos,
                            int parse_special, int32_t **ids, size_t *n_ids, nb_err *err);

/* Decodes ids to UTF-8 (byte-level tokens mapped back to raw bytes; special
 * tokens rendered as their text unless skip_special). *text is malloc'ed,
 * NUL-terminated; invalid ids are NB_EINVAL. As in HF's decode, bytes that
 * do not form valid UTF-8 (a character cut at a token boundary) become one
 * U+FFFD per maximal invalid subpart; use nb_tokenizer_piece for raw bytes. */
nb_code nb_tokenizer_decode(const nb_tokenizer *t, const int32_t *ids, size_t n_ids,
                            int skip_special, char **text, size_t *len, nb_err *err);

/* The raw bytes token id decodes to (possibly part of a UTF-8 character),
 * owned by t. NB_EINVAL for an id out of range. */
nb_code nb_tokenizer_piece(const nb_tokenizer *t, int32_t id, const char **bytes, size_t *len,
                           nb_err *err);
/* Id of the token spelled exactly so in the vocabulary (byte-alphabet
 * spelling, e.g. "<|im_end|>" or "\xc4\xa0the"), or -1. */
int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *token);

/* nb_chat_render with the model's chat template (tokenizer.chat_template or
 * tokenizer_config.json's). Encode the result with parse_special=1 and
 * add_bos=0, as apply_chat_template(tokenize=True) does. */
nb_code nb_tokenizer_chat(const nb_tokenizer *t, const char *user_msg, char **out, nb_err *err);

nb_chat_style nb_tokenizer_chat_style(const nb_tokenizer *t);
size_t nb_tokenizer_vocab(const nb_tokenizer *t);
int32_t nb_tokenizer_bos(const nb_tokenizer *t); /* -1 when none */
int32_t nb_tokenizer_eos(const nb_tokenizer *t); /* -1 when none */
int nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id); /* eos, eot, im_end */
/* "smollm", "llama-bpe", "gpt2", ... as recognised; "gemma" for the SentencePiece kind. */
const char *nb_tokenizer_pre_name(const nb_tokenizer *t);

#endif

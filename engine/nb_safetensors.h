/* nb_safetensors: safetensors checkpoints (one file, or shards named by a
 * model.safetensors.index.json) as nb_tensor views over private mmaps. */
#ifndef NB_SAFETENSORS_H
#define NB_SAFETENSORS_H

#include <stddef.h>

#include "nb_err.h"
#include "nb_tensor.h"

/* One opened checkpoint: every tensor of every shard, one flat namespace. */
typedef struct nb_safetensors nb_safetensors;

/* path: a .safetensors file, or an index JSON whose "weight_map" names the
 * shards (file names relative to the index's directory, no '/'). Every
 * header is validated at open: dtype (BF16, F16, F32; other dtypes are
 * NB_EUNSUPPORTED), shape, data_offsets within the file and matching
 * numel * dtype size; a name in two shards, or an index entry its shard
 * lacks, is NB_EFORMAT. The result owns all mappings; close it. */
nb_code nb_safetensors_open(const char *path, nb_safetensors **out, nb_err *err);
/* An HF model directory: model.safetensors.index.json when present, else
 * model.safetensors. */
nb_code nb_safetensors_open_dir(const char *dir, nb_safetensors **out, nb_err *err);
void nb_safetensors_close(nb_safetensors *st);

/* The path given to open (the file or the index). */
const char *nb_safetensors_path(const nb_safetensors *st);
size_t nb_safetensors_n_files(const nb_safetensors *st);

/* Tensors, sorted by name. Views are valid until nb_safetensors_close. The
 * view's type is NB_TT_BF16/F16/F32; cols is the last dimension, rows the
 * product of the others (1 for 1-D and 0-D tensors); qk_perm_heads is 0. */
size_t nb_safetensors_n_tensors(const nb_safetensors *st);
nb_code nb_safetensors_tensor_at(const nb_safetensors *st, size_t i, nb_tensor *out,
                                 nb_err *err);
/* NB_ENOTFOUND naming the tensor and the checkpoint when absent. */
nb_code nb_safetensors_find(const nb_safetensors *st, const char *name, nb_tensor *out,
                            nb_err *err);
/* The file holding tensor `name`, or NULL. */
const char *nb_safetensors_file_of(const nb_safetensors *st, const char *name);

#endif

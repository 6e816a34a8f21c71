/* nb_mmap: read-only private mappings of whole model files.
 * Shared by the GGUF and safetensors readers so both fail the same way. */
#ifndef NB_MMAP_H
#define NB_MMAP_H

#include <stddef.h>
#include <stdint.h>

#include "nb_err.h"

typedef struct nb_mmap {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
} nb_mmap;

/* Maps a regular file (PROT_READ, MAP_PRIVATE). Missing file: NB_ENOTFOUND;
 * not a regular file: NB_EINVAL; other failures: NB_EIO. An empty file
 * succeeds with data == NULL, size == 0. Release with nb_mmap_close. */
nb_code nb_mmap_open(const char *path, nb_mmap *m, nb_err *err);
void nb_mmap_close(nb_mmap *m);

#endif

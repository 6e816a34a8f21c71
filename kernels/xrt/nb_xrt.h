/* nb_xrt: the NPU (AMD XDNA via XRT) device probe, isolated in a child process.
 * XRT's C API throws C++ exceptions through C and aborts without XILINX_XRT or a device; we never call it in-process. */
#ifndef NB_XRT_H
#define NB_XRT_H

#include <stddef.h>

#include "nb_err.h"

/* 1 when npubench was built against libxrt. */
int nb_xrt_built(void);

/* Opens XRT device `index` in a forked child and reports what it found
 * (info: a one-line description). NB_EUNAVAIL with the reason when XRT is
 * not built in, XILINX_XRT is unset, no device exists, or the child died. */
nb_code nb_xrt_probe(unsigned index, char *info, size_t cap, nb_err *err);

#endif

/* nb_backend_xrt: the XRT (NPU) backend's table: the device probe (kernels/xrt/, in a child
 * process) and an open that says why nothing runs in process yet. */
#include "nb_backend.h"

#include "nb_deploy.h"
#include "nb_xrt.h"

/* A device exists (the probe ran first), but the NPU kernels for a model family are built
 * by the deployment's own toolchain: such a deployment runs through exec. */
static nb_code xrt_open(nb_deploy *d, void **be, nb_err *err)
{
    *be = NULL;
    return nb_err_set(err, NB_EUNSUPPORTED,
                      "xrt backend: %s, but no in-process NPU kernels are available for %s; "
                      "use an exec deployment",
                      d->device_info, d->spec.model);
}

const nb_backend_ops nb_backend_xrt = {
    .name = "xrt",
    .caps = NB_BACKEND_DEVICE | NB_BACKEND_READS_MODEL | NB_BACKEND_PROMPT_RANGES,
    .built = nb_xrt_built,
    .probe = nb_xrt_probe,
    .open = xrt_open,
};

/* nb_backend_exec: the exec backend's table: a deployment defined by command lines
 * (worker/nb_exec*), which runs whole jobs; nothing of it opens in this process. */
#include "nb_backend.h"

/* The commands sit above engine/ (they build job results); the worker's executor runs them
 * where a table says NB_BACKEND_WHOLE_JOB.  Prompt ranges: where the verify-full command
 * takes {prompt_begin} and {prompt_end} (nb_exec_deploy_takes_range). */
const nb_backend_ops nb_backend_exec = {
    .name = "exec",
    .caps = NB_BACKEND_WHOLE_JOB | NB_BACKEND_PROMPT_RANGES,
};

/* nb_limits: every limit and default of a job in one header, as SQLite keeps sqliteLimit.h:
 * the spec's validation, the CLI's option ranges, the deployments file and the worker read
 * them here, so no two places can disagree. */
#ifndef NB_LIMITS_H
#define NB_LIMITS_H

#include "nb_step.h"

/* ---- the spec (nb_job_validate_spec; the coordinator refuses submits past them) -------- */
#define NB_JOB_N_TOKENS_MAX 4096
#define NB_JOB_K_MAX NB_GATE_K_MAX        /* the gate's top-k */
#define NB_JOB_REPS_MAX 100
#define NB_JOB_WARMUP_MAX 100
#define NB_JOB_PROMPT_MAX_BYTES 65536
#define NB_JOB_PROMPTS_MAX 4096
#define NB_JOB_PARAMS_MAX 64
#define NB_JOB_PARAM_KEY_MAX 64
#define NB_JOB_PARAM_VALUE_MAX 4096
#define NB_JOB_PRIORITY_MAX 1000          /* priorities run -MAX..MAX */
#define NB_JOB_PRIORITY_CLIENT_MAX 100    /* above it, a submission needs the admin role */
#define NB_JOB_TIMEOUT_MS_MAX (7LL * 24 * 3600 * 1000)
#define NB_JOB_EXPIRE_MS_MAX (30LL * 24 * 3600 * 1000) /* a queued job's expiry, 30 days */
#define NB_JOB_SHARDS_MAX 4096

/* ---- a deployment (job params, the deployments file, --threads, --device) ------------- */
#define NB_JOB_THREADS_MAX 1024           /* kernel threads; 0 = all cores */
#define NB_JOB_MAX_SEQ_MAX (1 << 20)      /* KV cache length; 0 = the engine's default */
#define NB_JOB_DEVICE_MAX 255             /* a device index: KIND:0..255 */

/* ---- defaults the worker applies to a 0 field ----------------------------------------- */
#define NB_JOB_RUN_REPS_DEFAULT 3       /* RUN / PROFILE, after one warm-up */
#define NB_JOB_RUN_N_TOKENS_DEFAULT 100 /* RUN */
#define NB_JOB_PROFILE_N_TOKENS_DEFAULT 20
#define NB_JOB_VERIFY_PROMPTS 2         /* VERIFY: the first 2 prompts */
#define NB_JOB_VERIFY_K 5               /* VERIFY: top-5 */
#define NB_JOB_VERIFY_N_TOKENS 32       /* VERIFY: 32 tokens per prompt */

#endif

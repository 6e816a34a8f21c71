/* nb_air: one resident mlir-air verify adapter behind a pipe: spawns engine/air_host.py with a
 * deployment's Python, holds mlir-air's device lock, speaks its framed protocol (version 1). */
#ifndef NB_AIR_H
#define NB_AIR_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nb_err.h"

#define NB_AIR_PROTOCOL 1
/* mlir-air's Makefiles and docs wrap every NPU command in `flock -x -w 1800` on this file. */
#define NB_AIR_LOCK_DEFAULT "/tmp/mlir-air-npu.lock"

/* A deployments-file entry's "air" object (docs/service.md, "air deployments"). */
typedef struct nb_air_cfg {
    char llms_dir[1024]; /* mlir-air's programming_examples/llms (required) */
    char adapter[256];   /* dotted module under llms_dir: "llama32_1b.verify_adapter" (required) */
    char model[256];     /* a MODEL_CHOICES key or an HF id; "" = the adapter's DEFAULT_MODEL */
    int max_seq;         /* build_runner's max_seq [2048, verify_runner.py's] */
    char python[1024];   /* the interpreter with mlir-air's environment ["python3"] */
    char host[1024];     /* the host module [NB_SOURCE_DIR/engine/air_host.py] */
    char **env;          /* "K=V" added to the worker's environment less NPUBENCH_* (owned) */
    char cwd[1024];      /* "" = llms_dir */
    char lock[1024];     /* the device lock [NB_AIR_LOCK_DEFAULT]; "" = none */
    char tokenizer[8];   /* "auto" (transformers when importable), "hf" (required), "none" */
    int npu_attn;        /* build_runner's npu_attn [1] */
    int64_t lock_wait_ms, setup_timeout_ms, step_timeout_ms, grace_ms;
    size_t max_frame;    /* largest answer accepted [256 MiB] */
    int64_t backoff_ms, backoff_max_ms; /* restart delay after a crash: doubles up to the max */
} nb_air_cfg;

void nb_air_cfg_default(nb_air_cfg *c);
/* Fills c (defaults first) from an "air" object; errors name what and the field:
 * "deployments.json: deployments[1].air.max_seq 0: expected 1..1048576". */
nb_code nb_air_cfg_parse(json_object *o, const char *what, nb_air_cfg *c, nb_err *err);
/* Deep copy (env); dst is overwritten. */
nb_code nb_air_cfg_copy(nb_air_cfg *dst, const nb_air_cfg *src, nb_err *err);
void nb_air_cfg_clear(nb_air_cfg *c);

typedef struct nb_air nb_air;

/* What the host said at setup, and the life of the process behind it. */
typedef struct nb_air_info {
    pid_t pid;            /* the running host, 0 when none */
    int setups;           /* build_runner calls so far (one per host start) */
    int crashes;          /* hosts lost to a crash, a hang or a broken frame */
    double setup_ms;      /* the last build_config + build_runner, host-side */
    int n_layers;         /* config.n_layers (0 when the config has none) */
    int tokenizer;        /* the host can TOKENIZE */
    int layers;           /* the runner gives per-layer states on request */
    char runner[64], model_name[256], hf_reference[256];
} nb_air_info;

/* Called for each line the host prints (its stderr and stdout), as it arrives. */
typedef void (*nb_air_line_fn)(void *user, const char *line);
/* Polled while waiting for the lock or a restart's backoff; non-zero gives NB_ECANCELED. */
typedef int (*nb_air_cancel_fn)(void *user);

/* Copies cfg; takes the lock, starts the host, handshakes and sets up (build_runner once).
 * Errors carry the host's stderr tail ("air host exited (status 1) during SETUP; its stderr
 * ends: ... ModuleNotFoundError ..."). */
nb_code nb_air_open(const nb_air_cfg *cfg, nb_air **out, nb_err *err);
/* Stops the host (SHUTDOWN, then SIGTERM to its group after grace_ms, SIGKILL 1 s later),
 * releases the lock, frees h.  NULL ok. */
void nb_air_close(nb_air *h);
/* The lock and the host are given up now; the next call starts a new host. */
void nb_air_drain(nb_air *h);

void nb_air_set_hooks(nb_air *h, nb_air_line_fn line, nb_air_cancel_fn cancel, void *user);
void nb_air_info_get(const nb_air *h, nb_air_info *out);
/* The last bytes the host printed (at most cap - 1), for errors and logs. */
void nb_air_tail(const nb_air *h, char *buf, size_t cap);

typedef struct nb_air_prefill_out {
    const float *logits; /* [vocab] at the last prompt position */
    int vocab;
    int32_t top1;
    double host_ms;      /* runner.prefill as timed inside the host */
    double call_ms;      /* the whole round trip, as timed here */
    /* With want_layers and a runner that gives them (else n_layers 0 and NULLs):
     * ffn_out[l] = [n][dim], layer l's output (mlir-air's BLOCK_PROBE); attn[l] the residual
     * after its attention block where the adapter gives "attn_residual" (else NULL);
     * final_normed [n][dim] the last layer's output after the final norm (or NULL). */
    int n_layers, n_pos, dim;
    const float *const *ffn_out;
    const float *const *attn;
    const float *final_normed;
} nb_air_prefill_out;

typedef struct nb_air_step_out {
    const float *logits;
    int vocab;
    int32_t top1;
    double host_ms, call_ms;
} nb_air_step_out;

/* runner.prefill(ids) (a fresh sequence).  Everything out points to stays valid until h's
 * next call.  A host that dies, hangs past step_timeout_ms or answers a broken frame is
 * killed (the next call starts another after the backoff): NB_EIO / NB_ETIMEOUT with its
 * stderr tail.  The adapter raising: NB_EIO with its message, the host kept; a request the
 * host refuses: NB_EINVAL. */
nb_code nb_air_prefill(nb_air *h, const int32_t *ids, int n, int want_layers,
                       nb_air_prefill_out *out, nb_err *err);
/* runner.decode_step(token, pos). */
nb_code nb_air_decode_step(nb_air *h, int32_t token, int pos, nb_air_step_out *out, nb_err *err);
/* The adapter's tokenizer's encode(text): *ids malloc'ed.  NB_EUNSUPPORTED without one. */
nb_code nb_air_tokenize(nb_air *h, const char *text, int32_t **ids, int *n, nb_err *err);

/* For tests: sends a raw frame header + body as is and reads the answer's message. */
nb_code nb_air_raw(nb_air *h, const void *bytes, size_t len, char *answer, size_t cap,
                   nb_err *err);

#endif

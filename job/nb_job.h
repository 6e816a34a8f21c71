/* nb_job: what a job is, in one place for coordinator, worker and CLI alike: its kinds and
 * states with their names, the spec's limits and defaults, spec validation, and the one rule
 * that decides whether a model selector names a deployment's model. */
#ifndef NB_JOB_H
#define NB_JOB_H

#include <stddef.h>

#include "nb_err.h"
#include "nb_limits.h"
#include "npubench.pb-c.h"

/* ---- limits and defaults: nb_limits.h ----------------------------------------------- */

/* ---- kinds ------------------------------------------------------------------------------ */

/* ---- a kind's typed parameters ------------------------------------------------------------
 * Every knob a job takes is one row here: a JobSpec field (n_tokens, k, reps, max_prompts: 0
 * on the wire means "the kind's default") or a params entry (threads, warmup, localize ...).
 * Validation (nb_job_validate_spec), the reader (nb_job_params_read), `submit`'s options and
 * the worker go through the rows; none of them spells a key. */

typedef enum nb_job_ptype {
    NB_JOB_PT_INT,  /* an integer lo..hi */
    NB_JOB_PT_ENUM, /* one of names[]; read as its index */
    NB_JOB_PT_TEXT  /* free text (a trace name, a digest) */
} nb_job_ptype;

typedef struct nb_job_param_desc {
    const char *key;          /* the params key, or the JobSpec field's name when in_spec */
    nb_job_ptype type;
    int in_spec;              /* a JobSpec int32 field (at spec_off), not a params entry */
    size_t spec_off;          /* in_spec: offsetof(Npubench__JobSpec, field) */
    size_t field;             /* offsetof(nb_job_params, member): long (INT, ENUM), char* (TEXT) */
    long lo, hi;              /* INT: the limits (job/nb_limits.h); ENUM: 0..count-1 */
    const char *const *names; /* ENUM: the values, NULL-terminated */
    const char *option;       /* `npubench submit --OPTION` that sets it; NULL: none */
    const char *help;
} nb_job_param_desc;

/* One parameter of one kind: its row and what applies when the job leaves it unset. */
typedef struct nb_job_kind_param {
    const nb_job_param_desc *p;
    long dflt;           /* INT / ENUM: the kind's default, within lo..hi */
    const char *inherit; /* non-NULL: unset leaves it to this ("the deployment's", "the
                          * reference trace's") and dflt only documents the engine's value */
} nb_job_kind_param;

/* One descriptor per job kind: everything the layers know about a kind is read here, so a new
 * kind is one descriptor plus one executor function. */
typedef struct nb_job_kind_desc {
    int kind;             /* npubench.JobKind */
    const char *name;     /* "verify-full": the CLI word, the queue's and history's kind, logs */
    const char *exec_key; /* "verify_full": its command's key in a deployments file's exec */
    const char *family;   /* what its runs store and are compared as: "verify" (gate records),
                           * "diagnosis" (layer cosines), "performance" (metrics), "health" */
    const char *stores;   /* in words, for help and docs: what one run of it keeps */
    const char *shard;    /* the queue's kind of its prompt-range shards; NULL: never split */
    int regression;       /* the regression check applies to its runs */
    const char *help;     /* one line: the CLI's command table prints it beside the word */
    const nb_job_kind_param *params; /* its parameters, ended by {NULL} */
} nb_job_kind_desc;

/* The kinds in order (i = 0..); NULL past the last. */
const nb_job_kind_desc *nb_job_kind_at(size_t i);
/* Every parameter row (i = 0..), NULL past the last. */
const nb_job_param_desc *nb_job_param_at(size_t i);
/* The row of key (a params key or JobSpec field name), NULL when none. */
const nb_job_param_desc *nb_job_param_find(const char *key);
/* Kind d's entry for key; NULL when the kind does not take it. */
const nb_job_kind_param *nb_job_kind_param_of(const nb_job_kind_desc *d, const char *key);
/* "run, verify, verify-full, diagnosis, profile or health" into buf, for messages. */
const char *nb_job_kind_list(char *buf, size_t cap);

/* The descriptor of npubench.JobKind kind, NULL when there is none. */
const nb_job_kind_desc *nb_job_kind_desc_of(int kind);
/* npubench.JobKind -> "run", "verify", "verify-full", "diagnosis", "profile", "health";
 * "unknown" otherwise.  These are the names the CLI takes, the history stores and logs print. */
const char *nb_job_kind_name(int kind);
/* The inverse, also accepting the exec key ("verify_full", as deployments files key their
 * commands); 0 (JOB_KIND_UNSPECIFIED) when unknown. */
int nb_job_kind_parse(const char *name);
/* The kind of a queued job's kind column: a kind's name or its shards' ("verify-full-shard"
 * is VERIFY_FULL); 0 when neither. */
int nb_job_kind_parse_queued(const char *name);
/* 1 when name is the queue's kind of some kind's shards. */
int nb_job_kind_is_shard(const char *name);
/* The family of a run's kind as stored (a kind's name or shard name, or an imported kind such
 * as "bench" or "sweep", which measure performance). */
const char *nb_job_kind_family(const char *name);
/* The families (nb_job_kind_desc.family): how a kind's results are printed, reported, laid out
 * in a matrix and traced is its family's, so a new kind of a family touches none of those. */
#define NB_JOB_FAMILY_VERIFY "verify"           /* gate records, against a prompt set's trace */
#define NB_JOB_FAMILY_DIAGNOSIS "diagnosis"     /* layer cosines, against one prompt's trace */
#define NB_JOB_FAMILY_PERFORMANCE "performance" /* metrics, under the regression check */
#define NB_JOB_FAMILY_HEALTH "health"           /* a board's health check */
/* 1 when npubench.JobKind kind has a descriptor of family (an NB_JOB_FAMILY_*), else 0. */
int nb_job_kind_is(int kind, const char *family);

/* The queue's kind of a group made by `submit --matrix` (one child job per board). */
#define NB_JOB_GROUP_MATRIX "matrix"

/* ---- states ----------------------------------------------------------------------------- */

/* queued -> leased -> running -> done | failed, and cancelled from any non-terminal state.
 * An expired or released lease goes back to queued (attempts + 1) or to failed once
 * attempts reach their limit.  npubench.JobState is this + 1 (0 there means "any"). */
typedef enum nb_job_state {
    NB_JOB_QUEUED = 0,
    NB_JOB_LEASED,
    NB_JOB_RUNNING,
    NB_JOB_DONE,
    NB_JOB_FAILED,
    NB_JOB_CANCELLED
} nb_job_state;

#define NB_JOB_STATE_BIT(s) (1u << (s))

/* "queued" ... "cancelled"; "unknown" otherwise. */
const char *nb_job_state_name(nb_job_state s);
/* NB_EINVAL naming the word and the states when s is none of them. */
nb_code nb_job_state_parse(const char *s, nb_job_state *out, nb_err *err);
int nb_job_state_terminal(nb_job_state s);
/* npubench.JobState <-> nb_job_state; the name of a wire state, "any" for 0. */
int nb_job_state_to_pb(nb_job_state s);
const char *nb_job_pb_state_name(int pb_state);

/* ---- validation ------------------------------------------------------------------------ */

/* NB_EINVAL naming the field and its limit ("JobSpec.n_tokens 5000: must be 0..4096")
 * for: kind unset/unknown; n_tokens, k (0..NB_GATE_K_MAX), reps, max_prompts,
 * priority, timeout_ms out of range; a shard with begin < 0, end <= begin, or end past
 * max_prompts; oversize or non-UTF-8 prompts; too many prompts or params; params
 * with an empty key, a duplicate key or a bad value for the keys the worker reads
 * (threads, max_seq, warmup, chat, ignore_eos, device: integers in range).  Pure. */
nb_code nb_job_validate_spec(const Npubench__JobSpec *spec, nb_err *err);

/* When a verify record gets a localization: on every FAIL with a divergence (the default),
 * also on a PASS with a divergence (--localize), or never. */
typedef enum nb_localize_when {
    NB_LOCALIZE_FAIL = 0,
    NB_LOCALIZE_DIVERGENCE,
    NB_LOCALIZE_OFF
} nb_localize_when;

/* "fail", "divergence" or "off" (the `localize` job param and --localize); NB_EINVAL naming
 * field otherwise. */
nb_code nb_job_localize_parse(const char *s, const char *field, nb_localize_when *out,
                              nb_err *err);

/* A prompt set is named, never a path: NB_EINVAL naming JobSpec.prompt_set for a name that
 * is not a plain file name (nb_file_plain_name) and so could reach outside the sets' root. */
nb_code nb_job_prompt_set_check(const char *name, nb_err *err);

/* ---- typed params: the keys (the rows above carry their types and limits) ------------- */

#define NB_JOB_PARAM_THREADS "threads"       /* kernel threads, 0..NB_JOB_THREADS_MAX */
#define NB_JOB_PARAM_MAX_SEQ "max_seq"       /* KV cache length, 0..NB_JOB_MAX_SEQ_MAX */
#define NB_JOB_PARAM_DEVICE "device"         /* device index, 0..NB_JOB_DEVICE_MAX */
#define NB_JOB_PARAM_WARMUP "warmup"         /* RUN / PROFILE: untimed runs, 0..MAX */
#define NB_JOB_PARAM_CHAT "chat"             /* RUN / PROFILE: 0 raw prompt, 1 chat template */
#define NB_JOB_PARAM_IGNORE_EOS "ignore_eos" /* RUN: 1 generates every token */
#define NB_JOB_PARAM_LOCALIZE "localize"     /* VERIFY*: fail, divergence or off */
#define NB_JOB_PARAM_STRICT "strict"         /* VERIFY*: 1 = a decode-path defect fails a PASS */
#define NB_JOB_PARAM_REFERENCE "reference"   /* VERIFY*, DIAGNOSIS: a trace (embedded client) */
/* VERIFY* with explicit prompts: the sha256 of the file they came from (it names the trace) */
#define NB_JOB_PARAM_PROMPTS_SHA256 "prompts_sha256"

/* A spec's parameters, read once through the rows (after nb_job_validate_spec), each with
 * its kind's default applied; where unset and the kind's entry inherits (or the kind does not
 * take it): -1 for a params entry (NULL for text), 0 for a JobSpec field. */
typedef struct nb_job_params {
    long n_tokens, k, reps, max_prompts; /* JobSpec fields */
    long threads, max_seq, device, warmup, chat, ignore_eos;
    long strict;   /* verify: 1 = a decode-path defect fails a gate PASS */
    long localize; /* an nb_localize_when */
    const char *reference; /* borrowed from the spec */
    const char *prompts_sha256; /* borrowed; the runner uses only a 64-hex-digit value */
} nb_job_params;

/* Fills p from s's fields and params; a value that does not parse counts as unset
 * (validation refuses it before any worker reads it). */
void nb_job_params_read(const Npubench__JobSpec *s, nb_job_params *p);
/* v when set (>= 0), else dflt. */
long nb_job_param_or(long v, long dflt);
/* Sets row p's value v on spec s: a JobSpec field, or a params entry written into kv (its
 * value into buf[cap], which must outlive s) and appended to s->params (room for one more
 * pointer at s->params[s->n_params] is the caller's). */
void nb_job_param_set(Npubench__JobSpec *s, const nb_job_param_desc *p, long v,
                      Npubench__KeyValue *kv, char *buf, size_t cap);

/* ---- model matching ------------------------------------------------------------------- */

/* The canonical form of a model name, path or preset word: the model's one display name
 * (history, workers, job, JUnit, dashboard) and what comparisons use. A preset word
 * ("instruct", "gemma3") becomes its model's name, a path its basename, and the ".gguf"
 * extension and a trailing quantisation tag after '-', '_' or '.' (q4_0 .. q8_0, q4_k_m,
 * q6_k, iq4_xs, f16, bf16, f32, any case: the dtype is the deployment's, not the model's)
 * are dropped: "models/SmolLM2-135M-Instruct.Q4_1.gguf" and "instruct" are both
 * "SmolLM2-135M-Instruct", "gemma-3-270m-q4_k_m.gguf" is "gemma-3-270m". The GGUF's
 * general.name is no input (free text: "Smollm2 135M 8k Lc100K Mix1 Ep2"); it is an alias
 * (db/nb_db_alias.h). Needs no file system, so coordinator and dashboard derive the same. */
void nb_job_model_canon(const char *model, char *out, size_t cap);

/* How well selector sel names a deployment whose model is model and whose name is name
 * (NULL ok): 3 = exactly (case-insensitively) the model or the name, 2 = the same canonical
 * model, 1 = sel is empty or "*" (anything), 0 = no.  Callers that must pick one of several
 * deployments take the highest. */
int nb_job_model_match(const char *sel, const char *model, const char *name);

/* One other name of a model (a weights digest, GGUF general.name, a preset word, mlir-air's
 * model key) and the canonical name it stands for; the history keeps them (db/nb_db_alias.h),
 * the deployments file declares them. */
#define NB_JOB_MODEL_ALIASES_MAX 16 /* aliases one deployment may declare */

typedef struct nb_job_alias {
    const char *alias, *model;
} nb_job_alias;

/* The canonical name of name under aliases[0..n): the model of the alias that names it,
 * as given or in its nb_job_model_canon form (case-insensitively), else name itself. */
const char *nb_job_model_resolve(const char *name, const nb_job_alias *aliases, size_t n);

/* nb_job_model_match, where two names also match (2) when aliases give them the same
 * canonical name: "llama32_1b" names a "Llama-3.2-1B-Instruct" deployment once the
 * deployments file says so.  With n == 0 it is nb_job_model_match. */
int nb_job_model_match_aliased(const char *sel, const char *model, const char *name,
                               const nb_job_alias *aliases, size_t n);

/* How well sel names a deployment of model (its name: NULL ok) that declares canonical (NULL
 * or "": nb_job_model_canon(model)) and aliases[0..n) (a deployments file's "canonical" and
 * "aliases"): nb_job_model_match, or 2 where sel is one of the declared names. The one rule
 * the coordinator (lease, submit) and the worker (which entry runs the job) match by. */
int nb_job_model_match_declared(const char *sel, const char *model, const char *name,
                                const char *canonical, const char *const *aliases, size_t n);

/* ---- a worker's deployments as people read them (`workers`, the dashboard) ------------- */

/* The display name of an advertised deployment: its declared canonical name, else its
 * model's nb_job_model_canon ("instruct" is "SmolLM2-135M-Instruct"); buf or d's. */
const char *nb_job_dep_name(const Npubench__Deployment *d, char *buf, size_t cap);
/* The dtype its results are stored under: the worker's stored_dtype, else as declared. */
const char *nb_job_dep_stored_dtype(const Npubench__Deployment *d);
/* The first of deps[0..k] that is the same deployment as deps[k] (the same display name,
 * backend, weights and stored dtype: a file declared as q4_1 and as native is one, as its
 * results are): k itself when none before it is. A listing shows each deployment once, at
 * its first entry. */
size_t nb_job_dep_first(Npubench__Deployment *const *deps, size_t k);
/* Entry k's deployment (k its first entry) as one item of a listing, the other dtypes its
 * entries in deps[0..n) were declared as beside it: "SmolLM2-135M-Instruct cpu/q4_1 (also
 * native)"; several joined by also_sep. */
void nb_job_dep_text(Npubench__Deployment *const *deps, size_t n, size_t k,
                     const char *also_sep, char *out, size_t cap);

/* ---- worker matching: the one rule the queue's lease (db/), the scheduler (coordinator/)
 * and the worker's choice of deployment (worker/) apply ------------------------------------ */

/* A deployment as matching sees it: advertised by a worker, configured in one, or asked for.
 * NULL, "" or "*" in a field: anything. */
typedef struct nb_job_dep {
    const char *model, *backend, *dtype;
    const char *name; /* the deployment's label (a selector may name it); NULL: none */
    /* its declared names (a deployments file's "canonical" and "aliases"): a selector naming
     * one of them names it (nb_job_model_match_declared); NULL / 0: none */
    const char *canonical;
    const char *const *aliases;
    size_t n_aliases;
    /* npubench.Dtype of an engine dtype; 0 (UNSPECIFIED): none, compare the dtype names */
    int dtype_id;
} nb_job_dep;

/* How well deployment d serves a job asking for want: 0 no, else nb_job_model_match_declared's
 * 1..3 (d's declared names included).
 * The backend is compared exactly (a backend table's name), the dtype as the enum when both
 * sides carry one (dtype_id), else its name case-insensitively;
 * a field that is empty or "*" on either side matches anything. */
int nb_job_dep_match(const nb_job_dep *want, const nb_job_dep *d);
/* The index of the deployment of deps[0..n) that serves want best (the first of equals), -1
 * when none does; *score (may be NULL) gets its nb_job_dep_match. */
int nb_job_dep_pick(const nb_job_dep *want, const nb_job_dep *deps, size_t n, int *score);

/* Where a job asks to run (its selector's worker-level part); NULL or "": anywhere. */
typedef struct nb_job_place {
    const char *worker;     /* pinned to this worker id */
    const char *board, *board_type;
    const char *tags;       /* comma list, every one needed (spaces around items ignored) */
} nb_job_place;

/* A worker as a place: its id, board and board type, and whether it carries a tag. */
typedef struct nb_job_host {
    const char *id, *board, *board_type;
    int (*has_tag)(const void *user, const char *tag);
    const void *user;
} nb_job_host;

/* 1 when h is a place p allows; else 0 and why ("pinned to worker 'w'", "needs board 'b';
 * worker 'w' is on 'c'", "needs board type ...", "needs tag 't'; worker 'w' is not tagged
 * so"); why may be NULL. */
int nb_job_place_fits(const nb_job_place *p, const nb_job_host *h, char *why, size_t cap);

#endif

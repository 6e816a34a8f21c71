/* nb_cli: subcommand dispatch for the npubench binary.
 * Each subcommand parses its own flags and returns an exit code. */
#include "nb_cli.h"

#include <stdio.h>
#include <string.h>

#include "nb_cmd.h"
#include "nb_job.h"
#include "nb_outcome.h"
#include "nb_term.h"
#include "nb_version.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

/* The job kinds run here on this machine: each one's word and help are its descriptor's
 * (job/nb_job.c), so the commands and `submit KIND` never disagree. */
static const struct {
    int kind; /* npubench.JobKind */
    int (*fn)(int argc, char **argv);
} KIND_COMMANDS[] = {
    {NPUBENCH__JOB_KIND__RUN, nb_cmd_run},
    {NPUBENCH__JOB_KIND__VERIFY, nb_cmd_verify},
    {NPUBENCH__JOB_KIND__VERIFY_FULL, nb_cmd_verify_full},
    {NPUBENCH__JOB_KIND__DIAGNOSIS, nb_cmd_diagnosis},
    {NPUBENCH__JOB_KIND__PROFILE, nb_cmd_profile},
};
#define N_KIND_COMMANDS (sizeof KIND_COMMANDS / sizeof *KIND_COMMANDS)

static const command COMMANDS[] = {
    {"tokenize", nb_cmd_tokenize, "the ids and pieces the tokenizer gives a text or prompt file"},
    {"coordinator", nb_cmd_coordinator, "serve the job queue and history: --listen URL --db PATH"},
    {"submit", nb_cmd_submit, "submit a job to a coordinator (--wait: progress + result)"},
    {"jobs", nb_cmd_jobs, "list jobs (state, target, worker, why queued)"},
    {"job", nb_cmd_job, "one job: state, shards, result, log"},
    {"wait", nb_cmd_wait, "wait for jobs to finish; exit by their outcome"},
    {"cancel", nb_cmd_cancel, "cancel a queued or running job"},
    {"workers", nb_cmd_workers, "registered workers and their health"},
    {"history", nb_cmd_history, "past runs of a model: TTFT, TPS, gate, regressions"},
    {"regressions", nb_cmd_regressions,
     "flagged regressions (new, acknowledged, fixed); ack ID --note, close ID"},
    {"compare", nb_cmd_compare, "compare two runs, or a run against the reference"},
    {"reference", nb_cmd_reference, "reference set DEPLOYMENT: the model's reference"},
    {"import", nb_cmd_import, "load perf.json / history.ndjson into the history"},
    {"air", nb_cmd_air, "air scan LLMS_DIR: mlir-air's LLM examples as a deployments file"},
    {"report", nb_cmd_dash, "the dashboard as static files: report --html DIR"},
    {"worker", nb_cmd_worker, "serve a coordinator's jobs on this board's device (long-lived)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: npubench <command> [options]   (npubench <command> --help)\n\n");
    for (size_t i = 0; i < N_KIND_COMMANDS; i++) {
        const nb_job_kind_desc *d = nb_job_kind_desc_of(KIND_COMMANDS[i].kind);
        fprintf(f, "  %-14s %s\n", d->name, d->help);
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        fprintf(f, "  %-14s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n%s\n", NB_OC_EXIT_HELP);
}

int nb_cli_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return NB_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return NB_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("npubench %s (%s)\n", NB_VERSION, nb_commit());
        return NB_EXIT_OK;
    }
    /* these print text from jobs, workers and results: no control byte of theirs reaches
     * the terminal */
    static const char *const untrusted[] = {"jobs", "job", "history", "workers", "regressions",
                                              NULL};
    for (size_t i = 0; untrusted[i]; i++)
        if (!strcmp(argv[1], untrusted[i]))
            nb_term_guard_stdout();
    for (size_t i = 0; i < N_KIND_COMMANDS; i++)
        if (!strcmp(argv[1], nb_job_kind_desc_of(KIND_COMMANDS[i].kind)->name))
            return KIND_COMMANDS[i].fn(argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name))
            return COMMANDS[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "npubench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return NB_EXIT_USAGE;
}

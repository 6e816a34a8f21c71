/* nb_coord_alias: the names a model goes by, learnt as workers advertise deployments and as
 * results arrive, recorded in the history's alias table (db/nb_db_alias.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nb_coord_int.h"
#include "nb_db_alias.h"

/* A digest prefix long enough to be unique in one lab's history and short enough to type;
 * the trace files and logs print the same 16 hex digits. */
#define DIGEST_ALIAS_HEX 16

/* Best effort: a name that cannot be recorded costs an alias, never the result. */
static void record(nb_coord *c, const char *canonical, const char *name, const char *origin)
{
    if (!name || !*name || !canonical || !*canonical || !strcasecmp(name, canonical))
        return;
    nb_err err;
    if (nb_db_alias_set(c->db, name, canonical, origin, &err))
        nb_coord_log(c, "model alias '%.80s' -> '%.80s' not recorded: %s", name, canonical,
                  err.msg);
}

static void record_digest(nb_coord *c, const char *canonical, const char *digest,
                          const char *origin)
{
    if (!digest || strlen(digest) < DIGEST_ALIAS_HEX)
        return;
    char shortd[DIGEST_ALIAS_HEX + 1];
    snprintf(shortd, sizeof shortd, "%.*s", DIGEST_ALIAS_HEX, digest);
    record(c, canonical, digest, origin);
    record(c, canonical, shortd, origin);
}

void nb_coord_alias_from_deployment(nb_coord *c, const Npubench__Deployment *d)
{
    char canon[NB_DB_NAME_MAX];
    if (*d->canonical)
        snprintf(canon, sizeof canon, "%s", d->canonical);
    else
        nb_job_model_canon(d->model, canon, sizeof canon);
    record(c, canon, d->model, "deployments");
    for (size_t i = 0; i < d->n_aliases; i++)
        record(c, canon, d->aliases[i], "deployments");
    record_digest(c, canon, d->digest, "deployments");
}

void nb_coord_alias_from_result(nb_coord *c, const Npubench__JobResult *res, const char *canonical)
{
    const Npubench__Environment *env = res->environment;
    if (!env)
        return;
    /* env->model is GGUF general.name (free text) or the deployment's selector. */
    record(c, canonical, env->model, "result");
    record_digest(c, canonical, env->model_digest, "result");
}

nb_code nb_coord_alias_table(nb_coord *c, nb_coord_aliases *t, nb_err *err)
{
    memset(t, 0, sizeof *t);
    nb_code rc = nb_db_alias_list(c->db, &t->raw, &t->n, err);
    if (rc)
        return rc;
    t->al = t->n ? calloc(t->n, sizeof *t->al) : NULL;
    if (t->n && !t->al) {
        nb_coord_aliases_free(t);
        return nb_err_set(err, NB_ENOMEM, "model aliases: out of memory");
    }
    for (size_t i = 0; i < t->n; i++)
        t->al[i] = (nb_job_alias){t->raw[i].alias, t->raw[i].model};
    return NB_OK;
}

void nb_coord_aliases_free(nb_coord_aliases *t)
{
    free(t->al);
    free(t->raw);
    memset(t, 0, sizeof *t);
}

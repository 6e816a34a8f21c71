/* nb_cmd_params: the job kinds' parameter options, made from job/'s parameter rows once for
 * every command that submits jobs (submit, submit matrix), and put on a JobSpec. */
#include "nb_cmd.h"

#include "nb_job.h"

int nb_cmd_params_opts(nb_cmd_params *p, const nb_opt *head, int n_head, const nb_opt *tail,
                       int n_tail, nb_opt *opts)
{
    int n = 0;
    for (int i = 0; i < n_head; i++)
        opts[n++] = head[i];
    for (size_t i = 0; nb_job_param_at(i) && i < NB_CMD_PARAMS_MAX; i++) {
        const nb_job_param_desc *d = nb_job_param_at(i);
        if (d->option && d->type == NB_JOB_PT_INT)
            opts[n++] = (nb_opt){d->option, NB_OPT_INT, &p->value[i], d->lo, d->hi, d->help};
    }
    for (int i = 0; i < n_tail; i++)
        opts[n++] = tail[i];
    return n;
}

void nb_cmd_params_apply(const nb_cmd_params *p, Npubench__JobSpec *spec,
                         nb_cmd_params_buf *buf)
{
    spec->params = buf->kvp;
    for (size_t i = 0; nb_job_param_at(i) && i < NB_CMD_PARAMS_MAX; i++)
        if (p->value[i] > 0)
            nb_job_param_set(spec, nb_job_param_at(i), p->value[i], &buf->kv[i], buf->val[i],
                             sizeof buf->val[i]);
}

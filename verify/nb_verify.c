/* nb_verify: a verify's records and what the coordinator does with them (free, merge shards,
 * summarise), the prompt sets' and references' places; the run is verify/runner/nb_verify_run. */
#include "nb_verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_file.h"
#include "nb_preset.h"

const char *nb_verify_preset_set(const char *model)
{
    return nb_preset_prompts(model);
}

void nb_verify_default_prompts(const char *preset, char *buf, size_t cap)
{
    const char *set = nb_preset_prompts(preset);
    snprintf(buf, cap, "verify/prompts/%s.txt", set);
    if (!nb_file_exists(buf))
        snprintf(buf, cap, "%s/verify/prompts/%s.txt", NB_SOURCE_DIR, set);
}

nb_code nb_verify_prompt_set_path(const char *root, const char *name, char *buf, size_t cap,
                                  nb_err *err)
{
    nb_code rc = nb_job_prompt_set_check(name, err);
    if (rc)
        return rc;
    char dir[1024];
    if (root && *root) {
        snprintf(dir, sizeof dir, "%s", root);
    } else {
        nb_verify_default_prompts("instruct", dir, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf(buf, cap, "%s/%s.txt", dir, name);
    return NB_OK;
}

const char *nb_verify_default_refdir(void)
{
    return nb_file_exists("verify/references") ? "verify/references"
                                               : NB_SOURCE_DIR "/verify/references";
}

const char *nb_verify_trace_warning(const nb_verify_result *r, char *buf, size_t cap)
{
    if (!r->trace_dtype[0] || !strcmp(r->trace_dtype, "bfloat16"))
        snprintf(buf, cap, "%s", "");
    else
        snprintf(buf, cap, "the reference is %.31s%s%.95s, not bfloat16: its logits carry no "
                 "bf16 rounding, so margins and near ties read against it are not the bf16 "
                 "gate's (docs/numerics.md)", r->trace_dtype, r->trace_device[0] ? " on " : "",
                 r->trace_device);
    return buf;
}

const char *nb_verify_record_word(const nb_verify_record *v)
{
    if (v->gate.status != NB_GATE_PASS)
        return "FAIL";
    if (v->strict_fail)
        return "FAIL (decode-path defect, --strict)";
    return v->dcheck.status == NB_LOC_KV_FAULT ? "PASS (decode-path defect)" : "PASS";
}

const char *nb_verify_result_word(const nb_verify_result *r, char *buf, size_t cap)
{
    if (r->status != NB_GATE_PASS)
        snprintf(buf, cap, "FAIL");
    else if (r->n_decode_faults)
        snprintf(buf, cap, "PASS (%d decode-path defect%s)", r->n_decode_faults,
                 r->n_decode_faults == 1 ? "" : "s");
    else
        snprintf(buf, cap, "PASS");
    return buf;
}

void nb_verify_summarise(nb_verify_result *r)
{
    r->n_pass = r->n_fail = r->n_decode_faults = 0;
    r->dcheck_ms = 0;
    for (int i = 0; i < r->n; i++) {
        nb_verify_record *v = &r->recs[i];
        int defect = v->dcheck.status == NB_LOC_KV_FAULT;
        r->n_decode_faults += defect;
        r->dcheck_ms += isnan(v->dcheck.ms) ? 0 : v->dcheck.ms;
        v->strict_fail = r->strict && defect && v->gate.status == NB_GATE_PASS;
        if (v->gate.status == NB_GATE_PASS && !v->strict_fail)
            r->n_pass++;
        else
            r->n_fail++;
    }
    r->status = r->n_fail ? NB_GATE_FAIL : NB_GATE_PASS;
}

static void free_record(nb_verify_record *r)
{
    free(r->prompt);
    free(r->dev);
    free(r->ref);
    free(r->dev_token_text);
    free(r->ref_token_text);
    free(r->agreed_text);
    free(r->dev_text);
    free(r->ref_text);
    nb_localize_free(&r->loc);
}

void nb_verify_result_free(nb_verify_result *r)
{
    for (int i = 0; i < r->n; i++)
        free_record(&r->recs[i]);
    free(r->recs);
    memset(r, 0, sizeof *r);
}

nb_code nb_verify_merge(nb_verify_result *dst, nb_verify_result *src, nb_err *err)
{
    nb_verify_record *recs =
        realloc(dst->recs, sizeof *recs * (size_t)(dst->n + src->n > 0 ? dst->n + src->n : 1));
    if (!recs)
        return nb_err_set(err, NB_ENOMEM, "out of memory merging shards");
    dst->recs = recs;
    memcpy(dst->recs + dst->n, src->recs, sizeof *recs * (size_t)src->n);
    dst->n += src->n;
    if (!dst->prompts_path[0]) {
        memcpy(dst->prompts_path, src->prompts_path, sizeof dst->prompts_path);
        memcpy(dst->prompts_sha256, src->prompts_sha256, sizeof dst->prompts_sha256);
        memcpy(dst->trace_path, src->trace_path, sizeof dst->trace_path);
        memcpy(dst->trace_sha256, src->trace_sha256, sizeof dst->trace_sha256);
        dst->k = src->k;
        dst->n_tokens = src->n_tokens;
        dst->strict = src->strict;
        memcpy(dst->trace_dtype, src->trace_dtype, sizeof dst->trace_dtype);
        memcpy(dst->trace_device, src->trace_device, sizeof dst->trace_device);
    }
    dst->wall_ms += src->wall_ms;
    free(src->recs);
    src->recs = NULL;
    src->n = 0;
    /* shards arrive in any order; reports list prompts in set order */
    for (int i = 1; i < dst->n; i++)
        for (int j = i; j > 0 && dst->recs[j - 1].index > dst->recs[j].index; j--) {
            nb_verify_record t = dst->recs[j];
            dst->recs[j] = dst->recs[j - 1];
            dst->recs[j - 1] = t;
        }
    nb_verify_summarise(dst);
    return NB_OK;
}

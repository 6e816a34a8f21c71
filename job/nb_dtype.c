/* nb_dtype: the names of the dtypes, both ways; the only place a dtype is spelled. */
#include "nb_dtype.h"

#include <string.h>

#include "npubench.pb-c.h"

const char *nb_dtype_name(nb_dtype d)
{
    switch (d) {
    case NB_DTYPE_BF16: return "bf16";
    case NB_DTYPE_F32: return "f32";
    case NB_DTYPE_Q4_1: return "q4_1";
    case NB_DTYPE_NATIVE: return "native";
    }
    return "?";
}

nb_code nb_dtype_parse(const char *s, nb_dtype *out, nb_err *err)
{
    if (!s)
        s = "";
    if (!strcmp(s, "bf16"))
        *out = NB_DTYPE_BF16;
    else if (!strcmp(s, "f32") || !strcmp(s, "fp32"))
        *out = NB_DTYPE_F32;
    else if (!strcmp(s, "q4_1"))
        *out = NB_DTYPE_Q4_1;
    else if (!strcmp(s, "native"))
        *out = NB_DTYPE_NATIVE;
    else
        return nb_err_set(err, NB_EINVAL, "dtype '%s': expected bf16, f32, q4_1 or native", s);
    return NB_OK;
}

int nb_dtype_to_pb(nb_dtype d)
{
    switch (d) {
    case NB_DTYPE_BF16: return NPUBENCH__DTYPE__DTYPE_BF16;
    case NB_DTYPE_F32: return NPUBENCH__DTYPE__DTYPE_F32;
    case NB_DTYPE_Q4_1: return NPUBENCH__DTYPE__DTYPE_Q4_1;
    case NB_DTYPE_NATIVE: return NPUBENCH__DTYPE__DTYPE_NATIVE;
    }
    return NPUBENCH__DTYPE__DTYPE_UNSPECIFIED;
}

int nb_dtype_from_pb(int pb, nb_dtype *out)
{
    static const nb_dtype all[] = {NB_DTYPE_BF16, NB_DTYPE_F32, NB_DTYPE_Q4_1, NB_DTYPE_NATIVE};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (pb != NPUBENCH__DTYPE__DTYPE_UNSPECIFIED && nb_dtype_to_pb(all[i]) == pb) {
            *out = all[i];
            return 0;
        }
    return -1;
}

int nb_dtype_pb_of_name(const char *name)
{
    nb_dtype d;
    if (!name || nb_dtype_parse(name, &d, NULL) || strcmp(name, nb_dtype_name(d)))
        return NPUBENCH__DTYPE__DTYPE_UNSPECIFIED;
    return nb_dtype_to_pb(d);
}

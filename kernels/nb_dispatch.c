/* nb_dispatch: picks the kernel path at run time from CPUID and NPUBENCH_ISA,
 * and owns the thread-count setting. */
#include "nb_kernels_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const nb_kernel_table *active;
static int n_threads = 1;

const char *nb_isa_name(nb_isa isa)
{
    switch (isa) {
    case NB_ISA_PORTABLE: return "portable";
    case NB_ISA_AVX2: return "avx2";
    case NB_ISA_AVX512BF16: return "avx512bf16";
    }
    return "?";
}

static const nb_kernel_table *table_for(nb_isa isa)
{
    (void)isa; /* faster paths register here */
    return &nb_kernels_portable;
}

static nb_isa detect(void)
{
    nb_isa best = NB_ISA_PORTABLE;
    const char *cap = getenv("NPUBENCH_ISA");
    if (cap && !strcmp(cap, "portable"))
        return NB_ISA_PORTABLE;
    return best;
}

const nb_kernel_table *nb_kernels_active(void)
{
    if (!active)
        active = table_for(detect());
    return active;
}

nb_isa nb_kernels_isa(void)
{
    return nb_kernels_active()->isa;
}

nb_code nb_kernels_set_isa(nb_isa isa, nb_err *err)
{
    if (isa != NB_ISA_PORTABLE && isa > detect())
        return nb_err_set(err, NB_EUNSUPPORTED, "kernel path %s is not supported on this CPU",
                          nb_isa_name(isa));
    active = table_for(isa);
    return NB_OK;
}

nb_code nb_kernels_init(int threads, nb_err *err)
{
    if (threads < 0 || threads > 1024)
        return nb_err_set(err, NB_EINVAL, "--threads %d: must be 0 (all cores) to 1024", threads);
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    n_threads = threads;
    return NB_OK;
}

int nb_kernels_threads(void)
{
    return n_threads;
}

void nb_kernels_shutdown(void)
{
}

/* nb_dispatch: picks the kernel path at run time from CPUID, XGETBV and NPUBENCH_ISA.
 * Compiled for baseline x86-64 like everything but the ISA files. */
#include "nb_kernels_impl.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NB_X86 1
#endif

static _Atomic(const nb_kernel_table *) active;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static nb_isa cpu_best = NB_ISA_PORTABLE; /* what the CPU and OS support */
static nb_isa env_best = NB_ISA_PORTABLE; /* capped by NPUBENCH_ISA */

const char *nb_isa_name(nb_isa isa)
{
    switch (isa) {
    case NB_ISA_PORTABLE: return "portable";
    case NB_ISA_AVX2: return "avx2";
    case NB_ISA_AVX512BF16: return "avx512bf16";
    case NB_ISA_AMXBF16: return "amx-bf16";
    }
    return "?";
}

/* Built once from the AVX2 table (detect), overriding the bf16 linear and
 * the weight layout; the AMX table is that one with the tile kernel. */
static nb_kernel_table avx512bf16_table, amxbf16_table;

static const nb_kernel_table *table_for(nb_isa isa)
{
    switch (isa) {
    case NB_ISA_AMXBF16: return &amxbf16_table;
    case NB_ISA_AVX512BF16: return &avx512bf16_table;
    case NB_ISA_AVX2: return &nb_kernels_avx2;
    case NB_ISA_PORTABLE: break;
    }
    return &nb_kernels_portable;
}

/* The decision from what probe_cpu read, nothing else: a test hands it any host (an AMX CPU
 * whose tile state the kernel refuses, an OS that does not save ZMM state, ...). AVX-512 VNNI
 * picks the quantized decode kernels of the AVX-512 and AMX paths (nb_avx512_kquant.c) and the
 * AVX-512 path's quantized prefill (the int8 tile loop on zmm registers, nb_amx_vnni.c), not a
 * path of its own; AMX-INT8 likewise adds quantized prefill (every block type) on the int8
 * tiles to the AMX path (same tile state and permission as AMX-BF16). */
void nb_dispatch_pick(const nb_cpu_facts *f, nb_dispatch_choice *out)
{
    memset(out, 0, sizeof *out);
    out->best = NB_ISA_PORTABLE;
    if (!f->osxsave || !f->avx || (f->xcr0 & 0x6) != 0x6) /* XMM and YMM state */
        return;
    if (!f->avx2 || !f->fma || !f->f16c)
        return;
    out->best = NB_ISA_AVX2;
    int zmm_state = (f->xcr0 & 0xe6) == 0xe6; /* opmask, ZMM_Hi256, Hi16_ZMM */
    if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512bf16 && zmm_state))
        return;
    out->best = NB_ISA_AVX512BF16;
    out->vnni = f->vnni;
    int tile_state = (f->xcr0 & 0x60000) == 0x60000; /* XTILECFG, XTILEDATA */
    if (f->amx_bf16 && f->amx_tile && tile_state && f->tiles_permitted) {
        out->best = NB_ISA_AMXBF16;
        out->amx_int8 = f->amx_int8;
    }
}

/* Both tables from the AVX2 one, for a choice: what detect installs, and what the test of a
 * refused tile state reads. */
void nb_dispatch_build(const nb_dispatch_choice *c, nb_kernel_table *avx512,
                       nb_kernel_table *amx)
{
    *avx512 = nb_kernels_avx2;
    avx512->isa = NB_ISA_AVX512BF16;
    avx512->linear_bf16 = nb_avx512_linear_bf16;
    avx512->wmat_finish = nb_avx512_wmat_finish;
    avx512->attn_scores4 = nb_avx512_attn_scores4;
    avx512->attn_pv = nb_avx512_attn_pv;
    if (c->vnni) {
        avx512->q8_0_gemv8 = nb_avx512_q8_0_gemv8;
        avx512->q4_1_gemv8 = nb_avx512_q4_1_gemv8;
        avx512->q5_0_gemv8 = nb_avx512_q5_0_gemv8;
        avx512->q4_k_gemv8 = nb_avx512_q4_k_gemv8;
        avx512->q6_k_gemv8 = nb_avx512_q6_k_gemv8;
        avx512->kq_gemm = &nb_avx512_kq_gemm;
        /* quantized prefill on the int8 tile loop, its tiles on zmm registers (issue 26) */
        avx512->linear_bf16 = nb_amx_vnni_linear_int8;
    }
    *amx = *avx512;
    amx->isa = NB_ISA_AMXBF16;
    amx->linear_bf16 = c->amx_int8 ? nb_amx_linear_int8 : nb_amx_linear_bf16;
    amx->linear_bf16_rows = nb_avx512_linear_bf16; /* the AMX path's own decode kernel */
}

#ifdef NB_X86
/* XCR0: which register state the OS saves on context switch. A CPU with
 * AVX-512 under an OS that does not save ZMM state must not use it. */
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux enables the 8 KiB of tile data per process on request only
 * (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA; kernel 5.16+); the
 * grant covers every thread, present and future. Refused (older kernel, a
 * sigaltstack too small, a seccomp filter) means no AMX: the first tile
 * instruction would fault, so the AVX-512 path runs instead. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_permitted(void)
{
#ifdef SYS_arch_prctl
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static void probe_cpu(nb_dispatch_choice *out)
{
    nb_cpu_facts f = {0};
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        f.osxsave = (c >> 27) & 1;
        f.avx = (c >> 28) & 1;
        f.fma = (c >> 12) & 1;
        f.f16c = (c >> 29) & 1;
    }
    if (f.osxsave && f.avx)
        f.xcr0 = xgetbv0();
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        unsigned max_sub = a;
        f.avx2 = (b >> 5) & 1;
        f.avx512f = (b >> 16) & 1;
        f.avx512bw = (b >> 30) & 1;
        f.avx512vl = (b >> 31) & 1;
        f.vnni = (c >> 11) & 1;
        f.amx_bf16 = (d >> 22) & 1;
        f.amx_tile = (d >> 24) & 1;
        f.amx_int8 = (d >> 25) & 1;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f.avx512bf16 = (a >> 5) & 1;
        }
    }
    /* Ask for the tile state only where everything else says AMX: the request is a syscall
     * with a lasting effect on the process. */
    f.tiles_permitted = 1;
    nb_dispatch_pick(&f, out);
    if (out->best == NB_ISA_AMXBF16 && !amx_permitted()) {
        f.tiles_permitted = 0;
        nb_dispatch_pick(&f, out);
    }
}
#else
static void probe_cpu(nb_dispatch_choice *out)
{
    nb_cpu_facts f = {0};
    nb_dispatch_pick(&f, out);
}
#endif

static void detect(void)
{
    nb_dispatch_choice c;
    probe_cpu(&c);
    cpu_best = c.best;
    nb_dispatch_build(&c, &avx512bf16_table, &amxbf16_table);
    env_best = cpu_best;
    const char *cap = getenv("NPUBENCH_ISA");
    if (cap && *cap) {
        /* An unknown name caps to portable: a typo must not silently run
         * the fastest path when the user asked for a slower one. */
        nb_isa want = NB_ISA_PORTABLE;
        if (!strcmp(cap, "avx2"))
            want = NB_ISA_AVX2;
        else if (!strcmp(cap, "avx512bf16"))
            want = NB_ISA_AVX512BF16;
        else if (!strcmp(cap, "amx-bf16"))
            want = NB_ISA_AMXBF16;
        if (want < env_best)
            env_best = want;
    }
}

nb_isa nb_kernels_cpu_isa(void)
{
    pthread_once(&detect_once, detect);
    return cpu_best;
}

const nb_kernel_table *nb_kernels_active(void)
{
    const nb_kernel_table *t = atomic_load_explicit(&active, memory_order_acquire);
    if (t)
        return t;
    pthread_once(&detect_once, detect);
    t = table_for(env_best);
    const nb_kernel_table *expected = NULL;
    if (!atomic_compare_exchange_strong(&active, &expected, t))
        t = expected;
    return t;
}

nb_isa nb_kernels_isa(void)
{
    return nb_kernels_active()->isa;
}

nb_code nb_kernels_set_isa(nb_isa isa, nb_err *err)
{
    pthread_once(&detect_once, detect);
    if (isa < NB_ISA_PORTABLE || isa > NB_ISA_AMXBF16)
        return nb_err_set(err, NB_EINVAL, "kernel path %d: no such path", (int)isa);
    if (isa > nb_kernels_cpu_isa())
        return nb_err_set(err, NB_EUNSUPPORTED,
                          "kernel path %s is not supported on this CPU (best: %s)",
                          nb_isa_name(isa), nb_isa_name(cpu_best));
    atomic_store_explicit(&active, table_for(isa), memory_order_release);
    return NB_OK;
}

void nb_kernels_use_table(const nb_kernel_table *t)
{
    pthread_once(&detect_once, detect);
    atomic_store_explicit(&active, t ? t : table_for(env_best), memory_order_release);
}

/* The CPU feature probe and GM_ISA; see gm/cpu.h. */
#include "gm/cpu.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define UNPROBED (1u << 31) /* not a feature bit: has not been probed yet */

/* Relaxed atomics: any thread may ask first, and every probe gives the same answer. */
static atomic_uint has = UNPROBED;
static atomic_uint env_mask = UNPROBED; /* what GM_ISA allows */

#if defined(__x86_64__)
static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

enum { ARCH_REQ_XCOMP_PERM_ = 0x1023, XFEATURE_XTILEDATA_ = 18 }; /* linux/arch/x86/include/uapi/asm/prctl.h */
#endif

static unsigned probe(void)
{
    unsigned f = 0;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
        return 0;
    const unsigned long long x = xcr0();
    if ((x & 0x6) != 0x6) /* the OS saves the SSE and AVX state */
        return 0;
    const int fma = (c & bit_FMA) != 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if ((b & bit_AVX2) && fma)
        f |= GM_CPU_AVX2 | GM_CPU_FMA;
    const unsigned avx512 = bit_AVX512F | bit_AVX512BW | bit_AVX512VL;
    if ((f & GM_CPU_AVX2) && (b & avx512) == avx512 && (x & 0xE0) == 0xE0) /* opmask, ZMM_Hi256, Hi16_ZMM */
        f |= GM_CPU_AVX512;
    const int amx = (d & (1u << 22)) && (d & (1u << 24)); /* AMX-BF16, AMX-TILE */
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    if ((f & GM_CPU_AVX512) && (a1 & (1u << 5))) /* AVX512_BF16 */
        f |= GM_CPU_AVX512_BF16;
    /* the tile state must be enabled in XCR0 (XTILECFG, XTILEDATA) and granted to this process */
    if ((f & GM_CPU_AVX512) && amx && (x & 0x60000) == 0x60000 &&
        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0)
        f |= GM_CPU_AMX_BF16;
    (void)a, (void)b1, (void)c1, (void)d1;
#endif
    return f;
}

static unsigned probed(void)
{
    unsigned h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h & UNPROBED) {
        h = probe();
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h;
}

static const struct {
    const char *name;
    unsigned mask;
} tiers[] = {
    {"amx", ~0u},
    {"avx512", GM_CPU_AVX2 | GM_CPU_FMA | GM_CPU_AVX512 | GM_CPU_AVX512_BF16},
    {"avx2", GM_CPU_AVX2 | GM_CPU_FMA},
    {"portable", 0},
};

/* The extensions a tier needs, at the least, to be the one that runs. */
static unsigned needs(const char *name)
{
    if (!strcmp(name, "amx"))
        return GM_CPU_AMX_BF16 | GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA;
    if (!strcmp(name, "avx512"))
        return GM_CPU_AVX512 | GM_CPU_AVX2 | GM_CPU_FMA;
    if (!strcmp(name, "avx2"))
        return GM_CPU_AVX2 | GM_CPU_FMA;
    return 0;
}

unsigned gm_isa_mask(const char *name, int *known)
{
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
        if (!strcmp(name, tiers[i].name)) {
            *known = 1;
            return tiers[i].mask;
        }
    *known = 0;
    return 0;
}

/* What GM_ISA allows: ~0u when unset, 0 (portable) when it is not a tier this CPU has. */
static unsigned isa_env(void)
{
    unsigned m = atomic_load_explicit(&env_mask, memory_order_relaxed);
    if (m == UNPROBED) {
        const char *isa = getenv("GM_ISA");
        int known = 1;
        m = isa && *isa ? gm_isa_mask(isa, &known) : ~0u;
        if (!known || (isa && *isa && (probed() & needs(isa)) != needs(isa)))
            m = 0;
        atomic_store_explicit(&env_mask, m, memory_order_relaxed);
    }
    return m;
}

unsigned gm_cpu_features(void)
{
    return probed() & isa_env();
}

int gm_isa_check(gm_status *st)
{
    const char *isa = getenv("GM_ISA");
    if (!isa || !*isa)
        return 0;
    int known;
    gm_isa_mask(isa, &known);
    char have[64] = "";
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
        if ((probed() & needs(tiers[i].name)) == needs(tiers[i].name)) {
            strcat(have, *have ? ", " : "");
            strcat(have, tiers[i].name);
        }
    if (!known)
        return gm_fail(st, GM_EUSAGE, "GM_ISA: expected one of amx, avx512, avx2, portable; found \"%.40s\"", isa);
    if ((probed() & needs(isa)) != needs(isa))
        return gm_fail(st, GM_EUSAGE, "GM_ISA=%s: this CPU has no %s tier (it has: %s); unset GM_ISA or choose one of those",
                       isa, isa, have);
    return 0;
}

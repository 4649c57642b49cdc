/* The CPU feature probe; see gm/cpu.h. */
#include "gm/cpu.h"

#include <stdatomic.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define UNPROBED (1u << 31) /* not a feature bit: has not been probed yet */

/* Relaxed atomics: any thread may ask first, and every probe gives the same answer. */
static atomic_uint has = UNPROBED;

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
    const int fma = (c & bit_FMA) != 0, f16c = (c & bit_F16C) != 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if ((b & bit_AVX2) && fma)
        f |= GM_CPU_AVX2 | GM_CPU_FMA;
    if ((f & GM_CPU_AVX2) && f16c)
        f |= GM_CPU_F16C;
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

unsigned gm_cpu_features(void)
{
    unsigned h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h & UNPROBED) {
        h = probe();
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h;
}

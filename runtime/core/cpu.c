/* The CPU feature probe; see gm/cpu.h. */
#include "gm/cpu.h"

#include <stdatomic.h>

#define UNPROBED (1u << 31) /* not a feature bit: has not been probed yet */

/* Relaxed atomics: any thread may ask first, and every probe gives the same answer. */
static atomic_uint has = UNPROBED;
static atomic_uint allowed = ~0u;

static unsigned probe(void)
{
    unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        f |= GM_CPU_AVX2;
    if (__builtin_cpu_supports("fma"))
        f |= GM_CPU_FMA;
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
    return h & atomic_load_explicit(&allowed, memory_order_relaxed);
}

void gm_cpu_allow(unsigned mask) { atomic_store_explicit(&allowed, mask, memory_order_relaxed); }

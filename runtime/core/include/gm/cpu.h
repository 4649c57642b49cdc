/*
** What this CPU can run: its instruction-set extensions, probed once
** (cpuid, through the compiler's __builtin_cpu_supports), and narrowed by
** gm_cpu_allow for tests and benchmarks. The kernels choose their tier from
** gm_cpu_features() alone, matrix products and load-time transposes alike.
*/
#ifndef GM_CPU_H
#define GM_CPU_H

enum {
    GM_CPU_AVX2 = 1u << 0,
    GM_CPU_FMA = 1u << 1,
};

/* The extensions this CPU has (GM_CPU_* bits), within what gm_cpu_allow allows. */
unsigned gm_cpu_features(void);

/* Allow only the extensions in mask (0: none, the portable code; ~0u: whatever the CPU has). */
void gm_cpu_allow(unsigned mask);

#endif

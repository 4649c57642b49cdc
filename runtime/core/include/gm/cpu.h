/*
** What this CPU can run: its instruction-set extensions, probed once from
** CPUID and from what the OS has enabled (XCR0; for AMX, the permission
** the kernel grants through arch_prctl), and narrowed by GM_ISA. The
** kernels choose their tier from gm_cpu_features() (or a test's
** gm_kernels_select), matrix products and load-time transposes alike.
*/
#ifndef GM_CPU_H
#define GM_CPU_H

#include "gm/status.h"

enum {
    GM_CPU_AVX2 = 1u << 0,
    GM_CPU_FMA = 1u << 1,
    GM_CPU_AVX512 = 1u << 2,      /* AVX-512 F, BW and VL, with the ZMM and mask state enabled */
    GM_CPU_AVX512_BF16 = 1u << 3, /* VDPBF16PS and the bf16 conversions */
    GM_CPU_AMX_BF16 = 1u << 4,    /* AMX-TILE and AMX-BF16, with the tile data state granted to this process */
};

/* The extensions this CPU has (GM_CPU_* bits), within what GM_ISA allows. */
unsigned gm_cpu_features(void);

/*
** The instruction-set tiers, widest first, as GM_ISA names them: "amx",
** "avx512", "avx2", "portable". gm_isa_mask gives the extensions a tier
** uses (~0u for amx, everything), or 0 with *known = 0 for an unknown name.
*/
unsigned gm_isa_mask(const char *name, int *known);

/*
** GM_ISA, when set, checked once: 0 when it is unset or names a tier this
** CPU has; else GM_EUSAGE and a message naming the value and the tiers
** this CPU does have. A bad GM_ISA also leaves gm_cpu_features at 0 (the
** portable code), so no caller runs a tier it was told not to.
*/
int gm_isa_check(gm_status *st);

#endif

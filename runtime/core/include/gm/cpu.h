/*
** What this CPU can run: its instruction-set extensions, probed once from
** CPUID and from what the OS has enabled (XCR0; for AMX, the permission
** the kernel grants through arch_prctl). The kernels choose their tier
** from it (gm/kernels.h: GM_ISA and gm_kernels_select pick another), matrix
** products and load-time transposes alike.
*/
#ifndef GM_CPU_H
#define GM_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GM_CPU_AVX2 = 1u << 0,
    GM_CPU_FMA = 1u << 1,
    GM_CPU_AVX512 = 1u << 2,      /* AVX-512 F, BW and VL, with the ZMM and mask state enabled */
    GM_CPU_AVX512_BF16 = 1u << 3, /* VDPBF16PS and the bf16 conversions */
    GM_CPU_AMX_BF16 = 1u << 4,    /* AMX-TILE and AMX-BF16, with the tile data state granted to this process */
    GM_CPU_F16C = 1u << 5,        /* VCVTPH2PS: IEEE half to float, with AVX2 */
};

/* The extensions this CPU has (GM_CPU_* bits). */
unsigned gm_cpu_features(void);

#ifdef __cplusplus
}
#endif

#endif

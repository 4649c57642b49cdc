/*
** What the machine can do, for bench_runner: the peak of each instruction-set
** tier in tight loops of independent multiply-adds, and the memory read
** bandwidth, each sampled on n threads that start together after a barrier.
** The loops live one tier to a file (peaks_avx2.c, peaks_avx512.c,
** peaks_amx.c), each built for its tier only, and run only on a CPU that has
** it (gm_cpu_features); peaks.c, built for any x86-64, drives them.
*/
#ifndef BENCH_PEAKS_H
#define BENCH_PEAKS_H

#include <stddef.h>
#include <stdint.h>

/* The tiers' peaks: their flops per instruction in the comments. */
typedef enum peak_kind {
    PEAK_AVX2_FMA,    /* vfmadd ymm: 8 lanes x 2 = 16 */
    PEAK_AVX512_FMA,  /* vfmadd zmm: 16 lanes x 2 = 32 */
    PEAK_AVX512_BF16, /* vdpbf16ps zmm: 32 bf16 pairs, a multiply and an add each = 64 */
    PEAK_AMX_BF16,    /* tdpbf16ps, 16x16 f32 tile += 16x32 bf16 @ 32x16 bf16: 16 * 16 * 32 * 2 = 16384 */
    PEAK_KINDS
} peak_kind;

const char *peak_name(peak_kind k);   /* "AVX2 FMA", ... */
const char *peak_how(peak_kind k);    /* what the loop runs, for the report */
int peak_available(peak_kind k);      /* this CPU (and GM_ISA) allows it */
double peak_sample(peak_kind k, int threads); /* GFLOP/s on threads: one sample, about 0.05-0.1 s */

/* The loops, one tier to a file: iters rounds on independent chains; each returns the flops it did. */
double peak_avx2_fma(long iters, float *sink);
double peak_avx512_fma(long iters, float *sink);
double peak_avx512_bf16(long iters, float *sink);
double peak_amx_bf16(long iters, float *sink);

/* LDTILECFG with palette 1, every one of the eight tiles 16 rows of 64 bytes (peaks_amx.c; bench_tiles too) */
void amx_tiles_16x64(void);

/*
** The sum of [p, p + n) as 32-bit lanes (p 64-byte aligned, n a multiple of 256 x streams), read
** with wide loads into independent accumulators, as `streams` contiguous runs side by side; ahead > 0
** (a multiple of 256) also fetches each line that many bytes ahead in software.
*/
uint32_t read_avx2(const uint8_t *p, size_t n, size_t ahead, int streams);
uint32_t read_avx512(const uint8_t *p, size_t n, size_t ahead, int streams);

/*
** The read-bandwidth probe: a huge-page buffer much bigger than the last-level
** cache, touched once; n threads each read their own contiguous part of it.
*/
typedef struct bw_probe {
    uint8_t *buf;
    size_t size;
} bw_probe;

enum { BW_CONFIGS = 10 };
void bw_new(bw_probe *b, int max_threads);
void bw_free(bw_probe *b);
const char *bw_config_name(int c);
int bw_config_available(int c);
double bw_sample(const bw_probe *b, int threads, int config); /* GB/s: one pass over the buffer */

#endif

/* The AVX512_BF16 tier's source on a software model of VDPBF16PS (avx512bf16.c): "avx512-bf16-model", for the tests. */
#define GM_BF16_MODEL 1
#include "avx512bf16.c"

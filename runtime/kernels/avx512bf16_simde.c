/*
** The AVX512_BF16 tier's source, its AVX-512 intrinsics emulated (simde512.h) and VDPBF16PS on the model
** of avx512bf16_model.c: "avx512-bf16-simde", for the tests.
*/
#define GM_SIMDE 1
#include "avx512bf16.c"

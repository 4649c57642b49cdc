/* The AVX-512 tier's source, its AVX-512 intrinsics emulated (simde512.h): "avx512-simde", for the tests. */
#define GM_SIMDE 1
#include "avx512.c"

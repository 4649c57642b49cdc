/* The AVX-512 tier's source on the software model of its operations (v16.h): "avx512-model", for the tests. */
#define GM_V16_MODEL 1
#include "avx512.c"

/*
** The AMX tier's source on the model of the tiles (tile.h), its AVX-512 lines (the packing and moving of
** operands in registers) on the emulation of those intrinsics (simde512.h): "amx-simde", for the tests.
*/
#define GM_SIMDE 1
#define GM_TILE_MODEL 1
#include "amx.c"

/* The AMX tier's source on the software model of the tile operations (tile.h): "amx-model", for the tests. */
#define GM_TILE_MODEL 1
#include "amx.c"

gm_tile_watch_range gm_tile_watch;

/* Helpers shared by the libFuzzer harnesses. */
#ifndef GM_FUZZ_UTIL_H
#define GM_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A private scratch folder for this process (under /dev/shm when present), made once. */
const char *fz_scratch(void);

/* Write len bytes to path (truncating); aborts on failure, which is the harness's fault. */
void fz_write(const char *path, const void *data, size_t len);

/*
** Split data at every occurrence of the separator line "\n#GMFUZZ#\n": parts[i]
** points into data, lens[i] is its length; returns the number of parts (at most max).
*/
size_t fz_split(const uint8_t *data, size_t size, const uint8_t **parts, size_t *lens, size_t max);

#define FZ_SEP "\n#GMFUZZ#\n"

#endif

/* What the phase0 tests share about the golden models of ../shared/golden. */
#ifndef GM_TEST_GOLDEN_UTIL_H
#define GM_TEST_GOLDEN_UTIL_H

/* The seq24 prompt of golden model `id` as phase0's option "--tokens a,b,c" (malloc'd). */
char *tg_tokens_arg(const char *id);

#endif

/*
** The kernel tiers this CPU runs, each selected in turn (gm/kernels.h), for
** the suites that check every tier: EACH_TIER(t) { ... } runs its body once
** per tier, t its name; a tier the CPU lacks is logged as not available,
** never run. gm_kernels_select(NULL) afterwards restores the automatic choice.
*/
#ifndef GM_TEST_TIERS_H
#define GM_TEST_TIERS_H

#include <criterion/logging.h>

#include "gm/kernels.h"

static inline int tu_use_tier(const char *tier)
{
    if (gm_kernels_select(tier) == 0)
        return 1;
    cr_log_info("%s: not available on this CPU", tier);
    return 0;
}

#define EACH_TIER(t)                                                                                               \
    for (const char *const *t##_ = gm_kernels_tiers(), *t; (t = *t##_) != NULL; t##_++)                           \
        if (tu_use_tier(t))

#endif

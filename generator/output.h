/*
** Writing models/<id>/ atomically: everything goes into a temporary folder
** beside it, which replaces the old folder in one rename at the end. A failure
** at any step leaves the output folder exactly as it was.
*/
#ifndef GM_OUTPUT_H
#define GM_OUTPUT_H

#include "gm/status.h"
#include "lua_host.h"
#include "snapshot.h"

/*
** Write r's files and the snapshot (into snapshot/) as out_dir/<r->id>/.
** Files marked keep (TODO.md, progress.md: living documents that phase0
** updates) are carried over from an existing folder instead of replaced.
** out_dir is created if missing (one level).
*/
int gm_write_model(const char *out_dir, const gm_gen_result *r,
                   const gm_snapshot *snap, gm_status *st);

#endif

#!/usr/bin/env bash
# Run Criterion test binaries under valgrind (memcheck, full leak check) and
# fail on any report. Criterion re-executes the binary for every test, so
# valgrind follows the children (--trace-children=yes) and each process writes
# its own log; a test passes only if its process's log says 0 errors. The
# tests of a binary run GM_VALGRIND_JOBS at a time (default: the cores, nproc;
# each process spends a second or two in valgrind's start).
#
#   scripts/valgrind.sh BUILD_DIR TEST[:FILTER]...   e.g. scripts/valgrind.sh build test_models test_runner:'runner*/avx2'
#
# FILTER is a Criterion --filter pattern: the tests of TEST to run (all by default).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/valgrind.sh BUILD_DIR TEST[:FILTER]..." >&2
  exit 2
fi
build=$1
shift
logs=$(mktemp -d "${TMPDIR:-/tmp}/gm-valgrind-XXXXXX")
trap 'rm -rf "$logs"' EXIT
status=0
for arg in "$@"; do
  t=${arg%%:*}
  filter=()
  [ "$t" != "$arg" ] && filter=(--filter "${arg#*:}")
  rc=0
  valgrind --error-exitcode=99 --leak-check=full --trace-children=yes \
           --log-file="$logs/$t.%p" "$build/tests/$t" --jobs "${GM_VALGRIND_JOBS:-$(nproc)}" "${filter[@]}" >"$logs/$t.out" 2>&1 || rc=$?
  bad=$(grep -L 'ERROR SUMMARY: 0 errors' "$logs/$t".[0-9]* || true)
  n=$(ls "$logs/$t".[0-9]* | wc -l)
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    echo "valgrind: $t: FAILED (exit $rc)"
    tail -5 "$logs/$t.out"
    for f in $bad; do sed -n '/ERROR SUMMARY/p;/Invalid\|uninitialised\|definitely lost/,+6p' "$f" | head -40; done
    status=1
  else
    echo "valgrind: $t: $n processes, 0 errors"
  fi
done
exit $status

#!/usr/bin/env bash
# Run each libFuzzer harness of fuzz/ for SECONDS (one process each, niced,
# GM_FUZZ_JOBS of them side by side), starting from seeds made from ../shared
# plus the regression inputs in fuzz/regress/<harness>/, and print the
# executions and coverage of each.
#
#   scripts/fuzz.sh SECONDS [HARNESS...]       (default: every harness)
#
# Environment: GM_FUZZ_JOBS (harnesses at a time; default: the cores, nproc),
# GM_FUZZ_BUILD (default build-fuzz: configured and built with
# clang and -DGM_FUZZ=ON when missing), GM_FUZZ_CORPUS (the working corpus,
# kept between runs; default ${TMPDIR:-/tmp}/gm-fuzz-corpus), GM_SHARED_DIR
# (default ../shared). A crash leaves its input in $GM_FUZZ_CORPUS/crashes/
# and makes the script exit 1: add it to fuzz/regress/<harness>/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh SECONDS [HARNESS...]" >&2
  exit 2
fi
secs=$1
shift
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_st_header fuzz_st_index fuzz_config fuzz_generate
                                          fuzz_tokenizer_json fuzz_tokenizer_codec fuzz_npy
                                          fuzz_hub_response)
build=${GM_FUZZ_BUILD:-build-fuzz}
shared=${GM_SHARED_DIR:-../shared}
corpus=${GM_FUZZ_CORPUS:-${TMPDIR:-/tmp}/gm-fuzz-corpus}

if [ ! -x "$build/fuzz/${harnesses[0]}" ]; then
  cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DGM_FUZZ=ON -DBUILD_TESTING=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_SHARED_DIR="$(cd "$shared" && pwd)" >/dev/null
fi
nice -n 19 cmake --build "$build" -j"$(nproc)" --target fuzz >/dev/null

seeds=$(mktemp -d "${TMPDIR:-/tmp}/gm-fuzz-seeds-XXXXXX")
trap 'rm -rf "$seeds"' EXIT
python3 scripts/fuzz-seeds.py "$shared" "$seeds"
mkdir -p "$corpus/crashes"

# one harness: its run, then its row of the table in $corpus/$h.row (its exit status in $corpus/$h.rc)
run_one() {
  local h=$1 log="$corpus/$1.log" rc=0 start=$SECONDS
  mkdir -p "$corpus/$h" "$seeds/$h" fuzz/regress/"$h"
  # one process (no -jobs/-fork), a 10 s limit per input and 2 GB of memory:
  # a slow or memory-hungry input is a finding too
  nice -n 19 "$build/fuzz/$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$corpus/crashes/$h-" \
       "$corpus/$h" "$seeds/$h" "fuzz/regress/$h" >"$log" 2>&1 || rc=$?
  local execs rate cov result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  if [ $rc -eq 0 ]; then result=ok; else result="FAILED (exit $rc, see $log)"; fi
  {
    printf '%-22s %8s %12s %8s %8s %s\n' "$h" "$((SECONDS - start))" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$result"
    [ $rc -eq 0 ] || grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" | sed 's/^/    /' || true
  } >"$corpus/$h.row"
  echo $rc >"$corpus/$h.rc"
}

jobs=${GM_FUZZ_JOBS:-$(nproc)}
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$h" &
done
wait

status=0
printf '%-22s %8s %12s %8s %8s %s\n' harness seconds execs exec/s cov result
for h in "${harnesses[@]}"; do
  cat "$corpus/$h.row"
  [ "$(cat "$corpus/$h.rc")" = 0 ] || status=1
done
exit $status

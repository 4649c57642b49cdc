#!/usr/bin/env bash
# gen-model as an NPU project that vendors its source meets it: tests/downstream/subproject adds this tree with
# add_subdirectory() (FetchContent's way too), builds a golden model scaffolded by GEN_MODEL into a model library
# and a phase0 for it, and a program of its own on GenModel::runtime and on GenModel::runtime_shared, and runs them.
# The subproject leaves its own build's parts out (programs, tests, install rules, CPack, libgenmodel.a, which
# nothing links), and its paths are its own tree's, not the project's.
#
#   scripts/test-subproject.sh GEN_MODEL [SHARED_DIR]   (GEN_MODEL: a gen-model program, as the build's)
set -euo pipefail
cd "$(dirname "$0")/.."
gen=$(realpath "$1")
shared=$(cd "${2:-../shared}" && pwd)
id=qwen2_tied
golden=$shared/golden/$id
work=$(mktemp -d "${TMPDIR:-/tmp}/gm-subproject-XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/downstream/port.sh
source tests/downstream/port.sh

fail() { echo "test-subproject: $*" >&2; exit 1; }
printf '== the project: %s scaffolded, this tree its subproject\n' $id
"$gen" "$golden" --out "$work/models" >/dev/null
cmake -S tests/downstream/subproject -B "$work/b" -DGM_SOURCE="$PWD" -DMODELS="$work/models" -DIDS=$id \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "the project's configure failed"; }
cmake --build "$work/b" -j"$(nproc)" > "$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "the project's build failed"; }

# what only gen-model's own build has: in the project's build folder, or built there though nothing links it
for f in CPackConfig.cmake DartConfiguration.tcl GenModelConfig.cmake genmodel.pc gen-model/CTestTestfile.cmake \
         gen-model/GenModelConfig.cmake gen-model/libgenmodel.a gen-model/man; do
  [ ! -e "$work/b/$f" ] || fail "the subproject made $f"
done
cmake --install "$work/b" --prefix "$work/prefix" >/dev/null
[ ! -e "$work/prefix" ] || fail "the subproject installs $(cd "$work/prefix" && find . -type f | head -3)"

version=$(sed -n 's/^project(gen-model VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
"$work/b/port_phase0" --version | grep "^phase0 $version " || fail "port_phase0 --version does not name gen-model $version"
"$work/b/port_phase0" $id --weights "$golden" --tokens "$(golden_tokens "$golden")" --no-record | tail -1
# a golden of the tokenizer (tokenizers/README.md): the text's UTF-8 in hex, then its ids
IFS=$'\t' read -r _ hex ids _ < <(awk -F'\t' '$1 == "pangram_sphinx"' "$shared/tokenizers/qwen2_5/goldens.tsv")
text=$(python3 -c 'import sys; print(bytes.fromhex(sys.argv[1]).decode(), end="")' "$hex")
"$work/b/vendor_check" "$shared/tokenizers/qwen2_5/tokenizer.json" "$text" "$ids"
"$work/b/vendor_check_shared" "$shared/tokenizers/qwen2_5/tokenizer.json" "$text" "$ids"
ldd "$work/b/vendor_check_shared" | grep -q "libgenmodel.so.* => $work/b/gen-model/" ||
  fail "vendor_check_shared is not linked to the subproject's libgenmodel.so"
printf '== ok\n'

#!/usr/bin/env bash
# The install as an NPU project meets it: `cmake --install BUILD --prefix` a
# fresh folder, scaffold a golden model with the installed gen-model, then
# build that model and a phase0 for it two ways, and run each on the golden's
# weights: with find_package(GenModel) (tests/downstream/), and with
# pkg-config and plain cc against the shared library. Then find_package(GenModel
# QUIET) without the runtime's dependencies (tests/downstream/optional/), and
# the package files of an install into lib/<triplet> and another include folder.
#
#   scripts/test-install.sh BUILD_DIR [SHARED_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "$1" && pwd)
shared=$(cd "${2:-../shared}" && pwd)
id=qwen2_tied
golden=$shared/golden/$id
work=$(mktemp -d "${TMPDIR:-/tmp}/gm-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
# shellcheck source=tests/downstream/port.sh
source tests/downstream/port.sh
tokens=$(golden_tokens "$golden")

step() { printf '== %s\n' "$*"; }
step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/gen-model bin/phase0 lib/libgenmodel.so lib/libgm_core.a lib/pkgconfig/genmodel.pc \
         lib/pkgconfig/genmodel-phase0.pc share/gen-model/phase0.c \
         lib/cmake/GenModel/GenModelConfig.cmake lib/cmake/GenModel/GenModelConfigVersion.cmake \
         include/gm/runner.h share/man/man1/gen-model.1 share/man/man1/phase0.1 \
         share/bash-completion/completions/gen-model share/bash-completion/completions/phase0; do
  [ -e "$prefix/$f" ] || { echo "test-install: $f is not installed" >&2; exit 1; }
done
soname=$(objdump -p "$prefix/lib/libgenmodel.so" | awk '/SONAME/ {print $2}')
abi=$(sed -n 's/^#define GM_RUNTIME_ABI \([0-9]*\).*/\1/p' runtime/core/include/gm/status.h)
[ "$soname" = "libgenmodel.so.$abi" ] || { echo "test-install: soname $soname, expected libgenmodel.so.$abi" >&2; exit 1; }
# its ABI is its public headers: every symbol it exports is named in one (cmake/genmodel.map hides the rest)
for sym in $(nm -D --defined-only "$prefix/lib/libgenmodel.so" | awk '$2 ~ /[TDRBV]/ {print $3}'); do
  grep -qw -- "$sym" "$prefix"/include/gm/*.h ||
    { echo "test-install: libgenmodel.so exports $sym, which no public header names (cmake/genmodel.map)" >&2; exit 1; }
done
"$prefix/bin/gen-model" --version
# the installed phase0 records into models/ where it runs, never into the tree it was built from
"$prefix/bin/phase0" --help | grep -q -- '(default: models)$' ||
  { echo "test-install: the installed phase0's default --models is not models/ where it runs" >&2; exit 1; }
strings "$prefix/bin/phase0" | grep -qF "$PWD/models" &&
  { echo "test-install: the installed phase0 holds the build tree's path $PWD/models" >&2; exit 1; }
for prog in gen-model phase0; do # the man page is the --help text
  first=$("$prefix/bin/$prog" --help | head -1 | sed 's/[][\\.*^$]/\\&/g')
  grep -q "^$first" "$prefix/share/man/man1/$prog.1" ||
    { echo "test-install: $prog.1 does not hold $prog --help's first line" >&2; exit 1; }
done

step "bash completion: subcommands, options, model ids"
complete_words() { # the completions bash offers for the words given, the last one being completed
  PATH=$prefix/bin:$PATH bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _${COMP_WORDS[0]/-/_}; printf "%s\n" "${COMPREPLY[@]}"' sh "$prefix/share/bash-completion/completions/$1" "$@"
}
for want in "phase0 qw=qwen2_1_5b" "phase0 ca=capture" "phase0 capture --max=--max-prompts" \
            "gen-model --ver=--version" "gen-model dow=download" "phase0 capture ll=llama_3_2_1b"; do
  words=${want%%=*} expect=${want#*=}
  # shellcheck disable=SC2086
  got=$(complete_words $words)
  grep -qx -- "$expect" <<<"$got" || { echo "test-install: completing '$words' gave '$got', not $expect" >&2; exit 1; }
done
for want in "phase0 capture qwen2_1_5b --prompt-style b=base" "phase0 verify --model ll=llama_3_2_1b" \
            "gen-model download --re=--revision" "gen-model tokenize --dec=--decode"; do
  words=${want%%=*} expect=${want#*=}
  # shellcheck disable=SC2086
  got=$(complete_words $words)
  grep -qx -- "$expect" <<<"$got" || { echo "test-install: completing '$words' gave '$got', not $expect" >&2; exit 1; }
done
# a subcommand's options are its own: download takes none of the scaffold's
got=$(complete_words gen-model download --)
! grep -qx -- "--out" <<<"$got" || { echo "test-install: gen-model download -- offers the scaffold's --out" >&2; exit 1; }

step "the installed gen-model scaffolds $id; find_package(GenModel): a model library and a phase0"
port "$prefix/bin/gen-model" "$golden" $id "$work" "$prefix"

step "pkg-config and cc, against libgenmodel.so"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
m=$work/port/models/$id
printf '#include <stddef.h>\n#include "gm/registry.h"\nextern const gm_model_entry %s_model_entry;\nconst gm_model_entry *const port_models[] = {&%s_model_entry, NULL};\n' \
  $id $id > "$work/table.c"
# shellcheck disable=SC2046
# as the README gives it: ISO C without extensions, and only what genmodel-phase0.pc says
cc -std=c11 -Wall -Wextra -Werror -DGM_PHASE0_MODELS=port_models -DGM_PHASE0_MODELS_DIR="\"$work/port/models\"" \
   $(pkg-config --cflags genmodel-phase0) "$(pkg-config --variable=phase0_source genmodel-phase0)" \
   "$m/${id}_weights.c" "$m/${id}_cpu_helpers.c" "$m/${id}_registry.c" "$work/table.c" -o "$work/phase0-cc" \
   $(pkg-config --libs genmodel-phase0)
LD_LIBRARY_PATH=$prefix/lib "$work/phase0-cc" $id --weights "$golden" --tokens "$tokens" --no-record | tail -1
LD_LIBRARY_PATH=$prefix/lib ldd "$work/phase0-cc" > "$work/ldd.txt"
grep -q "libgenmodel.so.$abi => $prefix/lib/" "$work/ldd.txt" ||
  { echo "test-install: phase0-cc is not linked to $prefix/lib/libgenmodel.so.$abi" >&2; exit 1; }
step "pkg-config --static, the runtime from libgenmodel.a (Debian ships its libraries shared only)"
printf '#include <stdio.h>\n#include "gm/kernels.h"\n#include "gm/runner.h"\nint main(void) { rt_result_free(NULL); puts(gm_kernels_name()); return 0; }\n' > "$work/static.c"
# shellcheck disable=SC2046
cc -std=c11 $(pkg-config --cflags genmodel) "$work/static.c" -o "$work/static" \
   $(pkg-config --static --libs genmodel | sed 's/-lgenmodel/-Wl,-Bstatic -lgenmodel -Wl,-Bdynamic/')
"$work/static" >/dev/null
! ldd "$work/static" | grep -q libgenmodel || { echo "test-install: static links libgenmodel.so" >&2; exit 1; }

step "find_package(GenModel QUIET) without the runtime's dependencies: not found, saying which, and the configure goes on"
mkdir -p "$work/no-pc"
PKG_CONFIG_LIBDIR=$work/no-pc cmake -S tests/downstream/optional -B "$work/optional" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/optional.log" 2>&1 || { cat "$work/optional.log" >&2; echo "test-install: find_package(GenModel QUIET) stopped the configure" >&2; exit 1; }
grep -q 'without GenModel: .*libcjson (Debian: libcjson-dev)' "$work/optional.log" ||
  { cat "$work/optional.log" >&2; echo "test-install: GenModel_NOT_FOUND_MESSAGE does not name libcjson" >&2; exit 1; }

step "the package files of an install into lib/<triplet> (GNUInstallDirs' libdir for --prefix /usr on Debian) and include/genmodel-$abi"
# this tree configured (not built) for that layout; its .pc files and CMake package laid out as its install lays them
# out, around the libraries, headers and phase0.c installed above
ma=$work/multiarch libdir=lib/x86_64-linux-gnu incdir=include/genmodel-$abi
cmake -S . -B "$ma/build" -DCMAKE_INSTALL_LIBDIR=$libdir -DCMAKE_INSTALL_INCLUDEDIR="$incdir" -DBUILD_TESTING=OFF >/dev/null
mkdir -p "$ma/prefix/$libdir/pkgconfig" "$ma/prefix/$libdir/cmake/GenModel" "$ma/prefix/$incdir" "$ma/prefix/share"
ln -s "$prefix"/lib/lib* "$ma/prefix/$libdir/"
ln -s "$prefix/include/gm" "$prefix/include/gen-model" "$ma/prefix/$incdir/"
ln -s "$prefix/share/gen-model" "$ma/prefix/share/"
cp "$ma"/build/genmodel*.pc "$ma/prefix/$libdir/pkgconfig/"
cp "$ma"/build/GenModelConfig*.cmake cmake/models.cmake cmake/registry_table.c.in "$ma/prefix/$libdir/cmake/GenModel/"
find "$ma/build/CMakeFiles/Export" -name 'GenModelTargets*.cmake' -exec cp {} "$ma/prefix/$libdir/cmake/GenModel/" \;
export PKG_CONFIG_PATH=$ma/prefix/$libdir/pkgconfig
for v in genmodel:includedir:gm/runner.h genmodel:libdir:libgenmodel.so genmodel-phase0:phase0_source:; do
  IFS=: read -r pc var file <<<"$v"
  got=$(pkg-config --variable="$var" "$pc")
  [ -e "$got${file:+/$file}" ] || { echo "test-install: $pc.pc's $var is $got, where there is no ${file:-file}" >&2; exit 1; }
done
# shellcheck disable=SC2046
cc -std=c11 $(pkg-config --cflags genmodel) "$work/static.c" -o "$ma/shared" $(pkg-config --libs genmodel)
LD_LIBRARY_PATH=$ma/prefix/$libdir "$ma/shared" >/dev/null
# find_package(GenModel), gm_model_library() (the include folder) and gm_phase0_program() (phase0.c) from it
cmake -S tests/downstream/optional -B "$ma/b" -DCMAKE_PREFIX_PATH="$ma/prefix" -DMODELS="$work/port/models" -DIDS=$id \
  > "$ma/b.log" 2>&1 && grep -q "with GenModel" "$ma/b.log" && cmake --build "$ma/b" --target port_models >> "$ma/b.log" 2>&1 ||
  { cat "$ma/b.log" >&2; echo "test-install: find_package(GenModel) on the lib/<triplet> install" >&2; exit 1; }
step "ok"

#!/usr/bin/env bash
# The .deb as a Debian 12 machine meets it (run as root, on a machine where
# nothing of gen-model is installed: CI's fresh one): cpack -G DEB in BUILD,
# apt-get install the package (its Depends come from Debian), run gen-model
# --help and --version, build a golden model against the installed package
# with find_package(GenModel) and run its phase0 on the golden weights; then
# remove the package again.
#
#   scripts/test-deb.sh BUILD_DIR [SHARED_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "$1" && pwd)
shared=$(cd "${2:-../shared}" && pwd)
[ "$(id -u)" = 0 ] || { echo "test-deb: run as root (it installs and removes the package)" >&2; exit 2; }
if dpkg-query -W -f='${Status}' gen-model 2>/dev/null | grep -q 'ok installed'; then
  echo "test-deb: gen-model is installed already; remove it first (apt-get remove gen-model)" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gm-deb-XXXXXX")
trap 'apt-get purge -y -qq gen-model >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
id=qwen2_tied
golden=$shared/golden/$id

(cd "$build" && cpack -G DEB -B "$work" >/dev/null)
deb=$(ls "$work"/gen-model_*.deb)
echo "== $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
# its CMake package and genmodel.pc need these on a machine that has nothing else: CI's has them already
for dep in pkg-config libcjson-dev libonig-dev libutf8proc-dev; do
  dpkg-deb -f "$deb" Depends | tr ',' '\n' | grep -qx " *$dep" || { echo "test-deb: Depends lacks $dep" >&2; exit 1; }
done
# the shared library's file is named by the runtime ABI, as its soname is
soname=$(dpkg-deb -c "$deb" | grep -o 'libgenmodel\.so\.[0-9]*\.[0-9.]*' | sort -u)
echo "$soname" | grep -qx "libgenmodel\.so\.\([0-9]*\)\.0\.0" || { echo "test-deb: library file $soname" >&2; exit 1; }
apt-get install -y -qq "$deb" >/dev/null
gen-model --help | head -1
gen-model --version
man -w gen-model >/dev/null 2>&1 || [ -e /usr/share/man/man1/gen-model.1.gz ] || [ -e /usr/share/man/man1/gen-model.1 ]

# shellcheck source=tests/downstream/port.sh
source tests/downstream/port.sh
port gen-model "$golden" $id "$work"
echo "== ok"

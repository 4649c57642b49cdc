# shellcheck shell=bash
# Sourced by scripts/test-install.sh and scripts/test-deb.sh: what both do with
# an installed gen-model (bash, set -euo pipefail).

# The ids of a golden's seq24 prompt (an int32 .npy) as "a,b,c".
golden_tokens() {
  python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<H",d[8:10])[0]
print(",".join(str(x) for x in struct.unpack("<%di"%((len(d)-10-n)//4), d[10+n:])))' "$1/golden/seq24/tokens.npy"
}

# port GEN_MODEL GOLDEN_DIR ID WORK [CMAKE_PREFIX_PATH]: the installed gen-model scaffolds the golden
# into WORK/port/models, tests/downstream builds it with find_package(GenModel) in WORK/b, and its
# phase0 runs on the golden's weights (its last line printed), and so do cxx_check and cxx_model.
port() {
  local gen=$1 golden=$2 id=$3 work=$4 prefix=${5:-}
  "$gen" "$golden" --out "$work/port/models" >/dev/null
  cmake -S tests/downstream -B "$work/b" ${prefix:+-DCMAKE_PREFIX_PATH="$prefix"} -DMODELS="$work/port/models" \
        -DIDS="$id" >/dev/null
  cmake --build "$work/b" -j"$(nproc)" >/dev/null
  "$work/b/port_phase0" "$id" --weights "$golden" --tokens "$(golden_tokens "$golden")" --no-record | tail -1
  "$work/b/cxx_check" "$golden/golden/seq24/tokens.npy"
  "$work/b/cxx_model" "$golden"
}

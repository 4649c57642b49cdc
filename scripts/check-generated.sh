#!/usr/bin/env bash
# Regenerate every models/<id>/ from its own snapshot/ into a temporary folder
# and compare with what is checked in. TODO.md and docs/ are living documents
# (phase0 records its passes there) and are not compared.
#   scripts/check-generated.sh [path/to/gen-model]
set -u
gen=${1:-build/generator/gen-model}
cd "$(dirname "$0")/.." || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
count=0
for dir in models/*/; do
  id=$(basename "$dir")
  [ -d "models/$id/snapshot" ] || continue
  count=$((count + 1))
  if ! "$gen" "models/$id/snapshot" --out "$tmp" >/dev/null; then
    echo "models/$id: regeneration failed. To see why run: $gen models/$id/snapshot"
    status=1
    continue
  fi
  while IFS= read -r f; do
    rel=${f#"$tmp/$id/"}
    if ! cmp -s "$f" "models/$id/$rel"; then
      echo "models/$id/$rel is stale. To fix run: $gen models/$id/snapshot"
      diff -u "models/$id/$rel" "$f" | head -40
      status=1
    fi
  done < <(find "$tmp/$id" -type f ! -name TODO.md ! -path '*/docs/*' | sort)
  while IFS= read -r f; do
    rel=${f#"models/$id/"}
    [ -e "$tmp/$id/$rel" ] || { echo "models/$id/$rel is not generated any more. To fix run: $gen models/$id/snapshot"; status=1; }
  done < <(find "models/$id" -type f ! -name TODO.md ! -path '*/docs/*' | sort)
done
if [ "$count" -eq 0 ]; then echo "no models under models/"; exit 1; fi
[ "$status" -eq 0 ] && echo "all $count models under models/ match their snapshots"
exit $status

#!/usr/bin/env bash
# Render the page of `phase0 verify` (one self-contained HTML file) to a PNG
# with Debian's headless chromium: to look at a report on a machine without a
# desktop, or to attach it to an issue.
#
#   scripts/render-report.sh REPORT.html OUT.png
#
# Exit status: 0 when OUT.png was written; 1 when chromium ran but wrote no
# image (OUT.png is then left as it was); 2 on wrong arguments or without chromium.
set -euo pipefail

usage="usage: scripts/render-report.sh REPORT.html OUT.png"
if [ $# -ne 2 ]; then
  echo "$usage" >&2
  exit 2
fi
report=$1
out=$2
if [ ! -f "$report" ] || [ ! -r "$report" ]; then
  echo "render-report: $report: not a readable file" >&2
  exit 2
fi
out_dir=$(dirname -- "$out")
if [ ! -d "$out_dir" ]; then
  echo "render-report: $out_dir: no such folder for $out" >&2
  exit 2
fi
# Debian's package installs /usr/bin/chromium
if ! command -v chromium >/dev/null 2>&1; then
  echo "render-report: chromium is not installed: install it with apt-get install chromium" >&2
  exit 2
fi

# The path as a file:// URL: every byte outside the unreserved set and '/'
# percent-encoded, so that a '#', '?', '%' or space in it cannot cut the URL.
url_path() {
  local LC_ALL=C s=$1 c i enc=""
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [A-Za-z0-9/._~-]) enc+=$c ;;
      *) printf -v c '%%%02X' "'$c"; enc+=$c ;;
    esac
  done
  printf '%s' "$enc"
}
url="file://$(url_path "$(realpath -- "$report")")"

# chromium writes into a temporary beside OUT.png, renamed over it only when
# it holds an image: a failed run never leaves a stale or half-written OUT.png.
# Its profile is a fresh folder too: nothing of the user's, no lock shared
# with a chromium already running.
out_abs="$(realpath -- "$out_dir")/$(basename -- "$out")"
work=$(mktemp -d "${TMPDIR:-/tmp}/render-report-XXXXXX")
tmp="$out_abs.$$.tmp.png"
trap 'rm -rf "$work"; rm -f "$tmp"' EXIT

rc=0
timeout 120 chromium --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size=1200,3000 \
  --screenshot="$tmp" "$url" >"$work/log" 2>&1 || rc=$?
if [ ! -s "$tmp" ]; then
  echo "render-report: chromium (exit $rc) wrote no image for $report; its last words:" >&2
  tail -5 "$work/log" >&2
  exit 1
fi
mv -f -- "$tmp" "$out_abs"
echo "render-report: $out_abs"

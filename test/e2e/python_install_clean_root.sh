#!/usr/bin/env bash
# The Python client installs as clients/python/README.md says with only the Debian packages the
# README names. In a fresh copy of a clean Debian 12 root (`scripts/root.sh clean bookworm`: a
# debootstrap minbase, made once and cached in JOBBUF_ROOTS, default /var/cache/jobbuf/roots), the
# README's apt-get block installs its packages and nothing else is installed; then the README's
# venv + pip block runs from a copy of the repository (its files as in the working tree) in the
# root's /root/jobbuf. Checks: both blocks succeed, the venv's python imports jobbuf from the venv
# (from ~/myapp, not the clone), the example's imports (jobbuf.celery, psycopg2, redis) resolve,
# and the repository copy is left as it was (same files, sizes, times; no build/, no *.egg-info).
# Both blocks are read from the README (test/harness/doc_blocks.rb), not written here. Run as root
# (debootstrap, chroot); no server is started. About 1-2 minutes with the clean root cached (apt
# downloads the packages each time); its first creation takes a few minutes more.
#   bash test/e2e/python_install_clean_root.sh   or   bash test/run.sh test/e2e/python_install_clean_root.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/test/harness/checks.sh"
cd "$ROOT" || exit 1
export JOBBUF_ROOTS=${JOBBUF_ROOTS:-/var/cache/jobbuf/roots}
README=clients/python/README.md
DIR=$JOBBUF_ROOTS/python-install-$$
TMP=$(mktemp -d)
REPO_IN_ROOT=/root/jobbuf
cleanup() {
  bash scripts/root.sh drop "$DIR" || echo "  FAIL $DIR could not be removed (mounts below it?)"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

[ "$(id -u)" = 0 ] || { fail "NOT TESTED: run as root (debootstrap and chroot need it)"; checks_done; }

# The README's two install blocks: the one with apt-get install, the one with pip install.
ruby test/harness/doc_blocks.rb "$ROOT" "$TMP" "$README" >"$TMP/manifest.tsv" ||
  { fail "extracting the blocks of $README"; checks_done; }
block_with() {  # TEXT: the one sh block of the README whose text holds TEXT
  local found=() n lang where
  while IFS=$'\t' read -r n lang where _; do
    [ "$lang" = sh ] && grep -qF -- "$1" "$TMP/$n.sh" && found+=("$n|$where")
  done <"$TMP/manifest.tsv"
  [ ${#found[@]} -eq 1 ] || { echo "${#found[@]} sh blocks of $README hold '$1'" >&2; return 1; }
  echo "${found[0]}"
}
apt_block=$(block_with "apt-get install") && pip_block=$(block_with "pip install") ||
  { fail "the README's apt-get and pip blocks (one each)"; checks_done; }
APT=$TMP/${apt_block%%|*}.sh PIP=$TMP/${pip_block%%|*}.sh
# The packages of the apt-get line (the words after "install" that are no option).
named=$(grep -E 'apt-get install' "$APT" | sed -E 's/.*apt-get install//' | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort)
say "$README: apt block at ${apt_block#*|} names: $(echo $named); pip block at ${pip_block#*|}"
[ -n "$named" ] || { fail "no package named in the README's apt-get line"; checks_done; }

# A fresh copy of the clean bookworm root, and the repository in it.
started=$SECONDS
out=$(bash scripts/root.sh clean bookworm "$DIR" 2>&1) ||
  { echo "$out"; fail "NOT TESTED: no clean bookworm root (${out##*$'\n'})"; checks_done; }
[ -z "$out" ] || echo "$out" | sed 's/^/  /'
say "clean bookworm root copied in $((SECONDS - started)) s"
mkdir -p "$DIR$REPO_IN_ROOT" "$DIR/tmp/readme"
{ git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null; } |
  tar -C "$DIR$REPO_IN_ROOT" -xf -
cp "$APT" "$DIR/tmp/readme/apt.sh"
cp "$PIP" "$DIR/tmp/readme/pip.sh"
tree_state() { (cd "$DIR$REPO_IN_ROOT" && find . -printf '%P\t%y\t%s\t%T@\t%m\n' | sort); }
tree_state >"$TMP/before"

in_root() { bash scripts/root.sh enter "$DIR" "$1"; }   # CMD, output to the caller

# The README's apt-get block (after the apt-get update a fresh system has had), as root.
started=$SECONDS
in_root "apt-get update -qq && apt-mark showmanual | sort >/tmp/readme/manual-before
         cd $REPO_IN_ROOT && bash -e /tmp/readme/apt.sh" >"$TMP/apt.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then pass "the README's apt-get block ($((SECONDS - started)) s)"
else fail "the README's apt-get block (exit $rc):"; tail -n 15 "$TMP/apt.log" | sed 's/^/  | /'; fi
# Installed by hand: exactly the named packages (the rest is what they pull in).
in_root "apt-mark showmanual | sort >/tmp/readme/manual-after" >/dev/null 2>&1
added=$(comm -13 "$DIR/tmp/readme/manual-before" "$DIR/tmp/readme/manual-after")
expect_eq "the packages installed by hand are the README's" "$(echo $added)" "$(echo $named)"
missing=$(in_root "for p in $(echo $named); do dpkg-query -W -f '\${db:Status-Status}\n' \$p 2>/dev/null | grep -qx installed || echo \$p; done" 2>&1)
expect_eq "every package the README names is installed (none missing)" "$missing" ""

# The README's venv + pip block, from the clone's root, as the README says.
started=$SECONDS
in_root "cd $REPO_IN_ROOT && bash -e /tmp/readme/pip.sh" >"$TMP/pip.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then pass "the README's venv + pip install block ($((SECONDS - started)) s)"
else fail "the README's venv + pip install block (exit $rc):"; tail -n 20 "$TMP/pip.log" | sed 's/^/  | /'; fi

# The venv's python, from the application's directory, gets the installed package.
VENV=/root/myapp/.venv
got=$(in_root "cd /root/myapp && $VENV/bin/python -c 'import jobbuf; print(jobbuf.__file__)'" 2>&1)
say "jobbuf.__file__: $got"
expect_match "import jobbuf from ~/myapp gives the venv's package" "$got" "^$VENV/lib/python3[.0-9]*/site-packages/jobbuf/__init__\.py$"
got=$(in_root "cd /root/myapp && $VENV/bin/python -c 'import jobbuf.celery, psycopg2, redis, celery; print(\"imported\")'" 2>&1)
expect_eq "the example's imports (jobbuf.celery, psycopg2, redis, celery) resolve in the venv" "$got" imported

# The repository copy is as it was.
tree_state >"$TMP/after"
changed=$(diff "$TMP/before" "$TMP/after" | grep '^[<>]' | cut -f1 | sort -u | head -n 10 | tr '\n' ' ')
expect_eq "the repository copy is unchanged ($(wc -l <"$TMP/before") entries compared)" "$changed" ""
left=$(cd "$DIR$REPO_IN_ROOT" && find . \( -name build -o -name '*.egg-info' \) -print | tr '\n' ' ')
expect_eq "no build/ or *.egg-info in the repository copy" "$left" ""

checks_done

#!/usr/bin/env bash
# Every fenced code block of README.md, CONTRIBUTING.md and docs/*.md runs as written, against
# the harness's private servers, so an example that drifts from the product fails `make test`.
# test/harness/doc_blocks.rb extracts the blocks and reads their markers (HTML comments before a
# fence; the convention is in its header and in CONTRIBUTING.md). Each page runs in order, in a
# directory and a database of its own; README.md in the database its quick start creates (myapp,
# as the role of the user running it), every other page in a fresh database as postgres.
# Examples name the default addresses (127.0.0.1:6379, psql's default database); the test runs
# them with PGHOST/PGPORT/REDIS_URL pointing at its servers, 127.0.0.1:6379 in a block replaced
# by its Redis port, and a redis-cli that talks to its Redis. Background blocks (consumers that
# loop forever) must print what their <!-- background: TEXT --> marker says within 60 s.
# docs/clients.md is run by test/e2e/clients_docs.sh (it needs the clients' own installs).
# Prints every block's outcome, the blocks marked not runnable with their reasons, and the counts.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
bash "$ROOT/test/consumers/install.sh"
source "$ROOT/test/clients/pick_python.sh"

e2e_start "jobbuf.database = '*'"
BIN=$JB_RUN/bin BLOCKS=$JB_RUN/blocks
mkdir -p "$BIN" "$BLOCKS"
ln -s "$(pick_python "celery, redis, psycopg2")" "$BIN/python3"
printf '#!/bin/sh\nexec %s -p %s "$@"\n' "$(command -v redis-cli)" "$JB_REDIS_PORT" >"$BIN/redis-cli"
chmod +x "$BIN/redis-cli"
chmod 755 "$JB_RUN"   # the quick start's `su postgres` reaches the socket directory
export PATH="$BIN:$PATH" PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0"
export NODE_PATH=$ROOT/test/consumers/node/node_modules

pages=(README.md CONTRIBUTING.md)
for f in "$ROOT"/docs/*.md "$ROOT"/docs/internals/*.md; do
  page=${f#"$ROOT"/}
  [ "$page" = docs/clients.md ] || pages+=("$page")
done
say "pages: ${pages[*]} (docs/clients.md: test/e2e/clients_docs.sh)"
(cd "$ROOT" && ruby test/harness/doc_blocks.rb "$ROOT" "$BLOCKS" "${pages[@]}") >"$JB_RUN/manifest.tsv" ||
  { fail "extracting the blocks"; e2e_done; }

BG_PIDS=()
stop_background() { [ ${#BG_PIDS[@]} -eq 0 ] || jb_stop_pids "${BG_PIDS[@]/#/-}"; BG_PIDS=(); }
trap 'stop_background; e2e_cleanup' EXIT

# run_block N LANG: runs block N in the current directory, output to $JB_RUN/N.out.
run_block() {
  local file=$BLOCKS/$1.$2
  sed -i "s/127\.0\.0\.1:6379/127.0.0.1:$JB_REDIS_PORT/g" "$file"
  case $2 in
    sql) psql -X -v ON_ERROR_STOP=1 -f "$file" ;;
    sh) bash -e "$file" ;;
    js) cp "$file" "$1.cjs" && node "$1.cjs" ;;
    python) python3 "$file" ;;
    ruby) ruby "$file" ;;
    *) echo "no runner for $2"; return 1 ;;
  esac >"$JB_RUN/$1.out" 2>&1 </dev/null
}

# page_setup PAGE: its directory and database; the previous page's database is dropped (and its
# drain worker with it), so that the pages never exceed jobbuf.max_workers.
PAGE_DB=
page_setup() {
  PAGE_DIR=$JB_RUN/pages/${1//\//_}
  mkdir -p "$PAGE_DIR"
  stop_background
  [ -z "$PAGE_DB" ] || jb_psql_db postgres -q -c "DROP DATABASE IF EXISTS $PAGE_DB WITH (FORCE)" >/dev/null
  jb_redis FLUSHALL >/dev/null
  if [ "$1" = README.md ]; then
    PAGE_DB=myapp
    unset PGUSER; export PGDATABASE=myapp
  else
    PAGE_DB=docs_$(basename "$1" .md | tr "[:upper:]" "[:lower:]")
    jb_psql -q -c "CREATE DATABASE $PAGE_DB" -c "\\c $PAGE_DB" -c "CREATE EXTENSION jobbuf" >/dev/null
    export PGUSER=postgres PGDATABASE=$PAGE_DB
  fi
}

ran=0 marked=() page=
# (Fields read with a separator that is not white space: a tab is, and read would merge the empty
# argument of a plain block with the next field.)
while IFS=$'\037' read -r n lang where how arg prints; do
  [ "${where%%:*}" = "$page" ] || { page=${where%%:*}; page_setup "$page"; }
  cd "$PAGE_DIR" || exit 1
  case $how in
    skip) marked+=("$where ($arg)"); continue ;;
    file) mkdir -p "$(dirname "$arg")"; sed "s/127\.0\.0\.1:6379/127.0.0.1:$JB_REDIS_PORT/g" "$BLOCKS/$n.$lang" >"$arg"
          ran=$((ran + 1)); pass "$where ($lang) written to $arg"; continue ;;
    background)
      setsid bash -c "$(declare -f run_block); BLOCKS=$BLOCKS JB_RUN=$JB_RUN JB_REDIS_PORT=$JB_REDIS_PORT run_block $n $lang" &
      BG_PIDS+=($!)
      ran=$((ran + 1))
      jb_wait_until "grep -qF -- '$arg' '$JB_RUN/$n.out' 2>/dev/null || ! kill -0 $! 2>/dev/null" 60
      if grep -qF -- "$arg" "$JB_RUN/$n.out" 2>/dev/null; then
        pass "$where ($lang, in the background) printed \"$arg\""
      else
        fail "$where ($lang, in the background) did not print \"$arg\" (it exited, or 60 s passed)"
        sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
      fi
      stop_background; continue ;;
    repo) cd "$ROOT" || exit 1 ;;
  esac
  ran=$((ran + 1))
  run_block "$n" "$lang"
  status=$?
  if [ "$status" != 0 ]; then
    fail "$where ($lang) runs: exit status $status"
    sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
  elif [ -n "$prints" ] && ! tr -s ' ' <"$JB_RUN/$n.out" | grep -qF -- "$(tr -s ' ' <<<"$prints")"; then
    fail "$where ($lang) runs but does not print \"$prints\""
    sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
  else
    pass "$where ($lang) runs${prints:+ and prints \"$prints\"}"
  fi
done < <(tr '\t' '\037' <"$JB_RUN/manifest.tsv")
cd "$ROOT" || exit 1
stop_background
say "${#marked[@]} blocks marked not runnable:"
for m in "${marked[@]}"; do say "  $m"; done
say "$ran blocks ran, ${#marked[@]} marked not runnable"
check "blocks ran" [ "$ran" -gt 0 ]
e2e_done

#!/usr/bin/env bash
# The code blocks of docs/clients.md run as written (test/harness/doc_blocks.rb extracts them;
# test/e2e/docs_blocks.sh runs those of README.md and the other docs pages), in order, against
# the harness's servers: sql with psql, sh with bash from a directory holding a copy of clients/python (the Python install
# block makes the .venv the python blocks then run with), js as ES modules inside clients/node
# (where `jobbuf`, pg and Knex resolve), python with that .venv, ruby with clients/ruby/lib on
# the load path. Each js, python and ruby block must stage at least one job. Blocks marked
# `<!-- not runnable: reason -->` are counted and named.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
bash "$ROOT/test/clients/install_node.sh"

source "$ROOT/test/clients/pick_python.sh"

e2e_start
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
export DATABASE_URL="postgres://postgres@127.0.0.1:$JB_PGPORT/$JB_DB" REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0"
jb_sql "CREATE TABLE users (id bigserial PRIMARY KEY, email text NOT NULL)" >/dev/null

WORK=$JB_RUN/work BLOCKS=$JB_RUN/blocks NODE_BLOCKS=$ROOT/clients/node/.doc-blocks/$$
mkdir -p "$WORK/bin" "$BLOCKS" "$NODE_BLOCKS"
mkdir "$WORK/clients" && cp -r "$ROOT/clients/python" "$WORK/clients/python"   # pip builds in the tree it installs
ln -s "$(pick_python "celery, sqlalchemy, psycopg2, psycopg")" "$WORK/bin/python3"   # the python3 of the install block
trap 'rm -rf "$NODE_BLOCKS"; e2e_cleanup' EXIT

# staged: the jobs in jobbuf.jobs (every queue is paused once created, so
# nothing is delivered and dropped while the blocks run)
staged() { jb_sql "SELECT count(*) FROM jobbuf.jobs"; }

ruby "$ROOT/test/harness/doc_blocks.rb" "$ROOT" "$BLOCKS" docs/clients.md >"$JB_RUN/manifest.tsv"
not_runnable=()
while IFS=$'\t' read -r n lang where how reason _prints; do
  if [ "$how" != run ]; then
    not_runnable+=("$where ($reason)")
    continue
  fi
  before=$(staged)
  case $lang in
    sql) jb_psql -q -f "$BLOCKS/$n.sql" >"$JB_RUN/$n.out" 2>&1
         status=$?
         jb_sql "SELECT jobbuf_pause(name) FROM jobbuf.queues WHERE NOT paused" >/dev/null ;;
    sh) (cd "$WORK" && PATH="$WORK/bin:$PATH" bash -e "$BLOCKS/$n.sh") >"$JB_RUN/$n.out" 2>&1; status=$? ;;
    js) cp "$BLOCKS/$n.js" "$NODE_BLOCKS/$n.mjs"
        node "$NODE_BLOCKS/$n.mjs" >"$JB_RUN/$n.out" 2>&1; status=$? ;;
    python) (cd "$WORK" && .venv/bin/python "$BLOCKS/$n.python") >"$JB_RUN/$n.out" 2>&1; status=$? ;;
    ruby) ruby -I "$ROOT/clients/ruby/lib" "$BLOCKS/$n.ruby" >"$JB_RUN/$n.out" 2>&1; status=$? ;;
    *) echo "unknown language $lang" >"$JB_RUN/$n.out"; status=1 ;;
  esac
  if [ "$status" != 0 ]; then
    fail "$where ($lang) runs: exit $status"
    sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
    continue
  fi
  after=$(staged)
  case $lang in
    js|python|ruby) check "$where ($lang) runs and stages jobs ($before -> $after)" [ "$after" -gt "$before" ] ;;
    *) pass "$where ($lang) runs" ;;
  esac
done <"$JB_RUN/manifest.tsv"
say "${#not_runnable[@]} blocks marked not runnable: ${not_runnable[*]}"
check "the blocks marked not runnable are the ones expected (3)" [ "${#not_runnable[@]}" = 3 ]
e2e_done

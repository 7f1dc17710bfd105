#!/usr/bin/env bash
# The code blocks of docs/clients.md, clients/node/README.md and clients/python/README.md run as
# written (test/harness/doc_blocks.rb extracts them and reads their markers; test/e2e/
# docs_blocks.sh runs those of README.md and the other docs pages), each page in order, against a
# server set up as the README's quick start says: database myapp (dropped and created again for
# each page, with the quick start's commands), the role of the user running the test, the Unix
# socket (TCP asks for a password, as Debian's pg_hba.conf does). Examples name the defaults:
# /var/run/postgresql in a block is replaced by the test's socket directory, 127.0.0.1:6379 by
# its Redis. Each page has a HOME of its own, so that its application directory ~/myapp (the
# page's directory) starts empty: sh blocks run there with bash (`<!-- in the repository -->` ones from the repository's root: the client installs, which
# must leave clients/node and clients/python as they were), js as ES modules inside clients/node
# (where `jobbuf`, pg and Knex resolve), python with ~/myapp/.venv (the Python install block
# makes it), ruby with clients/ruby/lib on the load path, sql with psql as the user's role;
# `<!-- file: -->` blocks are written into ~/myapp, `<!-- background: TEXT -->` ones (a worker)
# must print TEXT within 60 s. In docs/clients.md every queue is paused once created (nothing is
# delivered and dropped) and each js, python and ruby block must stage at least one job; the
# READMEs' workers must print what their producers sent. A block that needs a superuser says
# `<!-- as a superuser -->` and runs as postgres. Blocks marked `<!-- not runnable: reason -->`
# are counted and named.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
bash "$ROOT/test/clients/install_node.sh"

source "$ROOT/test/clients/pick_python.sh"

e2e_start "jobbuf.database = '$JB_DB, myapp'"
# TCP needs a password, as in Debian's pg_hba.conf (the quick start's role has none: the examples
# connect over the socket, as its psql does)
sed -i '1i host all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256' "$JB_PGDATA/pg_hba.conf"
jb_pg_ctl reload
ME=$(id -un)
export USER=$ME   # as in a login shell (node-postgres's default role)
WORK=$JB_RUN/work BLOCKS=$JB_RUN/blocks NODE_BLOCKS=$ROOT/clients/node/.doc-blocks/$$
mkdir -p "$WORK/bin" "$BLOCKS" "$NODE_BLOCKS"
ln -s "$(pick_python "celery, redis, sqlalchemy, psycopg2, psycopg")" "$WORK/bin/python3"   # the python3 of the install blocks
chmod 755 "$JB_RUN"   # the user's role reaches the socket directory
export PATH="$WORK/bin:$PATH" PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0"
unset PGUSER
# node without PGHOST: PGHOST stands in for libpq's default, the socket, but node-postgres's
# default is TCP to localhost (which asks for a password): an example must name the socket
printf '#!/bin/sh\nunset PGHOST\nexec %s "$@"\n' "$(command -v node)" >"$WORK/bin/node"
chmod +x "$WORK/bin/node"
# npm installs from the machine's cache when it can (the pages' HOMEs have none)
export npm_config_cache=${npm_config_cache:-$(npm config get cache)} npm_config_prefer_offline=true \
  npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

BG_PIDS=()
stop_background() { [ ${#BG_PIDS[@]} -eq 0 ] || jb_stop_pids "${BG_PIDS[@]/#/-}"; BG_PIDS=(); }
trap 'stop_background; rm -rf "$NODE_BLOCKS"; e2e_cleanup' EXIT

# quick_start_db: database myapp as the README's quick start creates it (the role once).
quick_start_db() {
  jb_psql_db postgres -q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS myapp WITH (FORCE)" >/dev/null
  [ "$(jb_psql_db postgres -qtAX -c "SELECT count(*) FROM pg_roles WHERE rolname = '$ME'")" = 1 ] ||
    createuser -U postgres "$ME" || return 1
  createdb -U postgres -O "$ME" myapp &&
    PGOPTIONS="-c client_min_messages=warning" psql -X -q -U postgres -d myapp -c 'CREATE EXTENSION jobbuf' \
      -c "GRANT jobbuf_admin, jobbuf_producer, jobbuf_consumer TO \"$ME\"" >/dev/null
}

# myapp_sql SQL: one value from myapp, as postgres.
myapp_sql() { jb_psql_db myapp -qtAX -c "$1"; }
staged() { myapp_sql "SELECT count(*) FROM jobbuf.jobs"; }

# the clients' files (their installs must not add any: build/, *.egg-info, node_modules, ...)
clients_tree() { (cd "$ROOT" && find clients/node clients/python \( -name node_modules -o -name .doc-blocks -o -name __pycache__ \) -prune -o -print | sort); }

# run_block N LANG: runs block N in the current directory, output to $JB_RUN/N.out.
run_block() {
  local file=$BLOCKS/$1.$2
  sed -i -e "s/127\.0\.0\.1:6379/127.0.0.1:$JB_REDIS_PORT/g" -e "s|/var/run/postgresql|$JB_PGHOST|g" "$file"
  case $2 in
    sql) if [ -n "${AS_SUPERUSER:-}" ]; then psql -X -v ON_ERROR_STOP=1 -U postgres -f "$file"
         else psql -X -v ON_ERROR_STOP=1 -f "$file"; fi ;;
    sh) bash -e "$file" ;;
    js) cp "$file" "$NODE_BLOCKS/$1.mjs" && node "$NODE_BLOCKS/$1.mjs" ;;
    python) "$HOME/myapp/.venv/bin/python" "$file" ;;
    ruby) ruby -I "$ROOT/clients/ruby/lib" "$file" ;;
    *) echo "no runner for $2"; return 1 ;;
  esac >"$JB_RUN/$1.out" 2>&1 </dev/null
}
export BLOCKS JB_RUN JB_REDIS_PORT JB_PGHOST NODE_BLOCKS ROOT

# superuser_marked WHERE: the block at file:line has <!-- as a superuser --> among its markers.
superuser_marked() {
  local file=${1%%:*} line=${1##*:}
  awk -v fence="$line" 'NR < fence { if ($0 ~ /^<!-- .* -->$/) { if ($0 ~ /^<!-- as a superuser/) s = 1 }
                                     else if ($0 !~ /^[ \t]*$/) s = 0 }
                        END { exit !s }' "$ROOT/$file"
}

# page_setup PAGE: a fresh myapp, a fresh HOME, the page's directory ~/myapp.
page_setup() {
  stop_background
  quick_start_db || { fail "$1: setting up myapp as the quick start does"; return 1; }
  jb_redis FLUSHALL >/dev/null
  export HOME=$JB_RUN/pages/${1//\//_}/home PGDATABASE=myapp
  export DATABASE_URL="postgres:///myapp?host=$JB_PGHOST&port=$JB_PGPORT"
  PAGE_DIR=$HOME/myapp
  mkdir -p "$PAGE_DIR"
}

pages=(docs/clients.md clients/node/README.md clients/python/README.md)
ruby "$ROOT/test/harness/doc_blocks.rb" "$ROOT" "$BLOCKS" "${pages[@]}" >"$JB_RUN/manifest.tsv" ||
  { fail "extracting the blocks"; e2e_done; }
not_runnable=() page=
# (tabs made \037: read would merge the tabs around an empty field, a tab being whitespace to IFS)
while IFS=$'\037' read -r n lang where how arg prints; do
  [ "${where%%:*}" = "$page" ] || { page=${where%%:*}; page_setup "$page"; }
  cd "$PAGE_DIR" || exit 1
  AS_SUPERUSER=
  superuser_marked "$where" && AS_SUPERUSER=1
  case $how in
    skip) not_runnable+=("$where ($arg)"); continue ;;
    file) sed -e "s/127\.0\.0\.1:6379/127.0.0.1:$JB_REDIS_PORT/g" -e "s|/var/run/postgresql|$JB_PGHOST|g" \
            "$BLOCKS/$n.$lang" >"$arg"
          pass "$where ($lang) written to ~/myapp/$arg"; continue ;;
    background)
      setsid bash -c "$(declare -f run_block); run_block $n $lang" &
      BG_PIDS+=($!)
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
  before=$(staged) tree_before=$(clients_tree)
  run_block "$n" "$lang"
  status=$?
  [ "$page" = docs/clients.md ] && [ "$lang" = sql ] &&
    myapp_sql "SELECT jobbuf_pause(name) FROM jobbuf.queues WHERE NOT paused" >/dev/null
  if [ "$status" != 0 ]; then
    fail "$where ($lang) runs: exit $status"
    sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
    continue
  elif [ -n "$prints" ] && ! tr -s ' ' <"$JB_RUN/$n.out" | grep -qF -- "$(tr -s ' ' <<<"$prints")"; then
    fail "$where ($lang) runs but does not print \"$prints\""
    sed 's/^/    /' "$JB_RUN/$n.out" | tail -n 15
    continue
  fi
  after=$(staged)
  case $how:$lang in
    *:js|*:python|*:ruby) check "$where ($lang) runs and stages jobs ($before -> $after)" [ "$after" -gt "$before" ] ;;
    repo:*) check "$where ($lang) runs from the repository and leaves clients/ as it was" \
              [ "$(clients_tree)" = "$tree_before" ] ;;
    *) pass "$where ($lang) runs${prints:+ and prints \"$prints\"}${AS_SUPERUSER:+ (as a superuser)}" ;;
  esac
done < <(tr '\t' '\037' <"$JB_RUN/manifest.tsv")
cd "$ROOT" || exit 1
stop_background
say "${#not_runnable[@]} blocks marked not runnable:"
for m in "${not_runnable[@]}"; do say "  $m"; done
check "the blocks marked not runnable are the ones expected (4: 2 in docs/clients.md, the READMEs' apt-get)" \
  [ "${#not_runnable[@]}" = 4 ]
e2e_done

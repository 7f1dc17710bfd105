#!/usr/bin/env bash
# `make installcheck` on a server set up as the README's quick start says (the library preloaded,
# a database `myapp` whose drain worker delivers to the server's Redis, a role for the user who
# runs it, made superuser as CONTRIBUTING.md says), once with jobbuf.database '*' (the default:
# the regression database gets a drain worker) and once with jobbuf.database = 'myapp' (it gets
# none). Each time: the suite passes, leaves no database, writes nothing to Redis, and myapp's
# worker still delivers.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
ME=$(id -un)
JOBS=0

# readme_server "jobbuf.database line": the private servers, configured and populated as the
# README's quick start does, with one job delivered from myapp.
readme_server() {
  jb_start_redis || exit 1
  jb_start_postgres "$1" || exit 1
  export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT
  unset PGUSER PGDATABASE
  jb_psql_db postgres -q -c "CREATE ROLE \"$ME\" LOGIN" -c "CREATE DATABASE myapp OWNER \"$ME\"" >/dev/null
  jb_psql_db myapp -q -c "CREATE EXTENSION jobbuf" \
    -c "GRANT jobbuf_admin, jobbuf_producer, jobbuf_consumer TO \"$ME\"" >/dev/null
  psql -X -q -d myapp -c "SELECT jobbuf_create_queue('hello', 'list')" >/dev/null
  JOBS=0
  stage_and_expect_delivery "before make installcheck"
  jb_psql_db postgres -q -c "ALTER ROLE \"$ME\" SUPERUSER" >/dev/null   # CONTRIBUTING.md's step
}

stage_and_expect_delivery() {
  psql -X -q -d myapp -c "SELECT jobbuf_stage('hello', '{\"n\": $JOBS}')" >/dev/null
  JOBS=$((JOBS + 1))
  expect_list_reaches jobbuf:hello "$JOBS" 15 "myapp's worker delivers $1"
}

for setting in "jobbuf.database = '*'" "jobbuf.database = 'myapp'"; do
  say "a server set up as the README says, $setting"
  readme_server "$setting"
  keys_before=$(jb_redis KEYS '*' | sort | tr '\n' ' ')
  out=$(cd "$ROOT" && make -s installcheck 2>&1)
  status=$?
  check "make installcheck passes ($setting)" [ "$status" = 0 ]
  # pg_regress writes where the Makefile's REGRESS_OPTS say (--outputdir=test/regress).
  [ "$status" = 0 ] || { sed 's/^/    /' <<<"$out" | tail -n 20; head -n 80 "$ROOT/test/regress/regression.diffs" 2>/dev/null; }
  expect_eq "no regression database is left" \
    "$(jb_psql_db postgres -qtAX -c "SELECT count(*) FROM pg_database WHERE datname = 'contrib_regression'")" 0
  expect_eq "Redis holds the keys it held before, nothing more" "$(jb_redis KEYS '*' | sort | tr '\n' ' ')" "$keys_before"
  stage_and_expect_delivery "after make installcheck"
  rm -rf "$ROOT/test/regress/results" "$ROOT/test/regress/regression.diffs" "$ROOT/test/regress/regression.out"
  jb_stop_all
  unset JB_RUN JB_PGDATA JB_REDIS_PID
done
e2e_done

#!/usr/bin/env bash
# Runs jobbuf's test suites against the PostgreSQL that pg_config names; `make test` calls it
# with no argument (every suite) and then test/platforms.sh (the other majors and servers).
#   test/run.sh [unit|regress|pgtap|isolation|upgrade|e2e|faults|test/<dir>/<script>.sh]...
# JB_REDIS=valkey runs the Redis-facing tests against Valkey (test/harness/redis_flavor.sh).
# STRESS=1 (make test STRESS=1) runs the suites beside a CPU and I/O load (test/harness/stress.sh).
# The last line names every suite or script that failed; JB_FAILED_FILE=PATH also writes them there
# (make test repeats them at the very end of its output, after the other parts').
# Each suite that needs servers starts its own private Postgres cluster and redis-server on free
# loopback ports and stops them, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
source test/harness/redis_flavor.sh

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(unit regress pgtap isolation upgrade e2e faults)

build_and_install() {
  make -s -j"$(nproc)" >/dev/null
  make -s install >/dev/null
}

# The include graph of src/ (no two-way arrow), its rooms as docs/internals/architecture.md draws them, then
# the GoogleTest tests of src/redis/.
run_unit() {
  bash test/unit/include_graph.sh && bash test/unit/rooms.sh &&
    make -s -j"$(nproc)" -C test/unit
}

# SQL surface with expected output (test/regress/sql/*.sql, test/regress/expected/*.out), against a private cluster.
run_regress() {
  ( source test/harness/servers.sh
    jb_start_redis
    jb_start_postgres "jobbuf.database = '*'"
    # staging.sql reads jobbuf_worker_status(), whose rows are the running drain workers: the one
    # of jobbuf_test runs before the suites start, however slowly the launcher starts it.
    jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()" 2>/dev/null)" = t ]' 60 ||
      { echo "the drain worker of $JB_DB did not start"; exit 1; }
    local tests
    tests=$(make -s -f Makefile print-regress 2>/dev/null)
    "$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress" \
      --host="$JB_PGHOST" --port="$JB_PGPORT" --user=postgres \
      --inputdir=test/regress --outputdir=test/regress --bindir="$(pg_config --bindir)" --dbname=jobbuf_regress \
      $tests || exit 1
    # The suites ran as make installcheck runs them on a server configured as the README says
    # (jobbuf.database '*': the regression database had a drain worker): they left no database,
    # and nothing of theirs reached Redis.
    [ "$(jb_psql_db postgres -qtAX -c "SELECT count(*) FROM pg_database WHERE datname = 'jobbuf_regress'")" = 0 ] ||
      { echo "make installcheck left its database"; exit 1; }
    [ "$(jb_redis DBSIZE)" = 0 ] || { echo "make installcheck wrote to Redis: $(jb_redis KEYS '*')"; exit 1; }
    echo "ok   no database left, nothing written to Redis" )
}

run_pgtap() {
  [ -d test/pgtap ] || return 0
  ( source test/harness/servers.sh
    jb_start_redis
    jb_start_postgres
    jb_psql -q -c "CREATE EXTENSION IF NOT EXISTS pgtap" >/dev/null
    pg_prove -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$JB_DB" test/pgtap/*.sql )
}

run_isolation() {
  [ -d test/isolation/specs ] || return 0
  ( source test/harness/servers.sh
    jb_start_redis
    jb_start_postgres
    local specs
    specs=$(cd test/isolation/specs && ls *.spec | sed 's/\.spec$//')
    "$(dirname "$(pg_config --pgxs)")/../test/isolation/pg_isolation_regress" \
      --host="$JB_PGHOST" --port="$JB_PGPORT" --user=postgres \
      --inputdir=test/isolation --outputdir=output_iso --bindir="$(pg_config --bindir)" \
      --dbname=jobbuf_isolation --load-extension=jobbuf $specs )
}

# End-to-end scripts: each test/e2e/*.sh starts its own servers and exits non-zero on failure.
run_scripts() {
  local dir=$1 failed=0
  [ -d "$dir" ] || return 0
  for t in "$dir"/*.sh; do
    run_script "$t" || failed=1
  done
  return $failed
}

failed=()
run_script() {
  local started=$SECONDS
  echo "--- $1"
  if bash "$1"; then echo "ok   $1 ($((SECONDS - started)) s)"; else echo "FAIL $1 ($((SECONDS - started)) s)"; failed+=("$1"); return 1; fi
}

echo "=== $(pg_config --version), $(redis-server --version | cut -d' ' -f1-3)"
build_and_install
# The load runs from here to the end, whatever the end is (it also stops by itself once this
# shell is gone, even after a SIGKILL).
if [ "${STRESS:-0}" = 1 ]; then
  bash test/harness/stress.sh $$ &
  stress_pid=$!
  trap 'kill "$stress_pid" 2>/dev/null; wait "$stress_pid" 2>/dev/null' EXIT
  trap 'exit 130' INT TERM
  echo "=== STRESS=1: $(nproc) busy loops and a 64 MB fsync writer run beside the suites (test/harness/stress.sh)"
fi
status=0
for s in "${suites[@]}"; do
  echo "=== suite: $s"
  suite_started=$SECONDS
  case $s in
    unit) run_unit || { status=1; failed+=(unit); } ;;
    regress) run_regress || { status=1; failed+=(regress); } ;;
    pgtap) run_pgtap || { status=1; failed+=(pgtap); } ;;
    isolation) run_isolation || { status=1; failed+=(isolation); } ;;
    upgrade) run_scripts test/upgrade || status=1 ;;
    e2e) run_scripts test/e2e || status=1 ;;
    faults) run_scripts test/faults || status=1 ;;
    test/*.sh) run_script "$s" || status=1 ;;
    *) echo "unknown suite $s"; exit 2 ;;
  esac
  echo "=== suite $s took $((SECONDS - suite_started)) s"
done
[ -z "${JB_FAILED_FILE:-}" ] || [ ${#failed[@]} -eq 0 ] || echo "${failed[*]}" >"$JB_FAILED_FILE"
[ $status -eq 0 ] && echo "=== all suites passed" || echo "=== FAILURES (see above): ${failed[*]}"
exit $status

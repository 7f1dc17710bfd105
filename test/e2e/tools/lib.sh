# Shared helpers for the end-to-end scripts in test/e2e (sourced, not run: it lives in tools/ so
# that the suite runner, which runs test/e2e/*.sh, does not pick it up).
#
#   source "$(dirname "$0")/tools/lib.sh"
#   e2e_start ["extra postgresql.conf lines"]   # redis + postgres, waits for the drain worker
#   the checks of test/harness/checks.sh (say, pass, fail, check, expect_eq, ...)
#   the waits of test/harness/preconditions.sh (set_and_reload, wait_delivered, tx_open, ...)
#   e2e_done                                     # prints the summary, exits non-zero on failure
set -uo pipefail

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
E2E_EXTRA_PIDS=()

# shellcheck source=../../harness/servers.sh
source "$E2E_ROOT/test/harness/servers.sh"
# shellcheck source=../../harness/checks.sh
source "$E2E_ROOT/test/harness/checks.sh"
# shellcheck source=../../harness/preconditions.sh
source "$E2E_ROOT/test/harness/preconditions.sh"

# e2e_start ["extra postgresql.conf lines"]: private redis + postgres, then waits until the drain
# worker runs (it starts about a second after the database). It has not connected to Redis yet:
# the worker connects once a queue exists (wait_redis_connected).
e2e_start() {
  jb_start_redis || exit 1
  jb_start_postgres "${1:-}" || exit 1
  trap e2e_cleanup EXIT
  if ! wait_worker_running 15; then
    echo "  the drain worker did not start; server log:" >&2
    tail -n 30 "$JB_RUN/postgres.log" >&2
    exit 1
  fi
}

e2e_cleanup() {
  local pid
  for pid in "${E2E_EXTRA_PIDS[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  jb_stop_all
}

# start_extra_redis: another private redis-server; sets EXTRA_REDIS_PORT; stopped on exit.
# expect_list_reaches KEY N SECONDS WHAT: passes WHAT once the Redis list KEY holds N entries,
# fails it when SECONDS pass first.
expect_list_reaches() {
  if jb_wait_until "[ \"\$(jb_redis LLEN $1)\" = $2 ]" "$3"; then
    pass "$4"
  else
    fail "$4: $(jb_redis LLEN "$1") of $2 entries in $1 after $3 s"
  fi
}

# expect_lone_job_first STREAM WHERE BATCH TOTAL WHAT: the fairness check by position. Once no row
# of jobbuf.jobs matches WHERE (the lone job is delivered; WHAT, failed after 120 s), the first
# entry of STREAM whose payload says "lone" must be among its first 2 × BATCH entries (XRANGE
# prints each entry as its id and its field/value lines: entries are counted by their ids); then
# every one of the TOTAL jobs staged is delivered once (600 s: a million jobs on a loaded machine).
expect_lone_job_first() {
  local stream=$1 where=$2 batch=$3 total=$4 entries position entry=
  if jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE $where\")\" = 0 ]" 120; then
    pass "$5"
  else
    fail "$5: not within 120 s"
  fi
  entries=$(jb_redis XRANGE "$stream" - + COUNT $((4 * batch)))
  position=$(grep -n 'lone' <<<"$entries" | head -n 1 | cut -d: -f1)
  [ -z "$position" ] || entry=$(head -n "$position" <<<"$entries" | grep -cE '^[0-9]+-[0-9]+$')
  check "the lone job is among the first 4 × batch_size entries of $stream" test -n "$entry"
  say "the lone job is entry $entry of $stream (batch_size $batch)"
  expect_le "the lone job is among the first 2 × batch_size entries pushed" "${entry:-999999999}" $((2 * batch))
  jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 600 || fail "the backlog was not delivered within 600 s"
  expect_eq "every job delivered once" "$(jb_redis XLEN "$stream")" "$total"
}

# expect_all_delivered_once KEY N: the Redis list KEY holds N distinct entries and jobbuf.jobs is
# empty (once the worker committed the batches it pushed: it pushes first, then commits).
expect_all_delivered_once() {
  expect_eq "no job twice" "$(jb_redis LRANGE "$1" 0 -1 | sort -u | wc -l)" "$2"
  wait_staged 0
  expect_eq "jobbuf.jobs is empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
}

start_extra_redis() {
  jb_on_free_port EXTRA_REDIS_PORT extra_redis_on
}

extra_redis_on() {  # PORT
  local dir=$JB_RUN/redis-$1
  mkdir -p "$dir"
  redis-server --port "$1" --bind 127.0.0.1 --dir "$dir" \
    --save '' --appendonly no --daemonize no --logfile "$dir/redis.log" &
  E2E_EXTRA_PIDS+=($!)
  jb_redis_started $! "$dir/redis.log" 0 -p "$1"
}

# stop_redis: stops the harness's redis-server (jb_restart_redis brings it back on the same port).
stop_redis() {
  kill "$JB_REDIS_PID" 2>/dev/null
  wait "$JB_REDIS_PID" 2>/dev/null
  jb_wait_until '! redis-cli -p "$JB_REDIS_PORT" ping >/dev/null 2>&1' 5
}

e2e_done() { checks_done; }

# Shared helpers for the end-to-end scripts in test/e2e (sourced, not run: it lives in tools/ so
# that the suite runner, which runs test/e2e/*.sh, does not pick it up).
#
#   source "$(dirname "$0")/tools/lib.sh"
#   e2e_start ["extra postgresql.conf lines"]   # redis + postgres, waits for the drain worker
#   check "what" <command...>                    # runs the command, prints ok/FAIL, counts
#   expect_eq "what" <actual> <expected>
#   e2e_done                                     # prints the summary, exits non-zero on failure
set -uo pipefail

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
E2E_NAME=$(basename "$0" .sh)
E2E_FAILURES=0
E2E_CHECKS=0
E2E_EXTRA_PIDS=()

# shellcheck source=../../harness/servers.sh
source "$E2E_ROOT/test/harness/servers.sh"

say() { echo "  [$E2E_NAME] $*"; }

pass() { E2E_CHECKS=$((E2E_CHECKS + 1)); echo "  ok   $*"; }

fail() {
  E2E_CHECKS=$((E2E_CHECKS + 1))
  E2E_FAILURES=$((E2E_FAILURES + 1))
  echo "  FAIL $*"
}

# check "description" command args...: passes when the command succeeds.
check() {
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

# expect_eq "description" actual expected
expect_eq() {
  local shown=$2
  if [ ${#shown} -gt 80 ] || [[ $shown == *$'\n'* ]]; then shown="$(wc -l <<<"$2") lines"; fi
  if [ "$2" == "$3" ]; then pass "$1 ($shown)"; else fail "$1: got '${2:0:300}', expected '${3:0:300}'"; fi
}

# expect_le "description" actual max (integers)
expect_le() {
  if [ "$2" -le "$3" ]; then pass "$1 ($2 <= $3)"; else fail "$1: got $2, expected at most $3"; fi
}

# expect_match "description" text regex
expect_match() {
  if [[ $2 =~ $3 ]]; then pass "$1"; else fail "$1: '$2' does not match /$3/"; fi
}

# The harness sets log_min_messages = log, which (log_min_messages ranks LOG above ERROR) hides
# WARNING lines from the server log; the outage and configuration checks count those lines.
E2E_BASE_CONF="log_min_messages = warning"

# e2e_start ["extra postgresql.conf lines"]: private redis + postgres, then waits until the drain
# worker runs and has connected to Redis once (it starts about a second after the database).
e2e_start() {
  jb_start_redis || exit 1
  jb_start_postgres "$E2E_BASE_CONF
${1:-}" || exit 1
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

wait_worker_running() {
  jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()" 2>/dev/null)" = t ]' "${1:-15}"
}

# start_extra_redis: another private redis-server; sets EXTRA_REDIS_PORT; stopped on exit.
start_extra_redis() {
  EXTRA_REDIS_PORT=$(jb_free_port)
  mkdir -p "$JB_RUN/redis-$EXTRA_REDIS_PORT"
  redis-server --port "$EXTRA_REDIS_PORT" --bind 127.0.0.1 --dir "$JB_RUN/redis-$EXTRA_REDIS_PORT" \
    --save '' --appendonly no --daemonize no --logfile "$JB_RUN/redis-$EXTRA_REDIS_PORT/redis.log" &
  E2E_EXTRA_PIDS+=($!)
  jb_wait_until "redis-cli -p $EXTRA_REDIS_PORT ping >/dev/null 2>&1" 5
}

# stop_redis: stops the harness's redis-server (jb_restart_redis brings it back on the same port).
stop_redis() {
  kill "$JB_REDIS_PID" 2>/dev/null
  wait "$JB_REDIS_PID" 2>/dev/null
  jb_wait_until '! redis-cli -p "$JB_REDIS_PORT" ping >/dev/null 2>&1' 5
}

# log_mark: the current length of the server log; log_since <mark>: what was logged after it.
log_mark() { wc -l <"$JB_RUN/postgres.log"; }
log_since() { tail -n +"$(( $1 + 1 ))" "$JB_RUN/postgres.log"; }

# count_lines <pattern> <text>: lines of text matching the extended regex.
count_lines() { grep -cE -- "$1" <<<"$2" || true; }

# Milliseconds since the epoch.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

e2e_done() {
  if [ "$E2E_FAILURES" -gt 0 ]; then
    echo "  [$E2E_NAME] $E2E_FAILURES of $E2E_CHECKS checks FAILED"
    if [ -n "${JB_RUN:-}" ] && [ -f "$JB_RUN/postgres.log" ]; then
      echo "  --- last lines of the server log"
      grep -E 'jobbuf|ERROR|FATAL|PANIC|terminated|exited' "$JB_RUN/postgres.log" | tail -n 25 | sed 's/^/  | /'
    fi
    exit 1
  fi
  echo "  [$E2E_NAME] all $E2E_CHECKS checks passed"
  exit 0
}

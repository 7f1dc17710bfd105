# Shared helpers for the fault-injection scripts in test/faults (sourced, not run: it lives in
# tools/ so that the suite runner, which runs test/faults/*.sh, does not pick it up).
#
#   source "$(dirname "$0")/tools/lib.sh"
#   faults_start "redis-server args" "extra postgresql.conf lines"
#   check / expect_eq / expect_le / pass / fail / say
#   faults_done                           # summary; exit status 1 when a check failed
#
# Every process a script starts is registered (track_pid) and stopped on EXIT, whatever the outcome.
set -uo pipefail

FAULTS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
FAULTS_NAME=$(basename "$0" .sh)
FAULTS_FAILURES=0
FAULTS_CHECKS=0
FAULTS_PIDS=()
FAULTS_CLEANUPS=()

# shellcheck source=../../harness/servers.sh
source "$FAULTS_ROOT/test/harness/servers.sh"

say() { echo "  [$FAULTS_NAME] $*"; }
pass() { FAULTS_CHECKS=$((FAULTS_CHECKS + 1)); echo "  ok   $*"; }
fail() {
  FAULTS_CHECKS=$((FAULTS_CHECKS + 1))
  FAULTS_FAILURES=$((FAULTS_FAILURES + 1))
  echo "  FAIL $*"
}
check() {
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
expect_eq() {
  local shown=$2
  if [ ${#shown} -gt 80 ] || [[ $shown == *$'\n'* ]]; then shown="$(wc -l <<<"$2") lines"; fi
  if [ "$2" == "$3" ]; then pass "$1 ($shown)"; else fail "$1: got '${2:0:300}', expected '${3:0:300}'"; fi
}
expect_le() {
  if [ "$2" -le "$3" ]; then pass "$1 ($2 <= $3)"; else fail "$1: got $2, expected at most $3"; fi
}
expect_match() {
  if [[ $2 =~ $3 ]]; then pass "$1"; else fail "$1: '${2:0:300}' does not match /$3/"; fi
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# track_pid <pid>: stopped (CONT then TERM, then KILL) on exit.
track_pid() { FAULTS_PIDS+=("$1"); }
# on_exit "<command>": run on exit, before the harness stops its servers (last registered first).
on_exit() { FAULTS_CLEANUPS=("$1" "${FAULTS_CLEANUPS[@]}"); }

faults_cleanup() {
  local pid cmd
  for cmd in "${FAULTS_CLEANUPS[@]}"; do eval "$cmd" >/dev/null 2>&1 || true; done
  for pid in "${FAULTS_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || continue
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ -n "${JB_REDIS_PID:-}" ] && kill -CONT "$JB_REDIS_PID" 2>/dev/null
  jb_stop_all
}

# The harness sets log_min_messages = log, which hides WARNING lines (log_min_messages ranks LOG
# above ERROR); these scripts count jobbuf's WARNING lines, so they log from WARNING up.
FAULTS_BASE_CONF="log_min_messages = warning"

# faults_start "<redis-server args>" "<extra postgresql.conf lines>"
faults_start() {
  local redis_args=()
  # shellcheck disable=SC2206
  [ -n "${1:-}" ] && redis_args=($1)
  jb_init_run_dir
  trap faults_cleanup EXIT
  jb_start_redis "${redis_args[@]}" || exit 1
  jb_start_postgres "$FAULTS_BASE_CONF
${2:-}" || exit 1
  if ! wait_worker_running 20; then
    echo "  the drain worker did not start; server log:" >&2
    tail -n 30 "$JB_RUN/postgres.log" >&2
    exit 1
  fi
}

postmaster_pid() { head -n 1 "$JB_PGDATA/postmaster.pid" 2>/dev/null; }

# worker_pid: the drain worker of this cluster (from jobbuf_worker_status, else from ps).
worker_pid() {
  local pid
  pid=$(jb_sql "SELECT pid FROM jobbuf_worker_status()" 2>/dev/null)
  if [ -z "$pid" ]; then
    pid=$(children_named "jobbuf drain worker" | head -n 1)
  fi
  echo "$pid"
}

# children_named <title>: pids of this cluster's postmaster children whose title contains <title>.
children_named() {
  local pm
  pm=$(postmaster_pid)
  [ -n "$pm" ] || return 0
  ps -o pid=,args= --ppid "$pm" 2>/dev/null | grep -F -- "$1" | awk '{print $1}'
}

wait_worker_running() {
  jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()" 2>/dev/null)" = t ]' "${1:-15}"
}

log_mark() { wc -l <"$JB_RUN/postgres.log"; }
log_since() { tail -n +"$(( $1 + 1 ))" "$JB_RUN/postgres.log"; }
count_lines() { grep -cE -- "$1" <<<"$2" || true; }

faults_done() {
  if [ "$FAULTS_FAILURES" -gt 0 ]; then
    echo "  [$FAULTS_NAME] $FAULTS_FAILURES of $FAULTS_CHECKS checks FAILED"
    if [ -n "${JB_RUN:-}" ] && [ -f "$JB_RUN/postgres.log" ]; then
      echo "  --- last jobbuf/error lines of the server log"
      grep -E 'jobbuf|ERROR|FATAL|PANIC|terminated|exited' "$JB_RUN/postgres.log" | tail -n 25 | sed 's/^/  | /'
    fi
    exit 1
  fi
  echo "  [$FAULTS_NAME] all $FAULTS_CHECKS checks passed"
  exit 0
}

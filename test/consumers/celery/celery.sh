# Starts and stops a real Celery worker (Debian 12's python3-celery 5.2, run as
# `/usr/bin/python3 -m celery`: Debian ships no `celery` executable) running
# test/consumers/celery/jobbuf_e2e_tasks.py against a Redis broker (sourced by bash).
#
#   jb_start_celery RUN_LOG QUEUE [BROKER_URL]  # JB_CELERY_PID; default broker: the harness's redis
#   jb_wait_celery_ready [timeout]              # until the worker logged "ready."
#   jb_stop_celery                              # TERM (warm shutdown), KILL after 15 s; safe twice
#
# RUN_LOG receives one JSON line per task execution (see jobbuf_e2e_tasks.py); the worker's own
# log is $JB_CELERY_LOG.

JB_CELERY_APP_DIR=${JB_CELERY_APP_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
JB_CELERY_PYTHON=${JB_CELERY_PYTHON:-/usr/bin/python3}

jb_start_celery() {
  local run_log=$1 queue=$2 broker=${3:-redis://127.0.0.1:${JB_REDIS_PORT:-6379}/0}
  JB_CELERY_LOG=${JB_RUN:-/tmp}/celery.$$.log
  : >"$run_log"
  : >"$JB_CELERY_LOG"
  (cd "$JB_CELERY_APP_DIR" &&
    JOBBUF_CELERY_BROKER="$broker" JOBBUF_E2E_LOG="$run_log" exec "$JB_CELERY_PYTHON" -m celery \
      -A jobbuf_e2e_tasks worker -Q "$queue" -c 2 --pool prefork --without-gossip --without-mingle \
      --without-heartbeat -n "jobbuf-e2e-$$@%h" --loglevel INFO >"$JB_CELERY_LOG" 2>&1 </dev/null) &
  JB_CELERY_PID=$!
}

jb_wait_celery_ready() {
  local timeout=${1:-30} i
  for ((i = 0; i < timeout * 10; i++)); do
    grep -q ' ready\.' "$JB_CELERY_LOG" 2>/dev/null && return 0
    kill -0 "$JB_CELERY_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

jb_stop_celery() {
  [ -n "${JB_CELERY_PID:-}" ] || return 0
  kill -TERM "$JB_CELERY_PID" 2>/dev/null
  local i
  for ((i = 0; i < 150; i++)); do
    kill -0 "$JB_CELERY_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$JB_CELERY_PID" 2>/dev/null
  wait "$JB_CELERY_PID" 2>/dev/null
  JB_CELERY_PID=
}

# Starts and stops a real Sidekiq server running test/consumers/sidekiq/app.rb against the test
# harness's redis-server and Postgres (sourced by bash, after test/harness/servers.sh).
#
#   jb_start_sidekiq RUN_LOG QUEUE...   # JB_SIDEKIQ_PID; Sidekiq's own log in $JB_RUN/sidekiq.log
#   jb_wait_sidekiq_ready [timeout]     # until the process has registered its heartbeat
#   jb_stop_sidekiq                     # TERM, then KILL after 10 s; safe to call twice
#
# RUN_LOG receives one JSON line per job performed (see app.rb).

JB_SIDEKIQ_APP=${JB_SIDEKIQ_APP:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/app.rb}

jb_sidekiq_bin() {
  command -v sidekiq 2>/dev/null && return 0
  local gemdir
  gemdir=$(ruby -e 'print Gem::Specification.find_by_name("sidekiq").gem_dir' 2>/dev/null) || return 1
  [ -x "$gemdir/bin/sidekiq" ] && echo "$gemdir/bin/sidekiq"
}

jb_start_sidekiq() {
  local run_log=$1; shift
  local bin qargs=()
  bin=$(jb_sidekiq_bin) || { echo "sidekiq executable not found (install ruby-sidekiq)" >&2; return 1; }
  for q in "$@"; do qargs+=(-q "$q"); done
  JB_SIDEKIQ_LOG=$JB_RUN/sidekiq.log
  : >"$run_log"
  REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0" JOBBUF_E2E_LOG="$run_log" \
  PGHOST="$JB_PGHOST" PGPORT="$JB_PGPORT" PGUSER=postgres PGDATABASE="$JB_DB" \
    "$bin" -r "$JB_SIDEKIQ_APP" -e test -c 3 -t 3 "${qargs[@]}" >"$JB_SIDEKIQ_LOG" 2>&1 </dev/null &
  JB_SIDEKIQ_PID=$!
}

# Sidekiq registers "<hostname>:<pid>:<nonce>" in the `processes` set once it is running.
jb_wait_sidekiq_ready() {
  local timeout=${1:-20}
  jb_wait_until '[ "$(jb_redis SCARD processes)" -ge 1 ] || ! kill -0 "$JB_SIDEKIQ_PID" 2>/dev/null' "$timeout" &&
    kill -0 "$JB_SIDEKIQ_PID" 2>/dev/null && [ "$(jb_redis SCARD processes)" -ge 1 ]
}

jb_stop_sidekiq() {
  [ -n "${JB_SIDEKIQ_PID:-}" ] || return 0
  if kill -0 "$JB_SIDEKIQ_PID" 2>/dev/null; then
    kill -TERM "$JB_SIDEKIQ_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$JB_SIDEKIQ_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$JB_SIDEKIQ_PID" 2>/dev/null || true
  fi
  wait "$JB_SIDEKIQ_PID" 2>/dev/null || true
  JB_SIDEKIQ_PID=
}

# Stops Sidekiq and, when the test failed ($1: its failure count), prints the end of its log.
jb_stop_sidekiq_reporting() {
  jb_stop_sidekiq
  if [ "$1" -ne 0 ] && [ -n "${JB_SIDEKIQ_LOG:-}" ] && [ -f "$JB_SIDEKIQ_LOG" ]; then
    echo "--- last lines of the Sidekiq log"; tail -n 40 "$JB_SIDEKIQ_LOG"
  fi
}

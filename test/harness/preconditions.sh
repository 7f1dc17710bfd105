# Test harness (sourced by bash, after servers.sh): helpers that build a test's precondition on
# purpose, or wait for it on Postgres-side state, so that no test depends on the machine's speed.
# Each returns non-zero when its state is not reached within its timeout (the caller fails).
#
#   set_and_reload NAME VALUE [SHOWN]   # ALTER SYSTEM SET + reload, until the worker was signalled
#   reset_and_reload NAME SHOWN         # ALTER SYSTEM RESET + reload, the same way
#   wait_redis_connected                # jobbuf_worker_status().redis_connected
#   wait_delivered N                    # the worker counted N deliveries (their commits are done)
#   wait_staged N ["WHERE ..."]         # jobbuf.jobs holds N rows (matching the condition)
#   wait_census                         # a census of the worker taken after now (jobbuf_stats() counts from it)
#   in_batch / worker_idle              # the worker is inside a batch / waits on its latch
#   wait_lock_waiter "QUERY"            # a session running exactly QUERY waits for a lock
#   tx_open; tx_run "SQL"; tx_send "SQL"; tx_close [COMMIT|ROLLBACK]   # a transaction held open
#
# Facts they rely on (see src/): a batch pushes to Redis first and commits its DELETE and stats
# afterwards; jobbuf_worker_status().delivered is bumped after that commit (and its statistics
# report); once a new session's SHOW prints the new value, the postmaster has reloaded and
# signalled the worker, which re-reads its settings before its next batch.

PRECONDITION_TIMEOUT=${PRECONDITION_TIMEOUT:-15}

set_and_reload() {
  jb_psql -q -o /dev/null -c "ALTER SYSTEM SET $1 = '$2'" -c "SELECT pg_reload_conf()" || return 1
  wait_setting_shown "$1" "${3:-$2}"
}

reset_and_reload() {
  jb_psql -q -o /dev/null -c "ALTER SYSTEM RESET $1" -c "SELECT pg_reload_conf()" || return 1
  wait_setting_shown "$1" "$2"
}

wait_setting_shown() {
  jb_wait_until "[ \"\$(jb_sql 'SHOW $1' 2>/dev/null)\" = '$2' ]" "$PRECONDITION_TIMEOUT"
}

worker_status_value() { jb_sql "SELECT $1 FROM jobbuf_worker_status()" 2>/dev/null; }

wait_redis_connected() {
  jb_wait_until '[ "$(worker_status_value redis_connected)" = t ]' "$PRECONDITION_TIMEOUT"
}

wait_delivered() {
  jb_wait_until "[ \"\$(worker_status_value delivered)\" -ge $1 ]" "$PRECONDITION_TIMEOUT"
}

wait_staged() {
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs ${2:-}\")\" = $1 ]" "$PRECONDITION_TIMEOUT"
}

# wait_census: the worker took a census that started after this call (jobbuf_stats() and
# jobbuf_queue_metrics() count jobs as of the last one; see src/census/queue_census.h).
wait_census() {
  local t
  t=$(jb_sql "SELECT clock_timestamp()")
  jb_wait_until "[ \"\$(jb_sql \"SELECT coalesce(bool_and(census_at > '$t'), false) FROM jobbuf.queue_stats\")\" = t ]" "$PRECONDITION_TIMEOUT"
}

# worker_activity: the drain worker's state, query and wait event type, e.g.
# "active|jobbuf: delivering a batch|Extension" (an idle backend keeps showing its last query).
worker_activity() {
  jb_sql "SELECT state || '|' || query || '|' || coalesce(wait_event_type, '') FROM pg_stat_activity
          WHERE backend_type = 'jobbuf drain worker'"
}

# in_batch: the worker is inside a batch's transaction (waiting on Redis, say).
in_batch() {
  jb_wait_until '[ "$(worker_activity | cut -d"|" -f1,2)" = "active|jobbuf: delivering a batch" ]' "$PRECONDITION_TIMEOUT"
}

# worker_idle: the worker sleeps on its latch between rounds (idle, in a wait of its own); its
# Redis round trips all happen while it is active or connecting, and a commit arriving during
# one of them wakes the worker without being counted as a wake-up.
worker_idle() {
  jb_wait_until '[ "$(worker_activity | cut -d"|" -f1,3)" = "idle|Extension" ]' "$PRECONDITION_TIMEOUT"
}

wait_lock_waiter() {
  local query=${1//\'/\'\'}
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM pg_stat_activity WHERE query = '$query' AND wait_event_type = 'Lock'\")\" != 0 ]" \
    "$PRECONDITION_TIMEOUT"
}

# tx_open: a psql session in the background that runs what tx_send / tx_run write to it, so that
# a transaction stays open exactly until tx_close. One at a time (file descriptor 7).
tx_open() {
  TX_FIFO=$(mktemp -u "$JB_RUN/tx.XXXXXX")
  mkfifo "$TX_FIFO"
  jb_psql -qtAX -o /dev/null <"$TX_FIFO" >"$TX_FIFO.log" 2>&1 &
  TX_PID=$!
  exec 7>"$TX_FIFO"
  TX_STEP=0
}

# tx_send "SQL": sends without waiting (a statement that blocks, say); a closed session makes it
# fail rather than kill the script with SIGPIPE.
tx_send() {
  ( trap '' PIPE; printf '%s\n' "$1" >&7 ) 2>/dev/null
}

# tx_run "SQL": sends and returns once the session has run it.
tx_run() {
  TX_STEP=$((TX_STEP + 1))
  tx_send "$1" && tx_send "SELECT $TX_STEP \\g $TX_FIFO.step" || return 1
  jb_wait_until "[ \"\$(cat '$TX_FIFO.step' 2>/dev/null)\" = $TX_STEP ]" "$PRECONDITION_TIMEOUT" || {
    echo "  the held transaction did not run: $1 ($(tail -n 3 "$TX_FIFO.log" 2>/dev/null))" >&2
    return 1
  }
}

# tx_close [COMMIT|ROLLBACK]: ends the transaction and the session; returns psql's status.
tx_close() {
  tx_send "${1:-COMMIT};"
  exec 7>&-
  wait "$TX_PID"
}

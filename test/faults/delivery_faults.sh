#!/usr/bin/env bash
# Never lose a job, never send one twice — proven by breaking things on purpose.
#
# Redis runs with appendonly yes + appendfsync always (so a Redis crash loses nothing it
# acknowledged); one list queue. Jobs 1..JOBS are staged up front in a few big transactions, and
# while the worker drains them a client (tools/stage_client.rb) keeps staging one job per
# transaction, logging every number whose COMMIT returned (committed), whose COMMIT failed or lost
# its connection (unknown) and whose transaction never committed (aborted). Meanwhile, ROUNDS
# times each, interleaved:
#   worker-kill9    kill -9 of the drain worker (the postmaster then restarts every backend)
#   backend-kill9   kill -9 of a backend holding an open transaction that staged 100 jobs
#   pg-immediate    pg_ctl stop -m immediate, then start
#   redis-kill9     kill -9 of redis-server, then a restart on the same port (AOF replay)
#   redis-stop      kill -STOP of redis-server for longer than jobbuf.redis_timeout, then -CONT
# Just before each fault a burst of BURST jobs is committed in one transaction, so that every fault
# hits a worker busy with full batches (the up-front jobs alone drain within seconds); the fault
# comes once the worker is seen inside a batch (how many did is printed).
# Then it waits until jobbuf.jobs is empty and the list stops growing, and compares job by job:
# lost (committed, not in Redis), duplicated (in Redis twice), phantom (in Redis, never
# committed). All three must be 0. It also checks that the faults did not flood the server log
# with jobbuf WARNINGs.
#
# Environment: JB_FAULTS_JOBS (up-front jobs, default 100000), JB_FAULTS_ROUNDS (rounds of each
# fault, default 3), JB_FAULTS_PAUSE (seconds between faults, default 2), JB_FAULTS_STOP_SECONDS
# (how long redis is stopped in the first round, default 1.5, 0.35 s more each round;
# jobbuf.redis_timeout is 500ms), JB_FAULTS_BURST (jobs committed just before each fault, default
# 5000), JB_FAULTS_ONLY (a space-separated subset of the faults above, for debugging).
source "$(dirname "$0")/tools/lib.sh"

JOBS=${JB_FAULTS_JOBS:-100000}
ROUNDS=${JB_FAULTS_ROUNDS:-3}
PAUSE=${JB_FAULTS_PAUSE:-2}
STOP_SECONDS=${JB_FAULTS_STOP_SECONDS:-1.5}
CLIENT_FIRST_N=10000000     # the client's job numbers start above this
KILLED_TX_FIRST_N=20000000  # jobs of the transactions whose backend is killed
BURST_FIRST_N=30000000      # jobs of the bursts staged before each fault
BURST=${JB_FAULTS_BURST:-5000}
ONLY=${JB_FAULTS_ONLY:-worker-kill9 backend-kill9 pg-immediate redis-kill9 redis-stop}
QUEUE=faults
KEY=jobbuf:$QUEUE
TOOLS=$(cd "$(dirname "$0")/tools" && pwd)
run_start=$(now_ms)

faults_start "--appendonly yes --appendfsync always" \
  "jobbuf.redis_timeout = '500ms'
jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('$QUEUE', 'list')" >/dev/null
LOGS=$JB_RUN/delivery
mkdir -p "$LOGS"
: >"$LOGS/never_committed.log"

# --- up-front jobs: 1..JOBS in 4 transactions
chunk=$(( (JOBS + 3) / 4 ))
t0=$(now_ms)
for first in $(seq 1 "$chunk" "$JOBS"); do
  last=$(( first + chunk - 1 )); [ "$last" -gt "$JOBS" ] && last=$JOBS
  if ! jb_sql "SELECT count(jobbuf_stage('$QUEUE', jsonb_build_object('n', g))) FROM generate_series($first, $last) g" >/dev/null; then
    fail "staging up-front jobs $first..$last"
    faults_done
  fi
done
say "staged $JOBS jobs up front in 4 transactions ($(( $(now_ms) - t0 )) ms); $(jb_redis LLEN "$KEY") already in Redis"

# --- the staging client
ruby "$TOOLS/stage_client.rb" 127.0.0.1 "$JB_PGPORT" "$JB_DB" "$QUEUE" "$CLIENT_FIRST_N" "$LOGS" \
  2>"$LOGS/client.err" &
client_pid=$!
track_pid "$client_pid"
on_exit "touch '$LOGS/stop'"

# --- faults
declare -A injected=()
faults_total=0
killed_tx=0

note_fault() {
  injected[$1]=$(( ${injected[$1]:-0} + 1 ))
  faults_total=$(( faults_total + 1 ))
  say "fault $faults_total: $1 ($2)"
}

fault_worker_kill9() {
  local pid
  pid=$(worker_pid)
  if [ -z "$pid" ]; then fail "worker-kill9: no drain worker to kill"; return; fi
  kill -9 "$pid"
  note_fault worker-kill9 "drain worker pid $pid"
}

fault_backend_kill9() {
  local first=$(( KILLED_TX_FIRST_N + killed_tx * 1000 + 1 )) pidfile="$LOGS/killed_tx_$killed_tx.pid" pid psql_pid
  killed_tx=$(( killed_tx + 1 ))
  seq "$first" $(( first + 99 )) >>"$LOGS/never_committed.log"
  jb_psql -qtAX >/dev/null 2>"$LOGS/killed_tx.err" <<SQL &
BEGIN;
SELECT count(jobbuf_stage('$QUEUE', jsonb_build_object('n', g))) FROM generate_series($first, $(( first + 99 ))) g;
SELECT pg_backend_pid() \g $pidfile
SELECT pg_sleep(60);
COMMIT;
SQL
  psql_pid=$!
  track_pid "$psql_pid"
  if ! jb_wait_until "[ -s '$pidfile' ]" 15; then
    fail "backend-kill9: the session did not report its backend pid"
    kill "$psql_pid" 2>/dev/null
    return
  fi
  pid=$(tr -dc 0-9 <"$pidfile")
  sleep 0.2
  kill -9 "$pid"
  wait "$psql_pid" 2>/dev/null
  note_fault backend-kill9 "backend pid $pid, in a transaction that staged 100 jobs"
}

fault_pg_immediate() {
  jb_pg_ctl stop -m immediate
  sleep 0.3
  if ! jb_pg_ctl start; then fail "pg-immediate: the server did not start again"; return; fi
  note_fault pg-immediate "pg_ctl stop -m immediate, then start"
}

fault_redis_kill9() {
  local old=$JB_REDIS_PID
  kill -9 "$old"
  wait "$old" 2>/dev/null
  sleep 0.3
  if ! jb_restart_redis; then fail "redis-kill9: redis-server did not start again"; return; fi
  note_fault redis-kill9 "pid $old; restarted as $JB_REDIS_PID on port $JB_REDIS_PORT, AOF replayed"
}

fault_redis_stop() {
  local seconds
  seconds=$(awk -v s="$STOP_SECONDS" -v r="$round" 'BEGIN { printf "%.2f", s + 0.35 * (r - 1) }')
  kill -STOP "$JB_REDIS_PID"
  sleep "$seconds"
  # Resume while the worker waits on a reconnect if it is (up to 1 s more): the hardest moment,
  # with whatever it sent before giving up still unread in the stopped Redis's socket buffers.
  local how="at once"
  if jb_wait_until '[ "$(ss -Htn state established "( dport = :$JB_REDIS_PORT )" 2>/dev/null | wc -l)" -ge 1 ]' 1; then
    how="while the worker waited on a reconnect"
  fi
  kill -CONT "$JB_REDIS_PID"
  note_fault redis-stop "SIGSTOP for ${seconds}s, then SIGCONT $how"
}

# stage_burst: BURST jobs in one transaction; its outcome is logged like the client's.
bursts=0
stage_burst() {
  [ "$BURST" -gt 0 ] || return 0
  local first=$(( BURST_FIRST_N + bursts * 100000 + 1 ))
  local last=$(( first + BURST - 1 ))
  bursts=$(( bursts + 1 ))
  if jb_sql "SELECT count(jobbuf_stage('$QUEUE', jsonb_build_object('n', g))) FROM generate_series($first, $last) g" \
      >/dev/null 2>>"$LOGS/burst.err"; then
    seq "$first" "$last" >>"$LOGS/committed_bursts.log"
  else
    seq "$first" "$last" >>"$LOGS/unknown_bursts.log"  # a failed autocommit statement: outcome unknown
  fi
}

faults_start_ms=$(now_ms)
busy_faults=0
for round in $(seq 1 "$ROUNDS"); do
  for f in $ONLY; do
    # Each fault hits a running system: the worker is up (after a crash restart it takes a moment)
    # and busy with a burst of full batches.
    wait_worker_running 30 || say "(the worker is not running before $f)"
    stage_burst
    if in_batch; then busy_faults=$(( busy_faults + 1 )); fi
    "fault_${f//-/_}"
    sleep "$PAUSE"
  done
  say "round $round done: $(jb_sql "SELECT count(*) FROM jobbuf.jobs" 2>/dev/null || echo '?') jobs staged, $(jb_redis LLEN "$KEY") in Redis, client at $(wc -l <"$LOGS/committed.log") commits"
done
faults_ms=$(( $(now_ms) - faults_start_ms ))

touch "$LOGS/stop"
wait "$client_pid"
say "client: $(tail -n 1 "$LOGS/client.err")"

# --- settle: jobbuf.jobs empty, list length stable
if jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs" 2>/dev/null)" = 0 ]' 120; then
  pass "jobbuf.jobs drained after the faults"
else
  fail "jobbuf.jobs still holds $(jb_sql "SELECT count(*) FROM jobbuf.jobs") jobs 120 s after the last fault"
fi
prev=-1; stable=0
for _ in $(seq 1 30); do
  len=$(jb_redis LLEN "$KEY")
  if [ "$len" = "$prev" ]; then stable=$(( stable + 1 )); else stable=0; fi
  [ "$stable" -ge 3 ] && break
  prev=$len
  sleep 1
done
say "Redis list length $len (stable for ${stable} s)"

# --- job by job
jb_redis LRANGE "$KEY" 0 -1 >"$LOGS/list.dump"
figures=$(ruby "$TOOLS/compare_delivery.rb" "$LOGS/list.dump" "$JOBS" "$LOGS")
compare_rc=$?
sed 's/^/    /' <<<"$figures"
for what in lost duplicated phantom; do
  expect_eq "$what" "$(awk -v w="$what" '$1 == w { print $2 }' <<<"$figures")" 0
done
expect_eq "every element parses as a job payload" "$(awk '$1 == "unparsable_elements" { print $2 }' <<<"$figures")" 0
[ "$compare_rc" -eq 0 ] || fail "the comparison failed (see the figures above)"
expect_eq "nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0

fault_list=""
for f in worker-kill9 backend-kill9 pg-immediate redis-kill9 redis-stop; do
  fault_list+="$f ${injected[$f]:-0}, "
done
say "faults injected: $faults_total (${fault_list%, }) over $(( faults_ms / 1000 )) s, $busy_faults of them with the worker seen inside a batch"
expect_eq "every fault injected $ROUNDS times" "$faults_total" $(( ROUNDS * $(wc -w <<<"$ONLY") ))

# --- the server log: no flood of jobbuf WARNINGs. Each fault may legitimately start one episode
# of a problem (one WARNING when it starts); a flood repeats a message many times per fault.
log=$(cat "$JB_RUN/postgres.log")
warnings=$(grep -E 'WARNING: +jobbuf:' <<<"$log" | sed -E 's/.*WARNING: +//')
total_warnings=$(grep -c . <<<"$warnings" || true)
say "jobbuf WARNING lines: $total_warnings; per distinct message:"
sort <<<"$warnings" | uniq -c | sort -rn | head -n 15 | sed 's/^/      /'
worst=$(sort <<<"$warnings" | uniq -c | sort -rn | awk 'NR == 1 { print $1 + 0 }')
expect_le "most repeated jobbuf WARNING (at most one per fault)" "${worst:-0}" "$faults_total"
expect_le "jobbuf WARNING lines in total (at most two per fault)" "$total_warnings" $(( 2 * faults_total ))
expect_eq "no PANIC in the server log" "$(count_lines 'PANIC' "$log")" 0
say "drain worker exits logged: $(count_lines 'jobbuf drain worker.*(exited|terminated)' "$log") (the kill -9s and crash restarts)"
say "reconciliations logged: $(count_lines 'already in Redis when the last batch was interrupted' "$log")"

say "duration $(( ($(now_ms) - run_start) / 1000 )) s"
faults_done

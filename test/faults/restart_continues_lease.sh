#!/usr/bin/env bash
# A later start of the same cluster continues its earlier start (docs/copies.md): the delivery
# lease names the postmaster's start, so a restarted cluster finds its own earlier start holding
# it; once that lease has lapsed (2 x jobbuf.redis_timeout of Redis being reachable) the new start
# takes it, because its WAL-logged delivery counter proves it continues the holder.
#   1. pg_ctl restart (fast): delivery resumes within the lease's lifetime (plus slack);
#   2. a batch cut off between its push and its commit (the worker waits on a row lock of
#      jobbuf.queue_stats after the EXEC), then an immediate shutdown: the new start's counter is
#      one behind Redis's and the marker names jobs staged here as they were pushed, so it takes
#      the lease and reconciles them: every job in Redis once (none pushed twice, none lost).
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"
jb_sql "SELECT jobbuf_create_queue('again', 'list')" >/dev/null
KEY=jobbuf:again
jb_sql "SELECT jobbuf_stage('again', jsonb_build_object('n', g)) FROM generate_series(1, 10) g" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 10 ]' 10 || fail "the first 10 are delivered"
wait_staged 0 || fail "the worker did not commit the first 10"
lease=jobbuf:lease:$(jb_sql "SELECT jobbuf.installation_id()")
first=$(jb_redis GET "$lease")
say "lease: $first"
expect_match "the lease names the postmaster's start" "$first" " start [0-9-]+ [0-9:.]+ UTC#[0-9]+(;[0-9]+)?$"
expect_eq "the delivery counter is committed with the batches" \
  "$(jb_sql "SELECT delivered_unit > 0 FROM jobbuf.delivery_counter")" t

# --- 1. a restart
mark=$(log_mark)
t0=$(now_ms)
jb_pg_ctl restart -m fast
jb_sql "SELECT jobbuf_stage('again', jsonb_build_object('n', g)) FROM generate_series(11, 20) g" >/dev/null
check "the restarted cluster delivers again" jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 20 ]' 20
elapsed=$(( $(now_ms) - t0 ))
say "delivering again $elapsed ms after the restart began"
expect_le "within the lease's lifetime (2 s) and the restart, plus slack (ms)" "$elapsed" 10000
expect_eq "the new start took over its earlier start's lease, continuing it" \
  "$(log_since "$mark" | grep -c 'this start continues it' || true)" 1
check "the lease names the new start" [ "$(jb_redis GET "$lease" | sed 's/#.*//')" != "${first%#*}" ]
expect_eq "no WARNING about another cluster" "$(log_since "$mark" | grep -c 'another PostgreSQL cluster' || true)" 0

# --- 2. a batch cut off between its push and its commit, then an immediate shutdown
wait_staged 0 || fail "the worker did not commit jobs 11..20"
tx_open
tx_run "BEGIN; SELECT 1 FROM jobbuf.queue_stats WHERE queue = 'again' FOR UPDATE;" || fail "the row lock"
jb_sql "SELECT jobbuf_stage('again', jsonb_build_object('n', g)) FROM generate_series(21, 60) g" >/dev/null
check "the batch reaches Redis" jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 60 ]' 10
check "... and waits on the row lock before it commits" \
  jb_wait_until '[ "$(worker_activity | cut -d"|" -f3)" = "Lock" ]' 10
expect_eq "its jobs are still staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 40
jb_pg_ctl stop -m immediate
tx_close ROLLBACK 2>/dev/null || true
mark=$(log_mark)
t0=$(now_ms)
jb_pg_ctl start
check "the new start reconciles the cut-off batch (its jobs are not pushed again)" \
  jb_wait_until "[ \"\$(log_since $mark | grep -c 'already in Redis when the last batch was interrupted')\" = 1 ]" 20
say "reconciled $(( $(now_ms) - t0 )) ms after the start began"
expect_eq "the new start continued the earlier one (one behind, the marker's jobs staged as pushed)" \
  "$(log_since "$mark" | grep -c 'this start continues it: .*cut off before it committed' || true)" 1
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 10 || fail "the jobs table empties"
jb_sql "SELECT jobbuf_stage('again', jsonb_build_object('n', g)) FROM generate_series(61, 70) g" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 70 ]' 10 || fail "jobs 61..70 are delivered"
expect_eq "every job in Redis once (70 pushes, 70 distinct)" \
  "$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'ns = STDIN.read.lines.map { |l| JSON.parse(l)["n"] }; puts "#{ns.size} #{ns.uniq.size}"')" "70 70"
expect_eq "the counter was raised to the reconciled batch's number and goes on" \
  "$(jb_sql "SELECT delivered_unit >= 3 FROM jobbuf.delivery_counter")" t
faults_done

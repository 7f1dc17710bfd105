#!/usr/bin/env bash
# A delivery number is used up only by a unit that ran (docs/copies.md, "Clones and later
# starts"): units refused as a whole (an OOM reply: EXECABORT) leave no gap between this cluster's
# committed counter and the numbers in Redis's markers. Then a batch cut off between its push and
# its commit (it waits on a row lock of jobbuf.queue_stats after the EXEC) and an immediate
# shutdown: the new start is one behind the marker, with its jobs staged as pushed, so it continues
# its earlier start and reconciles that batch (no job pushed twice, none lost).
# (Before: every refused unit used a number; the new start was several behind and stayed held.)
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'
jobbuf.redis_memory_limit = off"
jb_sql "SELECT jobbuf_create_queue('gap', 'list')" >/dev/null
KEY=jobbuf:gap
marker_key=jobbuf:marker:$(jb_sql "SELECT jobbuf.installation_id()")
jb_sql "SELECT jobbuf_stage('gap', jsonb_build_object('n', g)) FROM generate_series(1, 10) g" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 10 ]' 10 || fail "the first 10 are delivered"
wait_staged 0 || fail "the worker did not commit the first 10"
before=$(jb_sql "SELECT delivered_unit FROM jobbuf.delivery_counter")
expect_le "the marker's number is committed" "$(jb_redis GET "$marker_key" | cut -d';' -f2)" "$before"

tx_open
tx_run "BEGIN; SELECT 1 FROM jobbuf.queue_stats WHERE queue = 'gap' FOR UPDATE;" || fail "the row lock"
jb_redis CONFIG SET maxmemory 1 >/dev/null
jb_sql "SELECT jobbuf_stage('gap', jsonb_build_object('n', g)) FROM generate_series(11, 20) g" >/dev/null
sleep 3   # the worker tries (at its backoff) and each unit is refused whole (OOM)
expect_eq "nothing reached Redis while it refused every write" "$(jb_redis LLEN "$KEY")" 10
jb_redis CONFIG SET maxmemory 0 >/dev/null
check "the batch reaches Redis" jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 20 ]' 20
check "... and waits on the row lock before it commits" \
  jb_wait_until '[ "$(worker_activity | cut -d"|" -f3)" = "Lock" ]' 10
# (the committed counter may have moved meanwhile without batches: the holder advances it once per
# lease lifetime; the cut-off batch's number must be just above it)
expect_eq "the refused units used no number: the marker is one above the committed counter" \
  "$(jb_redis GET "$marker_key" | cut -d';' -f2)" "$(( $(jb_sql "SELECT delivered_unit FROM jobbuf.delivery_counter") + 1 ))"
jb_pg_ctl stop -m immediate
tx_close ROLLBACK 2>/dev/null || true
mark=$(log_mark)
jb_pg_ctl start
check "the new start continues the earlier one" \
  jb_wait_until "[ \"\$(log_since $mark | grep -c 'this start continues it: .*cut off before it committed')\" = 1 ]" 20
jb_sql "SELECT jobbuf_stage('gap', jsonb_build_object('n', g)) FROM generate_series(21, 25) g" >/dev/null
check "it delivers again" jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 25 ]' 20
expect_eq "every job in Redis once (25 pushes, 25 distinct)" \
  "$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'ns = STDIN.read.lines.map { |l| JSON.parse(l)["n"] }; puts "#{ns.size} #{ns.uniq.size}"')" "25 25"
expect_eq "no WARNING about another cluster" "$(log_since "$mark" | grep -c 'another PostgreSQL cluster' || true)" 0
faults_done

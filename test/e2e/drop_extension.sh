#!/usr/bin/env bash
# DROP EXTENSION jobbuf while the worker is draining, then CREATE EXTENSION again: the worker
# neither crashes nor restarts in a loop (it waits for the extension), keeps its process, pushes
# nothing twice, and drains the re-created extension's jobs. DROP EXTENSION says what it discarded:
# one WARNING per queue that still held jobs, with its waiting, scheduled, claimed and held counts.
source "$(dirname "$0")/tools/lib.sh"

# Mid-drain by construction: Redis holds every write (CLIENT PAUSE WRITE) while the worker waits
# for the reply to the first unit of a batch of 50,000 staged jobs; DROP EXTENSION queues behind
# that batch's locks, then Redis takes writes again. The worker is idle on its latch when the
# writes are paused (its Redis reads between batches still pass), and between batches it writes
# only when it connects and to refresh its lease, every redis_timeout / 2 (300 s here): its first
# write after the pause is the batch's unit, whatever the machine's speed. (A SIGSTOP of Redis
# froze the reads too: under load the worker could be caught in one after a batch, outside any.)
e2e_start "jobbuf.batch_size = 20
jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '600s'"
jb_sql "SELECT jobbuf_create_queue('busy', 'list')" >/dev/null
pid_before=$(jb_sql "SELECT pid FROM jobbuf_worker_status()")
jb_sql "SELECT jobbuf_stage('busy', '{\"n\": 0}'::jsonb)" >/dev/null
wait_delivered 1 || fail "the first job was not delivered"   # connected, reconciled, one batch done
delivered_before=$(jb_redis LLEN jobbuf:busy)

worker_idle || fail "the worker did not go back to its latch after the first batch"
# Held until CLIENT UNPAUSE below; 300 s at most, within redis_timeout (the worker never gives up
# on the held unit first).
jb_redis CLIENT PAUSE 300000 WRITE >/dev/null
jb_sql "SELECT count(jobbuf_stage('busy', jsonb_build_object('n', n))) FROM generate_series(1, 50000) n" >/dev/null
in_batch || fail "the worker is not waiting on its batch ($(worker_activity))"
mark=$(log_mark)
t0=$(now_ms)
jb_psql -q -c "DROP EXTENSION jobbuf" >"$JB_RUN/drop.out" 2>&1 &
dropper=$!
wait_lock_waiter "DROP EXTENSION jobbuf" || fail "DROP EXTENSION did not queue behind the worker's batch"
jb_redis CLIENT UNPAUSE >/dev/null
if wait "$dropper"; then
  expect_match "DROP EXTENSION names the queue whose jobs it discarded" "$(cat "$JB_RUN/drop.out")" \
    'WARNING:  jobbuf: DROP EXTENSION discarded the jobs of queue busy: [0-9]+ job\(s\) \([0-9]+ waiting, 0 scheduled, 0 claimed, 0 held\)'
  pass "DROP EXTENSION while draining succeeds ($(( $(now_ms) - t0 )) ms, $(jb_redis LLEN jobbuf:busy) of 50000 jobs in Redis)"
else
  # The worker's batch (DELETE FROM jobbuf.jobs, then UPDATE jobbuf.queue_stats) and DROP
  # EXTENSION (queue_stats, then jobs) take their locks in opposite orders.
  fail "DROP EXTENSION while draining: $(tr '\n' '|' <"$JB_RUN/drop.out")"
  for _ in 1 2 3 4 5; do   # more tries, to check the rest
    jb_psql -q -c "DROP EXTENSION jobbuf" >/dev/null 2>&1 && break
  done
  [ -z "$(jb_sql "SELECT 1 FROM pg_extension WHERE extname = 'jobbuf'")" ] || e2e_done
fi
at_drop=$(jb_redis LLEN jobbuf:busy)
expect_le "dropped mid-drain: only the batch in flight reached Redis" "$(( at_drop - delivered_before ))" 20
worker_idle || fail "the worker did not go back to waiting after the drop"
sleep 1   # a window for a push that should not come
expect_eq "nothing pushed after the drop" "$(jb_redis LLEN jobbuf:busy)" "$at_drop"
expect_eq "drain worker still running, same process" \
  "$(jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")" "$pid_before"

jb_psql -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('busy', 'list');
SELECT jobbuf_stage('busy', jsonb_build_object('n', 100000 + n)) FROM generate_series(1, 100) n;
SQL
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:busy)" -ge $(( at_drop + 100 )) ]' 10; then
  pass "after CREATE EXTENSION the worker drains again"
else
  fail "after CREATE EXTENSION: $(( $(jb_redis LLEN jobbuf:busy) - at_drop )) of 100 new jobs in Redis after 10 s"
fi
sleep 0.3
expect_eq "new jobs delivered once each" "$(jb_redis LLEN jobbuf:busy)" "$(( at_drop + 100 ))"
expect_eq "no job pushed twice" "$(jb_redis LRANGE jobbuf:busy 0 -1 | sort | uniq -d | wc -l)" 0
expect_eq "jobbuf_worker_status: running, same pid" \
  "$(jb_sql "SELECT running || ' ' || pid FROM jobbuf_worker_status()")" "true $pid_before"
log=$(log_since "$mark")
expect_eq "no worker crash or exit" "$(count_lines 'terminated by signal|exited with exit code|PANIC|server process' "$log")" 0
expect_eq "no deadlock between the worker's batch and DROP EXTENSION" "$(count_lines 'deadlock detected' "$log")" 0
expect_eq "no worker restart" "$(count_lines 'drain worker started|starting the drain worker' "$log")" 0
waiting=$(count_lines 'WARNING: +jobbuf:.*not installed' "$log")
expect_le "'extension not installed' WARNINGs (no log spam)" "$waiting" 1
# The worker never waits on jobbuf.queues behind the drop (it would fail once the table is gone).
expect_eq "no database error from the worker (a table dropped under it)" \
  "$(count_lines 'does not exist|last database error is resolved' "$log")" 0
# What a drop discards, state by state; a queue without jobs is not named, and a DROP EXTENSION
# that is refused says nothing.
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('kept', 'none');
SELECT jobbuf_create_queue('empty', 'none');
SELECT jobbuf_stage('kept', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SELECT jobbuf_stage('kept', '{"later": true}', now() + interval '1 hour');
SELECT count(*) FROM jobbuf_claim('kept', 1);
CREATE ROLE not_owner LOGIN;
SQL
out=$(jb_psql -q -c "SET ROLE not_owner" -c "DROP EXTENSION jobbuf" 2>&1)
expect_match "a DROP EXTENSION by another role is refused" "$out" "must be owner"
expect_eq "... and reports no discarded jobs" "$(grep -c 'discarded' <<<"$out")" 0
out=$(jb_psql -q -c "DROP EXTENSION jobbuf" 2>&1)
expect_eq "DROP EXTENSION: one WARNING per queue that held jobs, with its counts" \
  "$(grep -o 'discarded the jobs of .*' <<<"$out" | tr '\n' '|')" \
  "discarded the jobs of queue kept: 4 job(s) (2 waiting, 1 scheduled, 1 claimed, 0 held)|"
jb_psql -q -c "CREATE EXTENSION jobbuf"

say "jobbuf lines logged meanwhile:"
grep -E 'jobbuf:' <<<"$log" | sed 's/^[^]]*] /    /' | head -n 8

e2e_done

#!/usr/bin/env bash
# A commit wakes the worker for the queues it staged into, not for every queue: with 200 active
# queues, single-job commits into one of them cost the worker one batch each, not 200, nor one per
# queue sharing its wake bit (64 bits: about 3 others here; the commit names its queues exactly).
# Counted with the scans of jobs_waiting (every batch statement scans it once). A pass over every
# queue (a full pass, every poll_interval; a changed queue list) takes batches only from the
# queues that hold jobs, not from all 200. A job that commits behind the
# worker's cursor (a lower id than jobs already delivered) is delivered at once, not at the next
# full pass. Queues nobody staged into are still looked at on the poll_interval's full passes.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'"
jb_psql -q -o /dev/null -c "SELECT jobbuf_create_queue('q' || n, 'list') FROM generate_series(1, 200) n"

# Worker statistics reach pg_stat_user_indexes when the worker reports them, at most once a second,
# after a transaction: deliver one job more than a second after the last one's commit to flush.
delivered0=$(worker_status_value delivered)
deliver_one() {  # deliver_one N: stage job N into q7, wait until Redis has N jobs (and the commit)
  jb_sql "SELECT jobbuf_stage('q7', jsonb_build_object('n', $1))" >/dev/null
  jb_wait_until "[ \"\$(jb_redis LLEN jobbuf:q7)\" = $1 ]" 15 || fail "job $1 of q7 was not delivered"
}
committed() {  # committed N: wait until the worker committed (and reported) its batch of job N
  wait_delivered $(( delivered0 + $1 )) || fail "the worker did not count job $1 of q7 as delivered"
}
waiting_scans() {
  jb_sql "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = 'jobbuf' AND indexrelname = 'jobs_waiting'"
}
deliver_one 1
committed 1
sleep 1.2
deliver_one 2
committed 2
before=$(waiting_scans)

for n in $(seq 3 12); do
  deliver_one "$n"
  sleep 0.05
done
committed 12
sleep 1.2
deliver_one 13
committed 13
after=$(waiting_scans)

scans=$((after - before))
expect_le "11 single-job commits into 1 of 200 queues: jobs_waiting scans (one batch each)" "$scans" 22
expect_eq "the other queues got nothing" "$(jb_redis KEYS 'jobbuf:q*' | sort | tr '\n' ' ')" "jobbuf:q7 "

# A pass that looks at every queue (after a change of jobbuf.queues, as every poll_interval) takes
# a batch only from the queues that hold jobs, found by one skip scan: five changes of an empty
# queue's options, five such passes, no batch for the 200 empty queues (before: 200 batches, 200
# scans, a pass).
before=$(waiting_scans)
for n in 1 2 3 4 5; do
  jb_sql "SELECT jobbuf_alter_queue('q200', jsonb_build_object('batch_size', $n))" >/dev/null
  sleep 0.2
done
deliver_one 14   # a transaction of the worker's flushes its statistics
committed 14
sleep 1.2
deliver_one 15
committed 15
scans=$(( $(waiting_scans) - before ))
expect_le "5 passes over every queue (200, empty but q7) and 2 single-job commits: jobs_waiting scans" "$scans" 40

# Out of id order: a transaction stages a job (lower id) and commits after later jobs of the same
# queue were delivered; with a 30 s poll only the commit's own wake-up can deliver it.
tx_open
tx_run "BEGIN; SELECT jobbuf_stage('q7', '{\"late\": true}'::jsonb);" || fail "the late job was not staged"
deliver_one 16
deliver_one 17
committed 17
tx_close || fail "the late job's transaction did not commit"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:q7)" = 18 ]' 15; then
  pass "a job committed behind the delivered ones arrives at once (poll_interval 30 s)"
else
  fail "a job committed out of id order was not delivered within 15 s (the poll is 30 s)"
fi
expect_eq "it is the late job" "$(jb_redis LINDEX jobbuf:q7 -1)" '{"late": true}'

# A commit that finds jobbuf's tables locked by someone else's DDL is delivered as soon as the lock
# goes, not at the next poll (30 s).
tx_open
tx_run "BEGIN; LOCK TABLE jobbuf.queue_stats IN ACCESS EXCLUSIVE MODE;" || fail "the lock was not taken"
jb_sql "SELECT jobbuf_stage('q7', '{\"after_lock\": true}'::jsonb)" >/dev/null
sleep 0.5   # a window for a delivery that should not happen
expect_eq "while the tables are locked the job waits" "$(jb_redis LLEN jobbuf:q7)" 18
tx_close || fail "the locking transaction did not commit"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:q7)" = 19 ]' 15; then
  pass "delivered once the lock is released (poll_interval 30 s)"
else
  fail "a job that met locked tables was not delivered within 15 s of the unlock (the poll is 30 s)"
fi

# A queue nobody staged into since the last round is still drained by the next full pass:
# a job inserted with triggers bypassed (as a restore or a replica-role session would) arrives
# within the poll interval.
jb_psql -q -o /dev/null <<'SQL'
ALTER SYSTEM SET jobbuf.poll_interval = '1s';
SELECT pg_reload_conf();
SET session_replication_role = replica;
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('q3', '{"silent": true}');
SQL
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:q3)" = 1 ]' 35; then
  pass "a job committed without a wake-up is delivered by a full pass"
else
  fail "a job committed without a wake-up was not delivered"
fi
checks_done

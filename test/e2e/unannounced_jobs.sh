#!/usr/bin/env bash
# Jobs below the worker's cursor that no commit announces are still delivered: a scheduled job
# that comes due after many later jobs went (a full pass restarts the cursor at the queue's
# floor, the lowest id a batch left waiting), and a job of a two-phase transaction whose COMMIT
# PREPARED ran after later jobs went (COMMIT PREPARED wakes nobody: a head pass, from id 0,
# finds it).
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '500ms'
max_prepared_transactions = 4"
jb_sql "SELECT jobbuf_create_queue('u', 'list')" >/dev/null

# The prepared job first (lowest id), then the scheduled job (due in an hour, made due by an
# UPDATE, which wakes nobody, once the later jobs went), then 200 jobs in 20 commits that push the
# cursor past both. Once the scheduled job went, the cursor is past the prepared job.
jb_psql -q -o /dev/null -c "BEGIN" -c "SELECT jobbuf_stage('u', '{\"n\": \"prepared\"}'::jsonb)" \
  -c "PREPARE TRANSACTION 'jobbuf_e2e'"
jb_sql "SELECT jobbuf_stage('u', '{\"n\": \"scheduled\"}'::jsonb, run_at => clock_timestamp() + interval '1 hour')" >/dev/null
for i in $(seq 1 20); do
  jb_sql "SELECT count(jobbuf_stage('u', jsonb_build_object('n', $i * 10 + g))) FROM generate_series(0, 9) g" >/dev/null
done
jb_wait_until '[ "$(jb_redis LLEN jobbuf:u)" = 200 ]' 15
expect_eq "the 200 later jobs are delivered" "$(jb_redis LLEN jobbuf:u)" 200
wait_staged 1 || fail "the worker did not commit the 200 later jobs"
expect_eq "the scheduled job waits, below the cursor" \
  "$(jb_sql "SELECT payload->>'n' FROM jobbuf.jobs WHERE queue = 'u'")" scheduled

jb_sql "UPDATE jobbuf.jobs SET run_at = now() WHERE payload->>'n' = 'scheduled'" >/dev/null
expect_list_reaches jobbuf:u 201 15 "the scheduled job is delivered once due (no commit announced it)"
expect_eq "it is the scheduled job" "$(jb_redis LINDEX jobbuf:u -1)" '{"n": "scheduled"}'

jb_sql "COMMIT PREPARED 'jobbuf_e2e'" >/dev/null
expect_list_reaches jobbuf:u 202 15 "the job of the two-phase transaction is delivered after COMMIT PREPARED"
expect_eq "it is the prepared job" "$(jb_redis LINDEX jobbuf:u -1)" '{"n": "prepared"}'
expect_all_delivered_once jobbuf:u 202

e2e_done

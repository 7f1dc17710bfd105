#!/usr/bin/env bash
# The worker's census walks jobbuf.jobs in bounded steps between its delivery rounds
# (src/census/queue_census.cpp): a backlog larger than one step (5000 jobs) is counted over
# several steps, the published counts are those of the whole table, and a live queue delivers
# while such a census is under way. The worker says how many steps each census took at DEBUG1.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'
log_min_messages = debug1"
jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_create_queue('held', 'list');
SELECT jobbuf_pause('held');
COMMIT;
SELECT jobbuf_create_queue('live', 'list');
INSERT INTO jobbuf.jobs (queue, payload) SELECT 'held', jsonb_build_object('n', n) FROM generate_series(1, 12000) n;
SQL

wait_census || fail "no census of the worker"
expect_eq "the census counts every job of a walk of several steps" \
  "$(jb_sql "SELECT ready FROM jobbuf_stats() WHERE queue = 'held'")" 12000

# Steps of the censuses logged so far: every census of the 12,000 jobs took three steps or more.
census_lines() { grep -o 'census of 1[0-9]\{4\} jobs in [0-9]* steps' "$JB_RUN/postgres.log"; }
jb_wait_until '[ -n "$(census_lines)" ]' 15 || fail "no census of 12000 jobs logged"
expect_eq "each census of 12000 jobs took at least 3 steps (5000 jobs each)" \
  "$(census_lines | awk '$6 < 3' | head -n 1)" ""
say "$(census_lines | tail -n 1)"

# A live queue delivers while the walks go on (one census after another every ~0.2-1 s).
for n in 1 2 3 4 5; do
  jb_sql "SELECT jobbuf_stage('live', jsonb_build_object('n', $n))" >/dev/null
  sleep 0.1
done
expect_list_reaches jobbuf:live 5 15 "the live queue is delivered while the census walks"
expect_eq "the paused queue stays in PostgreSQL" "$(jb_redis EXISTS jobbuf:held)" 0

e2e_done

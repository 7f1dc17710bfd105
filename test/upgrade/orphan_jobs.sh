#!/usr/bin/env bash
# ALTER EXTENSION jobbuf UPDATE on a 1.0 database that holds jobs of a queue that no longer exists
# (1.0 let a stager put jobs into a queue being dropped): the update succeeds, those jobs are kept
# as dead letters with the reason (and can be purged or retried), every other job is untouched,
# and jobbuf.jobs references jobbuf.queues from then on.
source "$(dirname "$0")/../e2e/tools/lib.sh"

e2e_start
db=updated_with_orphans
jb_psql_db postgres -q -c "CREATE DATABASE $db"
jb_psql_db "$db" -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf VERSION '1.0';
SELECT jobbuf_create_queue('kept', 'none');
SELECT jobbuf_create_queue('gone', 'none');
SELECT jobbuf_stage('kept', jsonb_build_object('n', g)) FROM generate_series(1, 3) g;
SELECT jobbuf_stage('gone', jsonb_build_object('n', g), partition_key => 'p') FROM generate_series(4, 5) g;
SELECT count(*) FROM jobbuf_claim('kept', 1);
-- what the 1.0 drop race left behind: the queue row gone, its jobs still staged
DELETE FROM jobbuf.queues WHERE name = 'gone';
-- times 1.0 accepted and 1.1 refuses ('infinity'; inserted with triggers off, as 1.1's library
-- runs this 1.0 SQL here)
SELECT jobbuf_create_queue('endless', 'none');
SET session_replication_role = replica;
INSERT INTO jobbuf.jobs (queue, payload, run_at) VALUES ('endless', '{"at": "never"}', 'infinity');
INSERT INTO jobbuf.jobs (queue, payload, run_at, staged_at) VALUES ('endless', '{"at": "always"}', '-infinity', '-infinity');
RESET session_replication_role;
SQL
# (the columns 1.0 has: later versions add some)
kept_jobs="SELECT string_agg((j.id, j.queue, j.payload, j.run_at, j.unique_key, j.partition_key, j.staged_at, j.attempts,
                              j.last_error, j.group_id, j.lease_until)::text, E'\n' ORDER BY j.id)
           FROM jobbuf.jobs j WHERE queue = 'kept'"
before=$(jb_psql_db "$db" -qtAX -c "$kept_jobs")
out=$(jb_psql_db "$db" -qtAX -c "ALTER EXTENSION jobbuf UPDATE" 2>&1)
check "ALTER EXTENSION jobbuf UPDATE succeeds over jobs of a dropped queue ${out:0:300}" [ -z "$out" ]
expect_eq "the jobs of the remaining queue are untouched" \
  "$(jb_psql_db "$db" -qtAX -c "$kept_jobs")" "$before"
expect_eq "the dropped queue's jobs are dead letters, with their payload, partition and the reason" \
  "$(jb_psql_db "$db" -qtAX -c "SELECT string_agg(d.id || ' ' || d.payload::text || ' ' || d.partition_key || ' ' || d.last_error, '; ' ORDER BY d.id) FROM jobbuf.dead d")" \
  "4 {\"n\": 4} p jobbuf 1.1 update: queue 'gone' no longer exists; 5 {\"n\": 5} p jobbuf 1.1 update: queue 'gone' no longer exists"
expect_eq "jobbuf.jobs references jobbuf.queues" \
  "$(jb_psql_db "$db" -qtAX -c "SELECT count(*) FROM pg_constraint WHERE conname = 'jobs_queue_fkey' AND conrelid = 'jobbuf.jobs'::regclass")" 1
expect_eq "jobs with an infinite time get the nearest time the worker carries" \
  "$(jb_psql_db "$db" -qtAX -c "SET TIME ZONE 'UTC'; SELECT string_agg(payload->>'at' || ' ' || run_at || ' ' || isfinite(staged_at), '; ' ORDER BY id) FROM jobbuf.jobs WHERE queue = 'endless'")" \
  "never 9999-12-31 23:59:59+00 true; always 1970-01-01 00:00:00+00 true"
expect_eq "jobbuf_purge_dead removes them" "$(jb_psql_db "$db" -qtAX -c "SELECT jobbuf_purge_dead('gone')")" 2
e2e_done

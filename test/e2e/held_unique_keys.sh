#!/usr/bin/env bash
# A held job's unique_key never blocks a copy's own job (docs/copies.md, "Unique keys in a copy";
# issue 34, finding #6). `app` stages jobs keyed account-42 and account-7 (due in an hour), is
# dumped and restored as `staging`, a staging refresh. In staging:
# - jobbuf_stage('sync', ..., unique_key => 'account-42') returns an id (before: NULL, the held
#   job took the key) and the held job with that key is discarded; a second stage of the key
#   still returns NULL (the own job holds it);
# - the 1.2 form INSERT ... ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND
#   group_id IS NULL DO NOTHING, run by a role that may not delete jobs, inserts the own account-7 job (before: nothing);
# - jobbuf_discard_restored() deletes the other held jobs and leaves the own ones, which are then
#   delivered;
# - a data-only pg_restore of app's jobs (keys account-42, account-7, account-5) into staging,
#   whose own jobs hold account-5 as well: pg_restore succeeds (before: duplicate key value on
#   jobs_unique_waiting), the held rows whose key an own job holds are skipped, the others held;
#   so is such a row inserted with session_replication_role = replica, as an apply worker does;
# - a claimed own job that jobbuf_fail releases while a held job with its key waits: the own job
#   waits again, the held one is discarded;
# - the worker's census counts every discarded held job in its LOG line and empties
#   jobbuf.held_discards.
# HELD_BREAK=trigger drops the held-key trigger in staging, to see this test fail.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'
jobbuf.database = '$JB_DB, app, staging'"
sql() { jb_psql_db "$1" -qtAX -c "$2"; }
in_postgres() { jb_psql_db postgres -qtAX -c "$1"; }
pg_restore_to() { "$JB_PGBIN/pg_restore" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$@" 2>&1; }
dump() { "$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -Fc "$@"; }
log_discarded() {  # the held jobs staging's census logged as discarded, summed over its LOG lines
  grep -o 'database "staging" discarded [0-9]* held job' "$JB_RUN/postgres.log" | awk '{ s += $4 } END { print s + 0 }'
}

in_postgres "CREATE DATABASE app" >/dev/null
jb_psql_db app -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('sync', 'list');
SELECT jobbuf_stage('sync', '{"from": "app", "account": 42}', now() + interval '1 hour', unique_key => 'account-42');
SELECT jobbuf_stage('sync', '{"from": "app", "account": 7}', now() + interval '1 hour', unique_key => 'account-7');
SELECT jobbuf_stage('sync', '{"from": "app", "unkeyed": true}', now() + interval '1 hour');
SQL
dump -f "$JB_RUN/app.dump" app
in_postgres "CREATE DATABASE staging" >/dev/null
out=$(pg_restore_to staging "$JB_RUN/app.dump")
check "restored as staging ${out:0:200}" [ -z "$out" ]
if [ "${HELD_BREAK:-}" = trigger ]; then
  sql staging "DROP TRIGGER jobs_yield_held_key ON jobbuf.jobs" >/dev/null
fi
# staging's own ids stay clear of the ids app gives later (the data-only restore below).
sql staging "SELECT setval('jobbuf.jobs_id_seq', 1000000); SELECT jobbuf_pause('sync')" >/dev/null
expect_eq "staging holds app's 3 jobs" "$(sql staging "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" 3

# jobbuf_stage with the held job's key.
own42=$(sql staging "SELECT jobbuf_stage('sync', '{\"from\": \"staging\", \"account\": 42}', unique_key => 'account-42')")
check "jobbuf_stage with the held job's unique_key returns an id (got '$own42')" [ -n "$own42" ]
expect_eq "the held job with that key is discarded, the own job waits" \
  "$(sql staging "SELECT string_agg((owner = jobbuf.installation_id())::text, ',') FROM jobbuf.jobs WHERE unique_key = 'account-42'")" true
expect_eq "a second jobbuf_stage of the key stages nothing (the own job holds it)" \
  "$(sql staging "SELECT jobbuf_stage('sync', '{\"again\": 42}', unique_key => 'account-42') IS NULL")" t

# The 1.2 ON CONFLICT form, by a role that may stage and read jobs (the arbiter's columns need
# SELECT) but not delete them: the held job is deleted with the trigger's rights.
sql staging "SET client_min_messages = warning; DROP ROLE IF EXISTS held_producer;
             CREATE ROLE held_producer LOGIN IN ROLE jobbuf_producer, jobbuf_admin" >/dev/null
on_conflict="INSERT INTO jobbuf.jobs (queue, payload, unique_key) VALUES ('sync', '{\"from\": \"staging\", \"account\": 7}', 'account-7')
  ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND group_id IS NULL DO NOTHING RETURNING id"
own7=$(jb_psql_db staging -qtAX -c "SET ROLE held_producer" -c "$on_conflict" 2>&1)
expect_match "a producer's 1.2 ON CONFLICT insert with the held job's key inserts the own job" "$own7" '^[0-9]+$'
expect_eq "and the 1.2 ON CONFLICT form still stages nothing for a key an own job holds" \
  "$(jb_psql_db staging -qtAX -c "SET ROLE held_producer" -c "$on_conflict" 2>&1)" ""
expect_eq "staging holds one job (unkeyed) of app now" \
  "$(sql staging "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" 1

# The staging refresh's discard leaves the own jobs; they are delivered.
expect_eq "jobbuf_discard_restored() deletes the one held job left" "$(sql staging "SELECT jobbuf_discard_restored()")" 1
expect_eq "and leaves staging's own jobs" \
  "$(sql staging "SELECT string_agg(unique_key, ',' ORDER BY unique_key) FROM jobbuf.jobs")" "account-42,account-7"
sql staging "SELECT jobbuf_resume('sync')" >/dev/null
expect_list_reaches jobbuf:sync 2 15 "staging delivers its own account-42 and account-7 jobs"
expect_eq "those two, from staging" \
  "$(jb_redis LRANGE jobbuf:sync 0 -1 | LC_ALL=C sort | tr '\n' ' ')" \
  '{"from": "staging", "account": 42} {"from": "staging", "account": 7} '

# A data-only restore of app's jobs into staging, where own jobs hold account-42 and account-5.
sql staging "SELECT jobbuf_pause('sync')" >/dev/null
sql staging "SELECT jobbuf_stage('sync', '{\"from\": \"staging\", \"account\": 42}', unique_key => 'account-42'),
                    jobbuf_stage('sync', '{\"from\": \"staging\", \"account\": 5}', unique_key => 'account-5')" >/dev/null
sql app "SELECT jobbuf_stage('sync', '{\"from\": \"app\", \"account\": 5}', now() + interval '1 hour', unique_key => 'account-5')" >/dev/null
dump --data-only -t jobbuf.jobs -f "$JB_RUN/app-jobs.dump" app
out=$(pg_restore_to staging "$JB_RUN/app-jobs.dump"); rc=$?
expect_eq "pg_restore of held jobs whose keys staging's own jobs hold succeeds" "$rc ${out:0:300}" "0 "
expect_eq "own jobs win: account-42 and account-5 are staging's, account-7 and the unkeyed job held" \
  "$(sql staging "SELECT string_agg(coalesce(unique_key, '-') || ':' || (owner = jobbuf.installation_id())::text, ',' ORDER BY unique_key)
                  FROM jobbuf.jobs")" "account-42:true,account-5:true,account-7:false,-:false"

# The insert a logical-replication apply makes (its session_replication_role = replica; no real
# subscription here): a held row with a key an own job holds.
app_id=$(sql app "SELECT jobbuf.installation_id()")
out=$(sql staging "SET session_replication_role = replica;
  INSERT INTO jobbuf.jobs (id, queue, payload, unique_key, origin, owner)
  VALUES (2000001, 'sync', '{\"replicated\": 5}', 'account-5', '$app_id', '$app_id')" 2>&1)
expect_eq "a replica-role insert of a held job with an own job's key does not fail, and is skipped" \
  "${out}|$(sql staging "SELECT count(*) FROM jobbuf.jobs WHERE id = 2000001")" "|0"

# A claimed own job with a key, and a held job with that key arriving meanwhile (a replica-role
# insert: the own job is not waiting, so the held one is kept): jobbuf_fail releases the own job
# to wait again, and the held one gives way to it (before: the own job was dropped as a duplicate).
sql staging "SELECT jobbuf_create_queue('claims', 'none')" >/dev/null
sql staging "SELECT jobbuf_stage('claims', '{\"own\": 9}', unique_key => 'account-9')" >/dev/null
gid=$(sql staging "SELECT DISTINCT group_id FROM jobbuf_claim('claims')")
sql staging "SET session_replication_role = replica;
  INSERT INTO jobbuf.jobs (id, queue, payload, unique_key, origin, owner)
  VALUES (2000002, 'claims', '{\"held\": 9}', 'account-9', '$app_id', '$app_id')" >/dev/null
expect_eq "a held job with the claimed job's key is kept while the own job is claimed" \
  "$(sql staging "SELECT count(*) FROM jobbuf.jobs WHERE id = 2000002")" 1
expect_eq "jobbuf_fail releases the own job" "$(sql staging "SELECT jobbuf_fail('$gid', 'try again')")" 1
expect_eq "the own job waits again with its key, the held one gave way" \
  "$(sql staging "SELECT string_agg(payload::text || ':' || (owner = jobbuf.installation_id())::text || ':' || (group_id IS NULL)::text, ',')
                  FROM jobbuf.jobs WHERE queue = 'claims'")" '{"own": 9}:true:true'

# 1 (jobbuf_stage) + 1 (ON CONFLICT) + 2 (skipped by the restore) + 1 (replica) + 1 (jobbuf_fail)
# held jobs discarded.
if jb_wait_until '[ "$(log_discarded)" = 6 ]' 15; then
  pass "the worker's LOG lines count the 6 discarded held jobs"
else
  fail "the worker's LOG lines count $(log_discarded) discarded held jobs, expected 6"
fi
check "its census empties jobbuf.held_discards" \
  jb_wait_until "[ \"\$(sql staging 'SELECT count(*) FROM jobbuf.held_discards')\" = 0 ]" 10
expect_eq "jobbuf_discard_restored() deletes the 2 held jobs, not the own ones" \
  "$(sql staging "SELECT jobbuf_discard_restored()") $(sql staging "SELECT count(*) FROM jobbuf.jobs")" "2 3"

e2e_done

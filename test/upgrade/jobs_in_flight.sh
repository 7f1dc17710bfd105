#!/usr/bin/env bash
# The upgrade a user runs, with jobs in every state: an earlier release (library and SQL built from
# git history, exactly what its users run: JB_FROM=1.0, the default, JB_FROM=1.1 or JB_FROM=1.2, see
# jobs_in_flight_from_1.1.sh, jobs_in_flight_from_1.2.sh and tools/releases.sh; on PostgreSQL 16 and later with
# test/upgrade/compat/<version>.patch, the mechanical src/pg_compat.h change) holds waiting, paused, scheduled,
# unique-keyed, claimed, failed, dead and archived jobs; then the current build is installed and
# Postgres restarted (the new library on the old SQL: no crash loop, one log line asking for the
# update, staging still works and loses nothing); then ALTER EXTENSION jobbuf UPDATE: every job
# is still there with its id, attempts, group and lease; the paused queue delivers once after
# resume; the claimed group completes with its old group id; dead jobs retry; the catalog equals
# a fresh install's.
source "$(dirname "$0")/../e2e/tools/lib.sh"
ROOT=$E2E_ROOT
source "$(dirname "$0")/tools/releases.sh"
FROM=${JB_FROM:-1.0}
CURRENT=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/jobbuf.control")

# Whatever happens, the current build is what stays installed for the suites that follow.
finish() { e2e_cleanup; install_current; }
install_release "$FROM" || { install_current; e2e_done; }

e2e_start "jobbuf.poll_interval = '30s'"
trap finish EXIT
expect_eq "$FROM is installed by the $FROM build" "$(jb_sql "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$FROM"

jb_psql -q <<'SQL' >/dev/null
SELECT jobbuf_create_queue('now_list', 'list');
SELECT jobbuf_create_queue('held_list', 'list');
SELECT jobbuf_create_queue('events', 'stream');
SELECT jobbuf_create_queue('mailers', 'sidekiq');
SELECT jobbuf_create_queue('batch', 'none', '{"visibility": 3600, "backoff_base": 3600}');
SELECT jobbuf_create_queue('fragile', 'none', '{"max_attempts": 1}');
SELECT jobbuf_create_queue('kept', 'none', '{"archive": true}');
SELECT jobbuf_pause('held_list');
SELECT jobbuf_stage('held_list', jsonb_build_object('n', n)) FROM generate_series(1, 5) n;
SELECT jobbuf_stage('now_list', '{"later": true}', now() + interval '1 hour');
SELECT jobbuf_stage('batch', jsonb_build_object('n', n)) FROM generate_series(1, 6) n;
SELECT jobbuf_stage('batch', '{"unique": true}', NULL, 'only-one');
SELECT jobbuf_stage('fragile', '{"doomed": true}');
SELECT jobbuf_stage('kept', '{"done": true}');
SELECT jobbuf_stage('events', '{"e": 1}');
SELECT jobbuf_stage('mailers', '{"class": "Mailer", "args": [1]}');
SQL
# Claimed with a live lease (3 jobs), failed with attempts and backoff (3 jobs), dead, archived.
claimed=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('batch', 3)")
failed=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('batch', 3)")
jb_sql "SELECT jobbuf_fail('$failed', 'HTTP 503')" >/dev/null
doomed=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('fragile', 1)")
jb_sql "SELECT jobbuf_fail('$doomed', 'bad payload')" >/dev/null
kept=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('kept', 1)")
jb_sql "SELECT jobbuf_complete('$kept')" >/dev/null
check "$FROM delivers to a stream" jb_wait_until '[ "$(jb_redis XLEN jobbuf:events)" = 1 ]' 10
check "$FROM delivers to Sidekiq" jb_wait_until '[ "$(jb_redis LLEN queue:mailers)" = 1 ]' 10
# (the worker commits its delete just after the push)
wait_staged 0 "WHERE queue IN ('events', 'mailers')"

snapshot() {
  jb_sql "SELECT string_agg(format('%s %s %s %s %s %s %s %s', id, queue, attempts, group_id, lease_until,
                                   run_at > now(), unique_key, last_error), E'\n' ORDER BY id) FROM jobbuf.jobs"
  jb_sql "SELECT 'dead ' || string_agg(id || ' ' || attempts || ' ' || last_error, ', ' ORDER BY id) FROM jobbuf.dead"
  jb_sql "SELECT 'archive ' || string_agg(id::text, ', ' ORDER BY id) FROM jobbuf.archive"
}
before=$(snapshot)
check "jobs in every state before the update ($(jb_sql "SELECT count(*) FROM jobbuf.jobs") staged)" \
  [ "$(jb_sql "SELECT count(*) FILTER (WHERE group_id = '$claimed') || ' ' || count(*) FILTER (WHERE attempts = 1 AND group_id IS NULL) || ' ' || count(*) FILTER (WHERE unique_key IS NOT NULL) FROM jobbuf.jobs")" = "3 3 1" ]

# The new package, a restart: the new library runs on the old SQL. An update before the restart
# (the old library still loaded) is refused with what to do.
make -C "$ROOT" -s install >/dev/null
out=$(jb_psql -q -c "ALTER EXTENSION jobbuf UPDATE" 2>&1)
expect_match "ALTER EXTENSION UPDATE before the restart is refused" "$out" "restart PostgreSQL"
expect_eq "... and leaves $FROM in place" "$(jb_sql "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$FROM"
mark=$(log_mark)
jb_pg_ctl restart
# What the restarted server logged (the old one's shutdown lines excluded).
since_restart() { log_since "$mark" | sed -n '/listening on/,$p'; }
check "after the restart the worker asks for ALTER EXTENSION jobbuf UPDATE" \
  jb_wait_until "log_since $mark | grep -q 'run ALTER EXTENSION jobbuf UPDATE'" 20
between=$(jb_sql "SELECT jobbuf_stage('now_list', '{\"between\": true}')")
check "staging works between the restart and the update (job $between)" [ -n "$between" ]
sleep 2   # the worker has had its chance to misbehave
expect_eq "the job staged in between waits (staged, not in Redis)" \
  "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE id = $between") $(jb_redis LLEN jobbuf:now_list)" "1 0"
expect_eq "one log line asks for the update" "$(count_lines 'run ALTER EXTENSION jobbuf UPDATE' "$(log_since "$mark")")" 1
expect_eq "no worker exited or crashed after the restart" \
  "$(count_lines 'terminated by signal|exited with exit code|server process .* was terminated' "$(since_restart)")" 0

t0=$(now_ms)
jb_psql -q -c "ALTER EXTENSION jobbuf UPDATE"
expect_eq "ALTER EXTENSION jobbuf UPDATE reaches $CURRENT" "$(jb_sql "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$CURRENT"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:now_list)" = 1 ]' 10; then
  pass "the update wakes the worker: the job staged in between is delivered ($(( $(now_ms) - t0 )) ms, poll 30 s)"
else
  fail "the job staged in between was not delivered within 10 s of the update"
fi
wait_staged 0 "WHERE id = $between"
expect_eq "every job, dead letter and archived job as before (ids, attempts, groups, leases, errors)" \
  "$(snapshot)" "$before"

jb_sql "SELECT jobbuf_resume('held_list')" >/dev/null
expect_list_reaches jobbuf:held_list 5 10 "the paused queue delivers its 5 jobs after resume"
sleep 1
expect_eq "the paused queue's jobs arrive once each" "$(jb_redis LRANGE jobbuf:held_list 0 -1 | sort -u | wc -l) $(jb_redis LLEN jobbuf:held_list)" "5 5"
expect_eq "the claimed group completes with its $FROM group id" "$(jb_sql "SELECT jobbuf_complete('$claimed')")" 3
expect_eq "the dead job retries" "$(jb_sql "SELECT jobbuf_retry_dead('fragile')")" 1
expect_eq "the retried job is claimable with its id" \
  "$(jb_sql "SELECT id FROM jobbuf_claim('fragile', 1)")" "$(jb_sql "SELECT min(id) FROM jobbuf.jobs WHERE queue = 'fragile'")"
expect_eq "the unique key still holds" "$(jb_sql "SELECT jobbuf_stage('batch', '{}', NULL, 'only-one') IS NULL")" t
expect_eq "the scheduled job still waits" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'now_list' AND run_at > now()")" 1
new_id=$(jb_sql "SELECT jobbuf_stage('now_list', '{\"after\": true}')")
check "ids continue after the update ($new_id > $between)" [ "$new_id" -gt "$between" ]
expect_list_reaches jobbuf:now_list 2 10 "a job staged after the update is delivered"

jb_psql_db postgres -q -c "CREATE DATABASE fresh"
jb_psql_db fresh -q -c "CREATE EXTENSION jobbuf"
if diff -u <(jb_psql_db fresh -qtAX -f "$ROOT/test/upgrade/catalog.sql") \
           <(jb_psql -qtAX -f "$ROOT/test/upgrade/catalog.sql") >"$JB_RUN/catalog.diff"; then
  pass "the updated database's catalog equals a fresh $CURRENT's"
else
  fail "the updated database's catalog differs from a fresh $CURRENT's:"; head -n 40 "$JB_RUN/catalog.diff" | sed 's/^/      /'
fi
e2e_done

#!/usr/bin/env bash
# Backups: pg_dump (custom, directory and plain formats) of a database holding jobs in every state
# (waiting, unique, partitioned, scheduled, INSERTed, paused, claimed with a lease, failed with
# attempts, dead, archived), restored into fresh databases (pg_restore, psql; pg_restore -j 2 with
# session_replication_role = replica), gives the same queues, counters, jobs, dead letters, archive and id sequence; a new job continues
# the sequence; restored into the worker's database, the jobs are held (another installation
# staged them: docs/copies.md) until jobbuf_release_restored adopts them, then the waiting ones are
# delivered once and the others stay; claims work in the database pg_restore -j restored. A 1.0 database's dump (made before jobbuf.jobs referenced jobbuf.queues) restores
# into the current version with session_replication_role = replica, and is refused loudly without it.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
DUMPS=$JB_RUN/dumps
mkdir -p "$DUMPS"

in_postgres() { jb_psql_db postgres -qtAX -c "$1"; }
pg_dump_db() { "$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres "$@"; }
pg_restore_db() { "$JB_PGBIN/pg_restore" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres "$@"; }

# populate DB: jobs in every state (jobbuf.database is the harness's database: nothing here is
# drained, so the waiting jobs stay waiting).
populate() {
  jb_psql_db "$1" -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('deliver', 'list');
SELECT jobbuf_create_queue('idle', 'sidekiq');
SELECT jobbuf_pause('idle');
SELECT jobbuf_create_queue('batch', 'none', '{"backoff_base": 3600, "visibility": 3600, "archive": true}');
SELECT jobbuf_create_queue('fragile', 'none', '{"max_attempts": 1}');
SELECT jobbuf_stage('deliver', jsonb_build_object('job', 'w' || g)) FROM generate_series(1, 4) g;
SELECT jobbuf_stage('deliver', '{"job": "unique"}'::jsonb, unique_key => 'u1');
SELECT jobbuf_stage('deliver', '{"job": "partitioned"}'::jsonb, partition_key => 'acct-7');
SELECT jobbuf_stage('deliver', '{"job": "scheduled"}'::jsonb, run_at => now() + interval '1 day');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('deliver', '{"job": "orm"}');
SELECT jobbuf_stage('idle', '{"class": "PausedWorker", "args": [1]}'::jsonb);
SELECT jobbuf_stage('batch', jsonb_build_object('job', 'b' || g), partition_key => 'p' || g) FROM generate_series(1, 4) g;
SELECT jobbuf_complete(c.group_id) FROM (SELECT DISTINCT group_id FROM jobbuf_claim('batch', 1, 'p1')) c;
SELECT jobbuf_fail(c.group_id, 'api said 500') FROM (SELECT DISTINCT group_id FROM jobbuf_claim('batch', 1, 'p2')) c;
SELECT count(*) FROM jobbuf_claim('batch', 1, 'p3');
SELECT jobbuf_stage('fragile', '{"job": "doomed"}'::jsonb);
SELECT jobbuf_fail(c.group_id, 'gave up') FROM (SELECT DISTINCT group_id FROM jobbuf_claim('fragile', 1)) c;
SQL
}

# state DB: every row jobbuf keeps, one line each, in a stable order.
state() {
  jb_psql_db "$1" -qtAX <<SQL
SELECT 'queue ' || q::text FROM jobbuf.queues q ORDER BY q.name;
SELECT 'stats ' || s::text FROM jobbuf.queue_stats s ORDER BY s.queue;
SELECT 'job ' || j::text FROM (SELECT ${JOB_COLUMNS:-*} FROM jobbuf.jobs) j ORDER BY j.id;
SELECT 'dead ' || d::text FROM jobbuf.dead d ORDER BY d.id;
SELECT 'archive ' || a::text FROM jobbuf.archive a ORDER BY a.id;
SELECT 'sequence ' || last_value || ' ' || is_called FROM jobbuf.jobs_id_seq;
SQL
}

# expect_restored WHAT DB: DB holds exactly the source's state.
expect_restored() {
  local restored
  restored=$(state "$2")
  if [ "$restored" == "$SOURCE_STATE" ]; then
    pass "$1: every row identical ($(wc -l <<<"$restored") rows: queues, counters, jobs, dead, archive, sequence)"
  else
    fail "$1: the restored rows differ (- source, + restored):"
    diff <(echo "$SOURCE_STATE") <(echo "$restored") | head -n 20 | sed 's/^/      /'
  fi
}

in_postgres "CREATE DATABASE source" >/dev/null
jb_psql_db source -q -c "CREATE EXTENSION jobbuf"
populate source
SOURCE_STATE=$(state source)
expect_eq "the source holds jobs in every state (waiting, scheduled, claimed, failed; dead; archived)" \
  "$(jb_psql_db source -qtAX -c "SELECT (SELECT count(*) FROM jobbuf.jobs) || ' jobs: '
      || (SELECT count(*) FROM jobbuf.jobs WHERE group_id IS NOT NULL AND lease_until > now()) || ' leased, '
      || (SELECT count(*) FROM jobbuf.jobs WHERE attempts > 0) || ' failed, '
      || (SELECT count(*) FROM jobbuf.jobs WHERE run_at > now() AND attempts = 0) || ' scheduled; '
      || (SELECT count(*) FROM jobbuf.dead) || ' dead, ' || (SELECT count(*) FROM jobbuf.archive) || ' archived'")" \
  "12 jobs: 1 leased, 1 failed, 1 scheduled; 1 dead, 1 archived"

pg_dump_db -Fc -f "$DUMPS/source.custom" source
pg_dump_db -Fd -f "$DUMPS/source.dir" source
pg_dump_db -Fp -f "$DUMPS/source.sql" source
check "the plain dump restores jobbuf.queues before jobbuf.jobs" \
  [ "$(grep -n '^COPY jobbuf.queues ' "$DUMPS/source.sql" | cut -d: -f1)" -lt \
    "$(grep -n '^COPY jobbuf.jobs ' "$DUMPS/source.sql" | cut -d: -f1)" ]

# A parallel pg_restore (-j) does not follow that order (pg_dump records it only in the order of
# the archive's entries, not as dependencies): it restores with session_replication_role = replica.
for format in custom directory plain parallel; do
  db=restored_$format
  in_postgres "CREATE DATABASE $db" >/dev/null
  case $format in
    custom) out=$(pg_restore_db -d "$db" "$DUMPS/source.custom" 2>&1) ;;
    directory) out=$(pg_restore_db -d "$db" "$DUMPS/source.dir" 2>&1) ;;
    plain) out=$(jb_psql_db "$db" -q -o /dev/null -f "$DUMPS/source.sql" 2>&1) ;;
    parallel) out=$(PGOPTIONS='-c session_replication_role=replica' pg_restore_db -j 2 -d "$db" "$DUMPS/source.dir" 2>&1) ;;
  esac
  rc=$?
  check "$format restore reports no error ${out:0:300}" [ "$rc" -eq 0 -a -z "$out" ]
  expect_restored "$format restore" "$db"
done

# Claims in the database pg_restore -j restored: jobbuf.claim_locks is not dumped and no trigger ran
# during the restore (session_replication_role = replica), so it holds no row; the first claim that
# needs a slot makes the queue's slots (1.1 made them with the queue, and every such claim failed).
jb_psql_db restored_parallel -qtAX -c "SELECT jobbuf_release_restored()" >/dev/null
expect_eq "restored by pg_restore -j: no claim-lock rows, and a partition claim takes its job" \
  "$(jb_psql_db restored_parallel -qtAX -c "SELECT (SELECT count(*) FROM jobbuf.claim_locks) || ' '
      || (SELECT string_agg(payload->>'job', ',') FROM jobbuf_claim('batch', 10, 'p4'))" 2>&1)" "0 b4"
expect_eq "... and so does a claim without partition key, of a new job" \
  "$(jb_psql_db restored_parallel -qtAX -c "SELECT jobbuf_stage('batch', '{\"job\": \"b5\"}'::jsonb, partition_key => 'p5') IS NOT NULL;
      SELECT string_agg(payload->>'job', ',') FROM jobbuf_claim('batch', 10)" 2>&1 | tail -n 1)" "b5"

max_id=$(jb_psql_db source -qtAX -c "SELECT greatest((SELECT max(id) FROM jobbuf.jobs), (SELECT max(id) FROM jobbuf.dead), (SELECT max(id) FROM jobbuf.archive))")
next_id=$(jb_psql_db restored_custom -qtAX -c "SELECT jobbuf_stage('deliver', '{\"job\": \"after restore\"}'::jsonb)")
check "a job staged after the restore continues the id sequence ($next_id > $max_id)" [ "$next_id" -gt "$max_id" ]
out=$(jb_psql_db restored_plain -qtAX -c "SELECT jobbuf_stage('gone', '{}'::jsonb)" 2>&1)
expect_match "the restored database still validates staging" "$out" 'unknown queue "gone"'

# Into the worker's database: dropped, created again, restored; the waiting jobs are delivered
# once, the scheduled, paused, failed and leased ones stay. The worker stays disabled until the
# restored rows are compared (CREATE EXTENSION in the restore wakes it at once).
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled did not turn off"
in_postgres "DROP DATABASE $JB_DB WITH (FORCE)" >/dev/null
in_postgres "CREATE DATABASE $JB_DB" >/dev/null
out=$(pg_restore_db -d "$JB_DB" "$DUMPS/source.custom" 2>&1)
check "restored into the worker's database ${out:0:300}" [ -z "$out" ]
expect_restored "the worker's database, restored" "$JB_DB"
reset_and_reload jobbuf.enabled on || fail "jobbuf.enabled did not turn on again"
jb_sql "SELECT jobbuf_stage('deliver', '{\"job\": \"staged after the restore\"}'::jsonb)" >/dev/null
expect_list_reaches jobbuf:deliver 1 60 "a job staged after the restore is delivered"
expect_eq "... alone: the restored jobs are held" \
  "$(jb_redis LRANGE jobbuf:deliver 0 -1) $(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" \
  '{"job": "staged after the restore"} 12'
jb_redis DEL jobbuf:deliver >/dev/null
expect_eq "jobbuf_release_restored('deliver') adopts that queue's 8" "$(jb_sql "SELECT jobbuf_release_restored('deliver')")" 8
expected_delivery=$(printf '%s\n' '{"job": "orm"}' '{"job": "partitioned"}' '{"job": "unique"}' \
  '{"job": "w1"}' '{"job": "w2"}' '{"job": "w3"}' '{"job": "w4"}')
# (the launcher keeps a worker away from a dropped database for a while: up to 60 s here)
expect_list_reaches jobbuf:deliver 7 60 "the seven restored waiting jobs reach Redis"
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE queue = 'deliver'\")\" = 1 ]" 10
expect_eq "each of them once" "$(jb_redis LRANGE jobbuf:deliver 0 -1 | sort)" "$expected_delivery"
expect_eq "what stays: the scheduled job, the paused queue's, the failed and the leased batch jobs" \
  "$(jb_sql "SELECT string_agg(payload->>'job', ' ' ORDER BY id) || ' / ' || (SELECT string_agg(payload->>'class', ' ') FROM jobbuf.jobs WHERE queue = 'idle') FROM jobbuf.jobs WHERE queue <> 'idle'")" \
  "scheduled b2 b3 b4 / PausedWorker"
expect_eq "delivered_total counts them" "$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'deliver'")" 8
jb_sql "SELECT jobbuf_stage('deliver', '{\"job\": \"new\"}'::jsonb)" >/dev/null
expect_list_reaches jobbuf:deliver 8 10 "a job staged after the release is delivered too"
expect_eq "nothing delivered twice" "$(jb_redis LRANGE jobbuf:deliver 0 -1 | sort | uniq -d)" ""

# A 1.0 database's dump: jobbuf.jobs's data comes before jobbuf.queues's. Restored as it is into
# the current version, the jobs are refused (an error, not a silent loss); with session_replication_role = replica
# (superuser; the staging trigger and the key's check do not fire) every row is restored.
in_postgres "CREATE DATABASE source10" >/dev/null
jb_psql_db source10 -q -c "CREATE EXTENSION jobbuf VERSION '1.0'"
populate source10
# (a 1.0 or 1.1 dump records no installation identity: its jobs are not held, see docs/copies.md)
JOB_COLUMNS='id, queue, payload, run_at, unique_key, partition_key, staged_at, attempts, last_error, group_id, lease_until'
SOURCE_STATE=$(state source10)
pg_dump_db -Fc -f "$DUMPS/source10.custom" source10
pg_dump_db -Fp -f "$DUMPS/source10.sql" source10
in_postgres "CREATE DATABASE from10_as_is" >/dev/null
out=$(pg_restore_db -d from10_as_is "$DUMPS/source10.custom" 2>&1)
rc=$?
check "1.0 dump restored as it is: pg_restore fails, saying why (exit $rc)" \
  [ "$rc" -ne 0 -a "$(count_lines 'unknown queue' "$out")" -gt 0 ]
for format in custom plain; do
  db=from10_$format
  in_postgres "CREATE DATABASE $db" >/dev/null
  case $format in
    custom) out=$(PGOPTIONS='-c session_replication_role=replica' pg_restore_db -d "$db" "$DUMPS/source10.custom" 2>&1) ;;
    plain) out=$(PGOPTIONS='-c session_replication_role=replica' jb_psql_db "$db" -q -o /dev/null -f "$DUMPS/source10.sql" 2>&1) ;;
  esac
  check "1.0 dump, $format format, restored with session_replication_role = replica ${out:0:300}" [ -z "$out" ]
  expect_restored "1.0 dump into the current version, $format format" "$db"
  expect_eq "1.0 dump, $format format: the restored extension is the current version" \
    "$(jb_psql_db "$db" -qtAX -c "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$E2E_ROOT/jobbuf.control")"
done

e2e_done

#!/usr/bin/env bash
# Storage rotation (docs/storage.md): while a REPEATABLE READ snapshot holds the xmin horizon,
# jobs keep flowing and jobbuf.jobs stays bounded because the worker rotates it (a new file, live
# rows put back with their headers as CLUSTER does), not because vacuum removes anything. Checks the mechanism, not timings:
#  * without a held horizon a heap of a few MB is left to vacuum (rotation is due from 8 MB);
#  * under a horizon held back for more than 15 s, each round of 1.2 MB of jobs is reclaimed once
#    delivered: the table's file changes after every round (rotation is then due from 1 MB, at
#    most every 2 s), and its heap stays near 1 MB, far below what the delivered jobs' dead rows
#    would take; jobbuf.queue_stats, whose counters row the worker updates in every batch, is rotated
#    as well and its counters are intact, and so is jobbuf.delivery_counter (one row, a version per
#    batch);
#  * a scheduled job, a claimed group with a live lease, a waiting unique job of a paused queue, a
#    job in backoff and a held job (another installation's owner and origin) keep their ids and every column; the group still completes; the unique key
#    still refuses a duplicate; the old snapshot still sees the rows that were put back;
#  * while a transaction holds ACCESS SHARE on jobbuf.jobs (what pg_dump holds from the copy of its
#    rows to the end of the dump)
#    rotation does not happen and producers are never queued behind it; once it ends, it does;
#  * a live backlog above the cap is left alone, and rotated once it drains.
source "$(dirname "$0")/tools/lib.sh"

ROUNDS=${HELD_SNAPSHOT_ROUNDS:-16}
PER_ROUND=5000
PAD=$(printf 'x%.0s' $(seq 1 200))
BOUND_BYTES=$((12 * 1024 * 1024))   # rotation starts at 8 MB of heap; one round adds ~1.2 MB
HELD_BOUND_BYTES=$((4 * 1024 * 1024))  # ... and at 1 MB while the horizon is held back
# How long a due rotation may take to show (the worker looks every 200 ms, at most every 5 s after
# a failed try): a bound for a loaded machine, not a timing the test asserts.
ROTATION_WAIT=120

e2e_start "wal_level = logical"
# Every session of this script gives up on a lock after 10 s: a rotation queued for its lock
# (behind the ACCESS SHARE below) would block them all, which must show as a failure, not a hang.
export PGOPTIONS="${PGOPTIONS:-} -c lock_timeout=10s"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('flow', 'list');
SELECT jobbuf_create_queue('parked', 'list');
SELECT jobbuf_pause('parked');
SELECT jobbuf_create_queue('consumed', 'none', '{"visibility": 3600}');
CREATE TABLE analytics (n int);
INSERT INTO analytics VALUES (1);
SQL
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_stage('flow', '{"later": true}'::jsonb, now() + interval '1 day');
SELECT jobbuf_stage('parked', '{"unique": true}'::jsonb, NULL, 'only-once');
SELECT jobbuf_stage('consumed', '{"claimed": true}'::jsonb);
SELECT jobbuf_stage('consumed', '{"backoff": true}'::jsonb);
-- Scheduled, with a payload stored out of line in the TOAST table (500 kB that do not compress).
SELECT jobbuf_stage('flow', jsonb_build_object('large', (SELECT string_agg(md5(n::text), '') FROM generate_series(1, 16000) n)),
                    now() + interval '1 day');
-- Held: staged under another installation (a restored dump's job); skipped until released.
INSERT INTO jobbuf.jobs (queue, payload, origin, owner)
VALUES ('flow', '{"held": true}', '00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000001');
SQL
group=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('consumed', 1)")
backoff_group=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('consumed', 1)")
jb_sql "SELECT jobbuf_fail('$backoff_group', 'try again')" >/dev/null
kept_rows_sql="SELECT string_agg(row_to_json(j)::text, ' ' ORDER BY id) FROM jobbuf.jobs j"

# A streaming standby, made before any rotation: it replays each one from the WAL.
REPLICA=$JB_RUN/replica
replica_sql() { psql -X -qtAX -v ON_ERROR_STOP=1 -h "$JB_RUN" -p "$REPLICA_PORT" -U postgres -d "$JB_DB" -c "$1"; }
trap 'jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$REPLICA" -m immediate stop >/dev/null 2>&1; e2e_cleanup' EXIT
jb_as_postgres "$JB_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$JB_PGPORT" -U postgres -D "$REPLICA" -R -X stream -c fast \
  >"$JB_RUN/basebackup.log" 2>&1 || { cat "$JB_RUN/basebackup.log" >&2; fail "pg_basebackup -R"; }
jb_on_free_port REPLICA_PORT jb_pg_start "$REPLICA" "$JB_RUN/replica.log" || fail "the standby starts"
expect_eq "a streaming standby follows" "$(replica_sql "SELECT pg_is_in_recovery()")" t
kept_before=$(jb_sql "$kept_rows_sql")
kept_ids=$(jb_sql "SELECT string_agg(id::text, ',') FROM jobbuf.jobs")
expect_eq "six jobs that must survive rotation are staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 6
check "one of them is stored out of line" test "$(jb_sql "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass")" -gt 0
filenode() { jb_sql "SELECT pg_relation_filenode('jobbuf.jobs')"; }
heap_bytes() { jb_sql "SELECT pg_relation_size('jobbuf.jobs')"; }

# No horizon held: delivered rows are vacuum's. A heap of a few MB (below 8 MB) is not rotated, however
# often the worker looks (every 200 ms). Autovacuum stays off the table meanwhile so that the heap
# keeps its size; the rows are delivered before the wait.
jb_sql "ALTER TABLE jobbuf.jobs SET (autovacuum_enabled = off)" >/dev/null
free_filenode=$(filenode)
jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('free', n, 'pad', '$PAD') FROM generate_series(1, 12000) n))" >/dev/null
expect_list_reaches jobbuf:flow 12000 30 "12,000 jobs delivered without a held horizon"
free_heap=$(heap_bytes)
check "the heap grew past 1 MB (what rotation would act on under a held horizon)" test "$free_heap" -gt $((2 * 1024 * 1024))
sleep 3
expect_eq "without a held horizon a heap below 8 MB is not rotated" "$(filenode)" "$free_filenode"
jb_sql "ALTER TABLE jobbuf.jobs RESET (autovacuum_enabled)" >/dev/null
jb_sql "VACUUM jobbuf.jobs" >/dev/null   # what vacuum is for: the heap is empty again
jb_redis DEL jobbuf:flow >/dev/null

# The held snapshot: a REPEATABLE READ transaction that read another table, as an analytics
# query does. It holds the horizon (backend_xmin) but no lock on jobbuf.jobs.
tx_open
tx_run "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM analytics;"
held_xmin=$(jb_sql "SELECT backend_xmin FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND state = 'idle in transaction'")
check "the held transaction holds the xmin horizon" test -n "$held_xmin"
# Rotation is due from 1 MB once the horizon is held back by more than 15 s: past a transaction
# that took an id after the snapshot, and 17 s later.
jb_sql "SELECT txid_current()" >/dev/null
sleep 17

# stage_rounds FIRST LAST [rotated]: rounds of PER_ROUND jobs, each delivered before the next;
# records the largest heap and total size of jobbuf.jobs once a round is delivered, and the files
# it had. With rotated, each round then waits for a rotation (due from 1 MB under the held horizon,
# and a round is 1.2 MB of rows).
max_heap=0 max_total=0 filenodes=" $(filenode) "
stage_rounds() {
  local r before h t
  for r in $(seq "$1" "$2"); do
    before=$(filenode)
    jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('round', $r, 'n', n, 'pad', '$PAD') FROM generate_series(1, $PER_ROUND) n))" >/dev/null \
      || { fail "round $r: a producer could not stage (queued behind a lock?)"; return 1; }
    jb_wait_until "[ \"\$(jb_redis LLEN jobbuf:flow)\" = $((r * PER_ROUND)) ]" 30 \
      || { fail "round $r not delivered: $(jb_redis LLEN jobbuf:flow) in Redis"; return 1; }
    h=$(heap_bytes); t=$(jb_sql "SELECT pg_total_relation_size('jobbuf.jobs')")
    [ "$h" -gt "$max_heap" ] && max_heap=$h
    [ "$t" -gt "$max_total" ] && max_total=$t
    if [ "${3:-}" = rotated ] && ! jb_wait_until "[ \"\$(filenode)\" != $before ]" "$ROTATION_WAIT"; then
      fail "round $r: its delivered rows were not reclaimed by a rotation within $ROTATION_WAIT s (heap $(heap_bytes) bytes)"
      return 1
    fi
    [[ "$filenodes" == *" $(filenode) "* ]] || filenodes+="$(filenode) "
  done
}
index_filenodes() {
  jb_sql "SELECT string_agg(c.relname || '=' || pg_relation_filenode(c.oid), ' ' ORDER BY c.relname)
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'jobbuf.jobs'::regclass"
}
indexes_before=$(index_filenodes)
stage_rounds 1 $((ROUNDS - 1)) rotated
# The last round with a logical decoding slot: with wal_level = logical, a rotation replicates as
# nothing (no TRUNCATE record; the rows put back are written as whole pages, as CLUSTER writes
# them): test/e2e/rotation_snapshots.sh counts the inserts.
jb_sql "SELECT 1 FROM pg_create_logical_replication_slot('rotation', 'test_decoding')" >/dev/null
stage_rounds "$ROUNDS" "$ROUNDS" rotated && pass "every round's delivered rows were reclaimed by a rotation"
decoded=$(jb_sql "SELECT count(*) FROM pg_logical_slot_peek_changes('rotation', NULL, NULL) WHERE data LIKE 'table jobbuf.jobs: TRUNCATE:%'")
jb_sql "SELECT pg_drop_replication_slot('rotation')" >/dev/null
expect_eq "logical decoding sees no TRUNCATE of the rotation" "$decoded" 0
# Indexes that never had an entry (no partition keys here) keep their files; the others were rebuilt.
changed_indexes() {
  join -v1 <(tr ' ' '\n' <<<"$indexes_before" | sort) <(tr ' ' '\n' <<<"$(index_filenodes)" | sort) | cut -d= -f1 | sort | tr '\n' ' '
}
expect_eq "rotation gave new files to the indexes with entries, and only to those" "$(changed_indexes)" \
  "jobs_group jobs_leased jobs_pkey jobs_unique_waiting jobs_waiting "
jb_sql "CREATE EXTENSION amcheck" >/dev/null
index_check_sql="SELECT count(*) FROM pg_index i, LATERAL bt_index_check(i.indexrelid, true)
                   WHERE i.indrelid IN ('jobbuf.jobs'::regclass, (SELECT reltoastrelid FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass))"
expect_eq "every index of jobbuf.jobs and of its TOAST table matches the heap (amcheck, heapallindexed)" \
  "$(jb_sql "$index_check_sql")" 8
primary_lsn=$(jb_sql "SELECT pg_current_wal_lsn()")
jb_wait_until "[ \"\$(replica_sql \"SELECT pg_last_wal_replay_lsn() >= '$primary_lsn'\")\" = t ]" 30 \
  || fail "the standby did not replay the rotations within 30 s"
expect_eq "the standby replayed the rotations: the same rows" "$(replica_sql "$kept_rows_sql")" "$(jb_sql "$kept_rows_sql")"
expect_eq "... and its indexes match its heap" "$(replica_sql "$index_check_sql")" 8
rotations=$(( $(wc -w <<<"$filenodes") - 1 ))
staged_bytes=$((ROUNDS * PER_ROUND * (${#PAD} + 60)))
say "$((ROUNDS * PER_ROUND)) jobs (~$((staged_bytes / 1048576)) MB of rows) delivered under the held snapshot: $rotations rotations, largest heap $((max_heap / 1048576)) MB, largest with indexes $((max_total / 1048576)) MB"
check "the delivered rows are several times the bound (the bound means something)" test "$staged_bytes" -gt $((3 * HELD_BOUND_BYTES))
check "jobbuf.jobs was rotated more than once" test "$rotations" -ge 2
expect_le "largest heap of jobbuf.jobs stays near 1 MB" "$max_heap" "$HELD_BOUND_BYTES"
expect_le "largest size with indexes stays bounded" "$max_total" $((2 * HELD_BOUND_BYTES))
expect_eq "the held transaction still holds the same horizon" \
  "$(jb_sql "SELECT backend_xmin FROM pg_stat_activity WHERE pid = $(jb_sql "SELECT pid FROM pg_stat_activity WHERE state = 'idle in transaction'")")" "$held_xmin"

# Many batches: the worker updates the queue's counters row once per batch, which under the held
# snapshot leaves a row version each; jobbuf.queue_stats is rotated too (from 128 pages, about
# 12,000 versions), counters intact. Single-job batches in chunks of 4,000 until it is.
stats_filenode=$(jb_sql "SELECT pg_relation_filenode('jobbuf.queue_stats')")
stats_rotated() { [ "$(jb_sql "SELECT pg_relation_filenode('jobbuf.queue_stats')")" != "$stats_filenode" ]; }
# jobbuf.delivery_counter too: its one row gets a version per batch (from 16 pages, about 2,700).
counter_filenode=$(jb_sql "SELECT pg_relation_filenode('jobbuf.delivery_counter')") counter_max=0
counter_rotated() { [ "$(jb_sql "SELECT pg_relation_filenode('jobbuf.delivery_counter')")" != "$counter_filenode" ]; }
echo "SELECT jobbuf_stage('small', '{\"one\": 1}'::jsonb);" >"$JB_RUN/one.sql"
jb_sql "SELECT jobbuf_create_queue('small', 'list')" >/dev/null
set_and_reload jobbuf.batch_size 1 || fail "jobbuf.batch_size = 1 not shown"   # one batch per job
small=0 batches0=$(jb_sql "SELECT batches FROM jobbuf_worker_status()") stats_max=0
while [ "$small" -lt 40000 ] && ! stats_rotated; do
  pgbench -n -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -c 2 -t 2000 -f "$JB_RUN/one.sql" "$JB_DB" >"$JB_RUN/pgbench.out" 2>&1 \
    || { fail "pgbench: $(tail -n 3 "$JB_RUN/pgbench.out")"; break; }
  small=$((small + 4000))
  expect_list_reaches jobbuf:small "$small" 60 "$small jobs delivered one per batch"
  s=$(jb_sql "SELECT pg_relation_size('jobbuf.queue_stats')"); [ "$s" -gt "$stats_max" ] && stats_max=$s
  s=$(jb_sql "SELECT pg_relation_size('jobbuf.delivery_counter')"); [ "$s" -gt "$counter_max" ] && counter_max=$s
  jb_wait_until stats_rotated 1 || true
done
reset_and_reload jobbuf.batch_size 1000
say "jobbuf.queue_stats: $(( $(jb_sql "SELECT batches FROM jobbuf_worker_status()") - batches0 )) counter updates for $small jobs, largest $stats_max bytes"
check "jobbuf.queue_stats was rotated" stats_rotated
expect_le "jobbuf.queue_stats stays small" "$stats_max" $((256 * 8192))
say "jobbuf.delivery_counter: largest $counter_max bytes"
check "jobbuf.delivery_counter was rotated" counter_rotated
expect_le "jobbuf.delivery_counter stays small" "$counter_max" $((32 * 8192))
expect_eq "... its one row intact, at the last batch's number" \
  "$(jb_sql "SELECT count(*) || ' ' || (max(delivered_unit) >= $small) FROM jobbuf.delivery_counter")" "1 true"
counters_sql="SELECT string_agg(queue || '=' || delivered_total, ' ' ORDER BY queue) FROM jobbuf.queue_stats WHERE queue IN ('flow', 'small')"
jb_wait_until "[ \"\$(jb_sql \"$counters_sql\")\" = 'flow=$((ROUNDS * PER_ROUND + 12000)) small=$small' ]" 10  # the last batch commits after its push
expect_eq "delivery counters survive its rotation" \
  "$(jb_sql "$counters_sql")" \
  "flow=$((ROUNDS * PER_ROUND + 12000)) small=$small"

expect_eq "scheduled, claimed, unique, backoff and held jobs keep ids and every column" "$(jb_sql "$kept_rows_sql")" "$kept_before"
expect_eq "the unique key still refuses a duplicate" "$(jb_sql "SELECT jobbuf_stage('parked', '{}'::jsonb, NULL, 'only-once') IS NULL")" t
expect_eq "an ORM's INSERT ... ON CONFLICT DO NOTHING still skips the duplicate" \
  "$(jb_sql "INSERT INTO jobbuf.jobs (queue, payload, unique_key) VALUES ('parked', '{}', 'only-once') ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND group_id IS NULL DO NOTHING RETURNING id" | wc -l)" 0
tx_run "SELECT count(*) FROM jobbuf.jobs WHERE id IN ($kept_ids) \\g $TX_FIFO.out"
expect_eq "the old snapshot sees the jobs put back" "$(cat "$TX_FIFO.out")" 6
tx_close ROLLBACK
expect_eq "the claimed group completes after rotation" "$(jb_sql "SELECT jobbuf_complete('$group')")" 1

# pg_dump's lock: ACCESS SHARE held from the copy of the rows to the end of the dump. Rotation
# tries and never queues; producers
# (lock_timeout 10 s) are never stuck behind it. Autovacuum stays off the table until the
# rotation is seen: once the lock and its horizon are gone, vacuum could otherwise reclaim the
# delivered rows first (its truncation keeps the file), and nothing would be left to rotate.
jb_sql "ALTER TABLE jobbuf.jobs SET (autovacuum_enabled = off)" >/dev/null
tx_open
tx_run "BEGIN ISOLATION LEVEL REPEATABLE READ; LOCK TABLE jobbuf.jobs IN ACCESS SHARE MODE;"
locked_filenode=$(filenode)
stage_rounds $((ROUNDS + 1)) $((ROUNDS + 8))
expect_eq "no rotation while ACCESS SHARE is held" "$(filenode)" "$locked_filenode"
grown=$(heap_bytes)
check "the table grew past the rotation threshold meanwhile" test "$grown" -gt $((8 * 1024 * 1024))
tx_close ROLLBACK
if jb_wait_until "[ \"\$(filenode)\" != $locked_filenode ]" "$ROTATION_WAIT"; then
  pass "rotated once the lock was released"
else
  fail "not rotated within $ROTATION_WAIT s of the lock's release (heap $(heap_bytes) bytes)"
fi
expect_le "heap back under the bound" "$(heap_bytes)" "$BOUND_BYTES"
jb_sql "ALTER TABLE jobbuf.jobs RESET (autovacuum_enabled)" >/dev/null

# A live backlog above the cap (10,000 rows: producers would wait for their copy) is not rotated,
# however many dead rows surround it; once it drains, rotation reclaims the table.
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('backlog', 'list');
SELECT jobbuf_pause('backlog');
SELECT count(*) FROM jobbuf_stage('backlog', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 12000) n));
SQL
tx_open
tx_run "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM analytics;"
backlog_filenode=$(filenode)
stage_rounds $((ROUNDS + 9)) $((ROUNDS + 16))
expect_eq "a live backlog above the cap is not rotated" "$(filenode)" "$backlog_filenode"
check "though the table grew past the rotation threshold" test "$(heap_bytes)" -gt $((8 * 1024 * 1024))
jb_sql "SELECT jobbuf_resume('backlog')" >/dev/null
expect_list_reaches jobbuf:backlog 12000 30 "the backlog is delivered once resumed"
if jb_wait_until "[ \"\$(filenode)\" != $backlog_filenode ]" "$ROTATION_WAIT"; then
  pass "rotated once the backlog drained, the snapshot still held"
else
  fail "not rotated within $ROTATION_WAIT s of the backlog's delivery (heap $(heap_bytes) bytes)"
fi
tx_close ROLLBACK
expect_eq "every job delivered once" "$(jb_redis LRANGE jobbuf:flow 0 -1 | sort -u | wc -l)" $(((ROUNDS + 16) * PER_ROUND))
expect_eq "only the scheduled, unique, backoff and held jobs remain" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 5

# docs/storage.md's monitoring queries run as written.
awk '/^```sql/ { f = 1; next } /^```/ { f = 0 } f' "$E2E_ROOT/docs/storage.md" >"$JB_RUN/storage_docs.sql"
check "docs/storage.md has its monitoring queries" test "$(grep -c '^SELECT' "$JB_RUN/storage_docs.sql")" -ge 3
jb_psql -q -o /dev/null -f "$JB_RUN/storage_docs.sql" && pass "docs/storage.md's sql blocks run" || fail "docs/storage.md's sql blocks fail"
e2e_done

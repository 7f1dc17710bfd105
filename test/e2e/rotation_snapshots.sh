#!/usr/bin/env bash
# Storage rotation is invisible to snapshots and to logical decoding (SPEC 1.3, "Storage rotation
# keeps PostgreSQL's promises"; docs/storage.md, "What an old snapshot sees"). Rows put back keep
# their xmin (frozen only when visible to every snapshot), so:
#  * a REPEATABLE READ consumer whose snapshot predates a commit (order 42 and its job) neither
#    sees the order nor claims the job, after several rotations; a job committed before its
#    snapshot it still claims;
#  * a SERIALIZABLE consumer does not claim the later job either, and the write skew a committed
#    serializable writer made with it (the writer read the queue's jobs the consumer claims, the
#    consumer read the orders the writer inserted) still ends in a serialization failure, its
#    SIREAD locks moved by the rotations;
#  * pg_dump --snapshot with a snapshot exported before the commit contains neither;
#  * every job is delivered or claimed exactly once afterwards, the job put back keeps its xmin;
#  * with wal_level = logical, a test_decoding slot created before the rotations shows no
#    TRUNCATE and no INSERT of a row the rotations put back.
# Rotations are forced with jobbuf.rotation_min_size (no horizon held for 15 s needed).
source "$(dirname "$0")/tools/lib.sh"

ROTATIONS=3
PER_ROUND=3000
PAD=$(printf 'x%.0s' $(seq 1 200))

e2e_start "wal_level = logical"
export PGOPTIONS="${PGOPTIONS:-} -c lock_timeout=10s"

# Sessions that stay open while others work: sess_open NAME, sess_sql NAME SQL (one statement,
# no trailing semicolon; prints its rows; its errors go to $JB_RUN/sess_NAME.log), sess_close NAME.
declare -A SESS_FD SESS_PID
sess_open() {
  local fifo="$JB_RUN/sess_$1" fd
  mkfifo "$fifo"
  jb_psql -qtAX -o /dev/null -v ON_ERROR_STOP=0 <"$fifo" >"$fifo.log" 2>&1 &
  SESS_PID[$1]=$!
  exec {fd}>"$fifo"
  SESS_FD[$1]=$fd
}
sess_sql() {
  local out
  out=$(mktemp -u "$JB_RUN/sess_$1.XXXXXX")  # callers use $(...): no counter survives the subshell
  ( trap '' PIPE; printf '%s \\g %s\n\\o %s.done\n\\qecho done\n\\o /dev/null\n' "${2%;}" "$out" "$out" >&"${SESS_FD[$1]}" ) 2>/dev/null
  jb_wait_until "[ -s '$out.done' ]" 30 || {
    echo "  session $1 did not answer: $2 ($(tail -n 3 "$JB_RUN/sess_$1.log"); waits: $(jb_sql "SELECT string_agg(wait_event_type || '/' || wait_event || ' ' || left(query, 40), '; ') FROM pg_stat_activity WHERE wait_event_type IN ('Lock', 'LWLock', 'IPC')"))" >&2
    return 1
  }
  cat "$out" 2>/dev/null || true
}
sess_errors() { cat "$JB_RUN/sess_$1.log"; }
sess_close() {
  ( trap '' PIPE; printf 'ROLLBACK;\n\\q\n' >&"${SESS_FD[$1]}" ) 2>/dev/null
  exec {SESS_FD[$1]}>&-
  wait "${SESS_PID[$1]}"
}

jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('rr', 'none');
SELECT jobbuf_create_queue('ser', 'none');
SELECT jobbuf_create_queue('flow', 'list');
CREATE TABLE orders (id int PRIMARY KEY);
ALTER TABLE jobbuf.jobs SET (autovacuum_enabled = off);
SQL
# Committed before every snapshot below: order 1 (its job in rr) and order 2 (its job in ser).
jb_psql -q -o /dev/null -c "BEGIN" -c "INSERT INTO orders VALUES (1)" \
  -c "SELECT jobbuf_stage('rr', '{\"order\": 1}')" -c "COMMIT"
jb_psql -q -o /dev/null -c "BEGIN" -c "INSERT INTO orders VALUES (2)" \
  -c "SELECT jobbuf_stage('ser', '{\"order\": 2}')" -c "COMMIT"
jb_sql "SELECT 1 FROM pg_create_logical_replication_slot('rotation_check', 'test_decoding')" >/dev/null ||
  fail "a test_decoding slot is created"

# Order 42 is inserted and its job staged in both consumed queues by a SERIALIZABLE writer that
# first reads ser's jobs (the one the SERIALIZABLE consumer will claim). It commits only after the
# snapshots below are taken: its jobs' run_at (its start) is before their now(), so only their
# snapshot keeps them from claiming the jobs.
sess_open writer
sess_sql writer "BEGIN ISOLATION LEVEL SERIALIZABLE" >/dev/null
expect_eq "the writer reads ser's jobs" "$(sess_sql writer "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'ser'")" 1
sess_sql writer "INSERT INTO orders VALUES (42)" >/dev/null
sess_sql writer "SELECT jobbuf_stage('rr', '{\"order\": 42}')" >/dev/null
sess_sql writer "SELECT jobbuf_stage('ser', '{\"order\": 42}')" >/dev/null
writer_xid=$(sess_sql writer "SELECT txid_current()")

# The snapshots, taken before order 42 commits. None of them touches jobbuf.jobs (its lock would
# keep the rotation away until the transaction ends).
sess_open rr
sess_sql rr "BEGIN ISOLATION LEVEL REPEATABLE READ" >/dev/null
expect_eq "the REPEATABLE READ consumer's snapshot sees orders 1 and 2" "$(sess_sql rr "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders")" 1,2
sess_open ser
sess_sql ser "BEGIN ISOLATION LEVEL SERIALIZABLE" >/dev/null
expect_eq "the SERIALIZABLE consumer reads orders 42 and 43: none yet" \
  "$(sess_sql ser "SELECT count(*) FROM orders WHERE id IN (42, 43)")" 0
sess_open exporter
sess_sql exporter "BEGIN ISOLATION LEVEL REPEATABLE READ" >/dev/null
snapshot=$(sess_sql exporter "SELECT pg_export_snapshot()")
check "a snapshot is exported" test -n "$snapshot"
sess_sql writer "COMMIT" >/dev/null
expect_eq "order 42 and its jobs commit" "$(sess_errors writer | grep -c ERROR)" 0
sess_close writer
expect_eq "order 42 is committed" "$(jb_sql "SELECT count(*) FROM orders WHERE id = 42")" 1
kept_ids=$(jb_sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM jobbuf.jobs WHERE queue IN ('rr', 'ser')")
expect_eq "four consumed jobs wait" "$(tr ',' '\n' <<<"$kept_ids" | wc -l)" 4
xmin_before=$(jb_sql "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM jobbuf.jobs WHERE payload->>'order' = '42'")

# Forced rotations: due from 64 kB; each round delivers ~0.8 MB of jobs that the snapshots keep
# from being pruned, then waits for the table's new file.
set_and_reload jobbuf.rotation_min_size 64kB 64kB || fail "jobbuf.rotation_min_size is set"
filenode() { jb_sql "SELECT pg_relation_filenode('jobbuf.jobs')"; }
staged=0
for round in $(seq 1 $ROTATIONS); do
  before=$(filenode)
  jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('n', $staged + n, 'pad', '$PAD') FROM generate_series(1, $PER_ROUND) n))" >/dev/null ||
    fail "round $round: staging"
  staged=$((staged + PER_ROUND))
  expect_list_reaches jobbuf:flow "$staged" 60 "round $round: $staged jobs delivered"
  if jb_wait_until "[ \"\$(filenode)\" != $before ]" 15; then
    pass "round $round: jobbuf.jobs rotated (filenode $before -> $(filenode))"
  else
    fail "round $round: no rotation within 15 s (heap $(jb_sql "SELECT pg_relation_size('jobbuf.jobs')") bytes)"
  fi
done
reset_and_reload jobbuf.rotation_min_size -1 || fail "jobbuf.rotation_min_size is reset"
expect_eq "the job put back keeps its xmin" \
  "$(jb_sql "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM jobbuf.jobs WHERE payload->>'order' = '42'")" "$xmin_before"
expect_eq "... the writer's" "$(jb_sql "SELECT DISTINCT xmin::text FROM jobbuf.jobs WHERE payload->>'order' = '42'")" \
  "$(jb_sql "SELECT ($writer_xid % 4294967296)::text")"

# pg_dump with the snapshot exported before the commit.
pg_dump -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres --data-only --snapshot="$snapshot" "$JB_DB" \
  >"$JB_RUN/dump.sql" 2>"$JB_RUN/dump.err" || fail "pg_dump --snapshot: $(head -n 3 "$JB_RUN/dump.err")"
orders_dumped=$(awk '/^COPY public.orders /{on=1; next} on && /^\\\.$/{on=0} on' "$JB_RUN/dump.sql" | sort -n | paste -sd,)
expect_eq "pg_dump --snapshot: the orders of its snapshot" "$orders_dumped" "1,2"
expect_eq "pg_dump --snapshot: the jobs of its snapshot, not order 42's" \
  "$(grep -o '{"order": [0-9]*}' "$JB_RUN/dump.sql" | sort | paste -sd,)" '{"order": 1},{"order": 2}'

# The REPEATABLE READ consumer: no order 42, no job of order 42, its earlier job claimable.
expect_eq "REPEATABLE READ: still no order 42" "$(sess_sql rr "SELECT count(*) FROM orders WHERE id = 42")" 0
rr_claimed=$(sess_sql rr "SELECT string_agg(payload::text || '@' || group_id, ',' ORDER BY id) FROM jobbuf_claim('rr', 10)")
expect_eq "REPEATABLE READ: jobbuf_claim returns the job committed before its snapshot, not order 42's" \
  "$(sed 's/@[^,]*//g' <<<"$rr_claimed")" '{"order": 1}'
sess_sql rr "SELECT jobbuf_complete('${rr_claimed##*@}')" >/dev/null
sess_sql rr "COMMIT" >/dev/null
expect_eq "REPEATABLE READ: its claim and complete commit" "$(sess_errors rr | grep -c ERROR)" 0

# The SERIALIZABLE consumer: claiming writes the job the committed writer read (writer -> consumer)
# after it read the orders the writer inserted (consumer -> writer): a serialization failure.
ser_claimed=$(sess_sql ser "SELECT string_agg(payload::text, ',' ORDER BY id) FROM jobbuf_claim('ser', 10)")
say "SERIALIZABLE: jobbuf_claim returned '${ser_claimed}'"
check "SERIALIZABLE: jobbuf_claim does not return order 42's job" test "$ser_claimed" != '{"order": 2},{"order": 42}' -a "$ser_claimed" != '{"order": 42}'
sess_sql ser "COMMIT" >/dev/null
expect_match "SERIALIZABLE: the write skew ends in a serialization failure" "$(sess_errors ser)" "could not serialize access"
sess_close ser
sess_close rr
sess_close exporter

# Afterwards, every job exactly once: rr and ser claimed (and completed) by a new session, the
# list's jobs delivered once.
rest_rr=$(jb_sql "SELECT string_agg(payload::text, ',' ORDER BY id) FROM jobbuf_claim('rr', 10)")
expect_eq "afterwards rr gives order 42's job, once" "$rest_rr" '{"order": 42}'
rest_ser=$(jb_sql "SELECT string_agg(payload::text, ',' ORDER BY id) FROM jobbuf_claim('ser', 10)")
expect_eq "afterwards ser gives order 2's and order 42's jobs, once" "$rest_ser" '{"order": 2},{"order": 42}'
expect_eq "every list job delivered once" "$(jb_redis LRANGE jobbuf:flow 0 -1 | sort -u | wc -l)" "$staged"
expect_eq "... and no more" "$(jb_redis LLEN jobbuf:flow)" "$staged"

# Logical decoding: the rotations wrote nothing it decodes as a change of jobbuf.jobs.
jb_sql "SELECT count(*) FILTER (WHERE data ~ '^table jobbuf\.[a-z_]+: TRUNCATE'),
               count(*) FILTER (WHERE data ~ '^table jobbuf\.jobs: INSERT'),
               count(DISTINCT substring(data FROM '^table jobbuf\.jobs: INSERT: id\[bigint\]:([0-9]+)')),
               count(*) FILTER (WHERE substring(data FROM '^table jobbuf\.jobs: INSERT: id\[bigint\]:([0-9]+)') = ANY (string_to_array('$kept_ids', ',')))
        FROM pg_logical_slot_get_changes('rotation_check', NULL, NULL, 'skip-empty-xacts', '1')" \
  >"$JB_RUN/decoded" 2>&1 || fail "pg_logical_slot_get_changes: $(cat "$JB_RUN/decoded")"
IFS='|' read -r truncates inserts distinct_ids kept_inserts <"$JB_RUN/decoded"
say "decoded: $inserts inserts into jobbuf.jobs ($distinct_ids ids), $truncates truncates"
expect_eq "logical decoding: no TRUNCATE of a jobbuf table" "$truncates" 0
expect_eq "logical decoding: no job inserted twice" "$inserts" "$distinct_ids"
expect_eq "logical decoding: the jobs put back were inserted once, when staged (order 42's two jobs: after the slot)" "$kept_inserts" 2
expect_eq "logical decoding: one insert per job staged after the slot" "$inserts" $((staged + 2))
jb_sql "SELECT pg_drop_replication_slot('rotation_check')" >/dev/null
e2e_done

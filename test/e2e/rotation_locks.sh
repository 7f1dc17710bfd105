#!/usr/bin/env bash
# Storage rotation never makes producers wait behind a lock it waits for (docs/storage.md, "How
# rotation works", step 2): holding jobbuf.jobs' ACCESS EXCLUSIVE, a rotation that queued for the
# lock of its TOAST table (a VACUUM of it, autovacuum) or for a catalog row would stall every
# producer for as long as that lasts. Rotation is made due without holding a horizon for 15 s
# (there is no setting to force one): 10 MB of rows delivered while the conflicting transaction,
# which also holds a transaction id, keeps them from being pruned (due from 8 MB, mostly dead).
#  * a transaction holds a lock on the TOAST table of jobbuf.jobs for 10 s (ACCESS SHARE from
#    reading it: LOCK TABLE refuses a TOAST table, and any lock conflicts with ACCESS EXCLUSIVE)
#    while rotation is due and producers stage with statement_timeout = 2s: none fails, no
#    rotation meanwhile, one soon after the lock is released;
#  * the same with a row of pg_class locked (SELECT ... FOR UPDATE on jobbuf.jobs' row), which
#    no relation lock foresees: the rotation gives up at its lock_timeout (100 ms) and tries
#    later, without a WARNING per attempt;
#  * no job is lost or delivered twice, and a scheduled job stored out of line keeps every column.
source "$(dirname "$0")/tools/lib.sh"

PAD=$(printf 'x%.0s' $(seq 1 200))
HOLD_SECONDS=10

e2e_start
# Every session gives up on a lock after 10 s: a producer queued behind a rotation that waits (the
# behaviour this script guards against) must show as a failure, not hang the script.
export PGOPTIONS="${PGOPTIONS:-} -c lock_timeout=10s"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('flow', 'list');
ALTER TABLE jobbuf.jobs SET (autovacuum_enabled = off, toast.autovacuum_enabled = off);
-- Scheduled, with a payload stored out of line in the TOAST table (500 kB that do not compress).
SELECT jobbuf_stage('flow', jsonb_build_object('large', (SELECT string_agg(md5(n::text), '') FROM generate_series(1, 16000) n)),
                    now() + interval '1 day');
SQL
kept_rows_sql="SELECT string_agg(md5(row_to_json(j)::text), ' ' ORDER BY id) FROM jobbuf.jobs j"
kept_before=$(jb_sql "$kept_rows_sql")
toast=$(jb_sql "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass")
check "jobbuf.jobs has a TOAST table in use" test "$(jb_sql "SELECT pg_relation_size('$toast')")" -gt 0
filenode() { jb_sql "SELECT pg_relation_filenode('jobbuf.jobs')"; }
heap_bytes() { jb_sql "SELECT pg_relation_size('jobbuf.jobs')"; }

staged=0
# make_due: stages and delivers 40,000 jobs (~10 MB of rows) in one transaction each 10,000.
make_due() {
  local r
  for r in 1 2 3 4; do
    jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('due', $staged + n, 'pad', '$PAD') FROM generate_series(1, 10000) n))" >/dev/null \
      || { fail "staging 10,000 jobs"; return 1; }
    staged=$((staged + 10000))
  done
  expect_list_reaches jobbuf:flow "$staged" 60 "$staged jobs delivered"
}

# produce SECONDS: stages 200 jobs at a time for SECONDS, each call with statement_timeout = 2s;
# sets produced_failures and produced_max_ms.
produce() {
  local until_ms=$(( $(now_ms) + $1 * 1000 )) start took
  produced_failures=0 produced_max_ms=0
  while [ "$(now_ms)" -lt "$until_ms" ]; do
    start=$(now_ms)
    if PGOPTIONS="$PGOPTIONS -c statement_timeout=2s" jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('held', $staged + n, 'pad', '$PAD') FROM generate_series(1, 200) n))" \
        >/dev/null 2>>"$JB_RUN/producer.err"; then
      staged=$((staged + 200))
    else
      produced_failures=$((produced_failures + 1))
    fi
    took=$(( $(now_ms) - start ))
    [ "$took" -gt "$produced_max_ms" ] && produced_max_ms=$took
    sleep 0.05
  done
}

# hold_and_produce WHAT SQL GAVE_UP: a transaction runs SQL and keeps its locks while the rotation becomes
# due and then HOLD_SECONDS more while producers stage; then it ends, and the rotation follows.
# It also takes a transaction id: without a horizon held, page pruning lets the heap stay below
# 8 MB however many jobs pass. GAVE_UP: the log lines of rotations that ran into lock_timeout.
hold_and_produce() {
  local what=$1 before mark
  before=$(filenode)
  mark=$(log_mark)
  tx_open
  tx_run "BEGIN; SELECT txid_current(); $2" || fail "$what: the conflicting transaction runs"
  say "$what: the transaction holds $(jb_sql "SELECT string_agg(l.mode || ' on ' || coalesce(l.relation::regclass::text, l.locktype), ', ' ORDER BY l.relation::regclass::text)
                                               FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                                               WHERE a.state = 'idle in transaction' AND l.granted AND l.locktype = 'relation'")"
  make_due
  check "$what: the heap is past 8 MB, rotation due" test "$(heap_bytes)" -gt $((8 * 1024 * 1024))
  produce "$HOLD_SECONDS"
  say "$what: producers' slowest jobbuf_stage took $produced_max_ms ms"
  expect_eq "$what: no producer's jobbuf_stage waited 2 s behind the rotation" "$produced_failures" 0
  expect_eq "$what: no rotation while the lock is held" "$(filenode)" "$before"
  expect_eq "$what: no WARNING per attempt" "$(log_since "$mark" | grep -c 'WARNING')" 0
  expect_eq "$what: rotations that gave up at lock_timeout, logged once" \
    "$(log_since "$mark" | grep -c 'storage rotation of jobbuf.jobs gave up waiting for a lock')" "$3"
  tx_close ROLLBACK
  if jb_wait_until "[ \"\$(filenode)\" != $before ]" 10; then
    pass "$what: rotated once the lock was released"
  else
    fail "$what: not rotated within 10 s of the lock's release (heap $(heap_bytes) bytes)"
  fi
  expect_list_reaches jobbuf:flow "$staged" 30 "$what: every job staged meanwhile delivered"
}

hold_and_produce "TOAST table locked" "SELECT count(*) FROM $toast;" 0
hold_and_produce "catalog row locked" "SELECT 1 FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass FOR UPDATE;" 1

expect_eq "every job delivered once" "$(jb_redis LRANGE jobbuf:flow 0 -1 | sort -u | wc -l)" "$staged"
expect_eq "the scheduled job stored out of line keeps every column" "$(jb_sql "$kept_rows_sql")" "$kept_before"
if [ -s "$JB_RUN/producer.err" ]; then say "producer errors: $(sort "$JB_RUN/producer.err" | uniq -c | head -n 5)"; fi
e2e_done

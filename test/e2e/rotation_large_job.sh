#!/usr/bin/env bash
# Storage rotation never detoasts under its lock (SPEC 1.3, "Storage rotation keeps PostgreSQL's
# promises", Size; docs/internals/rotation.md, step 3). A job of 40 MB that does not compress,
# scheduled for tomorrow, lives in the TOAST table while thousands of small jobs pass:
#  * rotations go on (each gives the heap a new file: 1.2 copied the job's 40 MB inline under the
#    lock, and above 32 MB never rotated at all), and the TOAST table keeps its file: the job's
#    value stays where it is, read by nobody;
#  * the job keeps its payload and its xmin, every small job is delivered once;
#  * once the large job is gone, the next rotation gives the TOAST table a new file too.
# Rotations are forced with jobbuf.rotation_min_size.
source "$(dirname "$0")/tools/lib.sh"

ROUNDS=3
PER_ROUND=3000
PAD=$(printf 'x%.0s' $(seq 1 200))

e2e_start
export PGOPTIONS="${PGOPTIONS:-} -c lock_timeout=10s"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('flow', 'list');
-- 40 MB of hex digits that pglz cannot shrink below its threshold: random md5 strings.
SELECT jobbuf_stage('flow', jsonb_build_object('large', (SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 1310720))),
                    now() + interval '1 day');
SQL
large_sql="SELECT md5(payload::text) || ' ' || xmin FROM jobbuf.jobs WHERE payload ? 'large'"
large_before=$(jb_sql "$large_sql")
toast=$(jb_sql "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass")
toast_bytes=$(jb_sql "SELECT pg_relation_size('$toast')")
check "the large job is stored out of line (TOAST table $toast_bytes bytes)" test "$toast_bytes" -gt $((30 * 1024 * 1024))
filenode() { jb_sql "SELECT pg_relation_filenode('${1:-jobbuf.jobs}')"; }
toast_before=$(filenode "$toast")

set_and_reload jobbuf.rotation_min_size 64kB 64kB || fail "jobbuf.rotation_min_size is set"
staged=0
# round N: stages and delivers PER_ROUND small jobs, then waits for the heap's new file.
round() {
  local before
  before=$(filenode)
  jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('n', $staged + n, 'pad', '$PAD') FROM generate_series(1, $PER_ROUND) n))" >/dev/null ||
    fail "round $1: staging"
  staged=$((staged + PER_ROUND))
  expect_list_reaches jobbuf:flow "$staged" 60 "round $1: $staged jobs delivered"
  if jb_wait_until "[ \"\$(filenode)\" != $before ]" 15; then
    pass "round $1: jobbuf.jobs rotated (heap filenode $before -> $(filenode))"
  else
    fail "round $1: no rotation within 15 s (heap $(jb_sql "SELECT pg_relation_size('jobbuf.jobs')") bytes)"
  fi
}
for r in $(seq 1 $ROUNDS); do round "$r"; done
expect_eq "the TOAST table kept its file through $ROUNDS rotations" "$(filenode "$toast")" "$toast_before"
expect_eq "the large job keeps its payload and its xmin" "$(jb_sql "$large_sql")" "$large_before"

jb_sql "DELETE FROM jobbuf.jobs WHERE payload ? 'large'" >/dev/null
round $((ROUNDS + 1))
check "with the large job gone, the TOAST table got a new file too" test "$(filenode "$toast")" != "$toast_before"
reset_and_reload jobbuf.rotation_min_size -1 || fail "jobbuf.rotation_min_size is reset"
expect_all_delivered_once jobbuf:flow "$staged"
e2e_done

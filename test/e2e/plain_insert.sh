#!/usr/bin/env bash
# A plain INSERT INTO jobbuf.jobs (what an ORM does) is staging: validated like jobbuf_stage, it
# wakes the worker at commit (poll_interval is 30 s here) and is delivered the same way; a
# rolled-back INSERT is not delivered.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'"
jb_sql "SELECT jobbuf_create_queue('orm', 'list')" >/dev/null
worker_idle || fail "the worker did not go back to sleep after the queue was created"

t0=$(now_ms)
jb_sql "INSERT INTO jobbuf.jobs (queue, payload) VALUES ('orm', '{\"n\": 1, \"via\": \"insert\"}')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:orm)" -ge 1 ]' 15; then
  pass "single-row INSERT delivered $(( $(now_ms) - t0 )) ms after its commit"
else
  fail "single-row INSERT not delivered within 15 s (poll_interval is 30 s: the commit did not wake the worker)"
fi

# ORM style: every column named, NULLs for the defaults; a multi-row insert; a rolled-back one.
jb_psql -q -o /dev/null <<'SQL'
INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key, staged_at)
VALUES ('orm', '{"n": 2, "via": "orm"}', NULL, NULL, NULL, NULL);
INSERT INTO jobbuf.jobs (queue, payload) SELECT 'orm', jsonb_build_object('n', n) FROM generate_series(3, 52) n;
BEGIN;
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('orm', '{"n": 999, "rolled_back": true}');
ROLLBACK;
SELECT jobbuf_stage('orm', '{"n": 53, "via": "stage"}'::jsonb);
SQL
jb_wait_until '[ "$(jb_redis LLEN jobbuf:orm)" -ge 53 ]' 15
wait_staged 0 || fail "the worker did not commit the INSERTed jobs"   # it pushes first, then commits
expect_eq "jobs in Redis" "$(jb_redis LLEN jobbuf:orm)" 53
expect_eq "delivered in staging order, rolled-back INSERT absent" \
  "$(jb_redis LRANGE jobbuf:orm 0 -1 | ruby -rjson -ne 'print JSON.parse($_)["n"], " "')" "$(seq -s ' ' 1 53) "
expect_eq "INSERT and jobbuf_stage payloads arrive in the same form" \
  "$(jb_redis LINDEX jobbuf:orm 0) $(jb_redis LINDEX jobbuf:orm -1)" '{"n": 1, "via": "insert"} {"n": 53, "via": "stage"}'
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "delivered_total counts INSERTed jobs" "$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'orm'")" 53

# Validation is the same as jobbuf_stage's: unknown queue and NULL payload are refused.
out=$(jb_sql "INSERT INTO jobbuf.jobs (queue, payload) VALUES ('nope', '{}')" 2>&1)
expect_match "INSERT into an unknown queue is refused" "$out" 'unknown queue "nope"'
out=$(jb_sql "INSERT INTO jobbuf.jobs (queue, payload) VALUES ('orm', NULL)" 2>&1)
expect_match "INSERT of a NULL payload is refused" "$out" 'must not be NULL'

e2e_done

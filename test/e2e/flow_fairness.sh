#!/usr/bin/env bash
# Fairness across queues (SPEC 1.3, "Flow control at the drain": Fairness; docs/flow.md), asserted
# by position, not by a clock: a backlog of a million jobs in queue `big` and one job in queue
# `small` are staged while the worker is disabled; both queues deliver into one stream key, so
# the stream's order is the order of delivery. Once the worker is enabled, the lone job must be
# among the first 2 × batch_size entries: one batch of the backlog may go first, not the backlog.
# Then weights: queues `heavy` (weight 3) and `light` (weight 1), 20,000 jobs each, into another
# stream key: a pass gives heavy three batches to light's one, so the first 8 batches hold 6 of
# heavy's and 2 of light's (one batch of slack either way for where the first pass starts).
set -uo pipefail
source "$(dirname "$0")/tools/lib.sh"

BACKLOG=${JB_FAIRNESS_BACKLOG:-1000000}
e2e_start
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('big', 'stream', '{"key": "jobbuf:mix"}');
SELECT jobbuf_create_queue('small', 'stream', '{"key": "jobbuf:mix"}');
SQL
batch=$(jb_sql "SHOW jobbuf.batch_size")
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "SELECT count(*) FROM jobbuf_stage('big', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, $BACKLOG) n))" >/dev/null ||
  fail "staging $BACKLOG jobs in big"
jb_sql "SELECT jobbuf_stage('small', '{\"lone\": true}')" >/dev/null
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
expect_lone_job_first jobbuf:mix "queue = 'small'" "$batch" $((BACKLOG + 1)) "the lone job of small was delivered"
jb_redis DEL jobbuf:mix >/dev/null

jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('heavy', 'stream', '{"key": "jobbuf:weighted", "weight": 3}');
SELECT jobbuf_create_queue('light', 'stream', '{"key": "jobbuf:weighted"}');
SQL
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
for q in heavy light; do
  jb_sql "SELECT count(*) FROM jobbuf_stage('$q', ARRAY(SELECT jsonb_build_object('q', '$q', 'n', n) FROM generate_series(1, 20000) n))" >/dev/null ||
    fail "staging 20,000 jobs in $q"
done
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 120 || fail "the weighted jobs were not delivered within 120 s"
first=$(jb_redis XRANGE jobbuf:weighted - + COUNT $((8 * batch)))
heavy=$(grep -c '"q": "heavy"' <<<"$first" || true)
light=$(grep -c '"q": "light"' <<<"$first" || true)
say "first $((8 * batch)) entries: heavy $heavy, light $light"
check "weight 3 against 1: heavy has 5 to 7 of the first 8 batches ($heavy jobs)" test "$heavy" -ge $((5 * batch)) -a "$heavy" -le $((7 * batch))
expect_eq "every weighted job delivered once" "$(jb_redis XLEN jobbuf:weighted)" 40000
refused=$(jb_psql -qtAX -c "SELECT jobbuf_create_queue('w0', 'list', '{\"weight\": 101}')" 2>&1)
expect_match "weight 101 is refused" "$refused" 'option "weight" must be an integer from 1 to 100'
e2e_done

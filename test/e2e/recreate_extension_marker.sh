#!/usr/bin/env bash
# After DROP EXTENSION + CREATE EXTENSION the job id sequence starts again at 1, while the
# delivery marker of the last batch (jobbuf:marker:<system id>:<database oid>, which names job
# ids) is still in Redis. When the worker next reconciles (any reconnect, or a restart), it must
# not take the new extension's jobs 1..n for "already delivered" and delete them unpushed.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('m', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('m', jsonb_build_object('n', n, 'life', 1)) FROM generate_series(1, 50) n" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:m)" = 50 ]' 15
expect_eq "first life: 50 delivered" "$(jb_redis LLEN jobbuf:m)" 50
marker_key=$(jb_redis --scan --pattern 'jobbuf:marker:*' | head -n 1)
say "marker $marker_key = $(jb_redis GET "$marker_key" | cut -c1-60)"

jb_psql -q -o /dev/null <<'SQL'
DROP EXTENSION jobbuf;
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('m', 'list');
SELECT jobbuf_pause('m');
SELECT jobbuf_stage('m', jsonb_build_object('n', n, 'life', 2)) FROM generate_series(1, 50) n;
SQL
expect_eq "second life: job ids start again at 1" "$(jb_sql "SELECT min(id) || '..' || max(id) FROM jobbuf.jobs")" "1..50"
mark=$(log_mark)
# Any reconnect makes the worker reconcile; cut its connection, then let it deliver.
jb_redis CLIENT KILL TYPE normal >/dev/null
sleep 0.5
jb_sql "SELECT jobbuf_resume('m')" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 15
sleep 0.5
second=$(jb_redis LRANGE jobbuf:m 0 -1 | grep -c '"life": 2' || true)
expect_eq "second life: all 50 jobs delivered (none taken for already delivered)" "$second" 50
expect_eq "no 'already in Redis' reconciliation of second-life jobs" \
  "$(count_lines 'already in Redis' "$(log_since "$mark")")" 0
log_since "$mark" | grep -E 'jobbuf:' | sed 's/^[^]]*] /    /' | head -n 5

e2e_done

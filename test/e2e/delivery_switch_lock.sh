#!/usr/bin/env bash
# jobbuf_alter_queue from delivery group to each waits for the transactions that stage jobs (they
# may stage under group) with LOCK TABLE jobbuf.jobs, and every new staging transaction queues
# behind that lock while it waits. It waits 2 s at most: with a stager left idle in transaction
# the switch fails with lock_not_available and a hint, staging into other queues goes on, and the
# caller's own lock_timeout is what it was; once the stager commits, the switch succeeds.
source "$(dirname "$0")/tools/lib.sh"

e2e_start
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('grouped', 'list', '{"delivery": "group"}');
SELECT jobbuf_create_queue('other', 'none');
SQL

tx_open
tx_run "BEGIN; SELECT jobbuf_stage('other', '{\"n\": 1}');" || fail "the stager did not start"
out=$(jb_psql -qtAX -v ON_ERROR_STOP=1 -c "SET lock_timeout = '30s'" \
  -c "SELECT jobbuf_alter_queue('grouped', '{\"delivery\": \"each\"}')" 2>&1) && status=0 || status=$?
check "with a stager idle in transaction, the switch fails instead of waiting" [ "$status" != 0 ]
expect_eq "it says why" "$(echo "$out" | grep -c 'transactions that stage jobs are still open')" 1
expect_eq "staging into another queue goes on meanwhile" \
  "$(jb_sql "SET lock_timeout = '5s'; SELECT count(*) FROM (SELECT jobbuf_stage('other', '{\"n\": 2}')) s")" 1
tx_close COMMIT
expect_eq "once the stager committed, the switch succeeds, and the caller's lock_timeout is kept" \
  "$(jb_psql -qtAX -c "SET lock_timeout = '7s'" -c "SELECT jobbuf_alter_queue('grouped', '{\"delivery\": \"each\"}')" \
     -c "SELECT options->>'delivery' FROM jobbuf.queues WHERE name = 'grouped'" -c "SHOW lock_timeout" | grep -v '^$' | tr '\n' ' ')" "each 7s "
e2e_done

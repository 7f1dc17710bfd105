#!/usr/bin/env bash
# A drain worker that started before CREATE EXTENSION jobbuf in its database is woken by the first
# commit after it: with jobbuf.poll_interval = 30s, the first committed job arrives long before
# the poll could deliver it (the worker had left its wake-up set full while it waited, and
# committers then sent no signal). The same right after DROP EXTENSION and CREATE EXTENSION again.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'"
jb_psql -q -c "DROP EXTENSION jobbuf"
mark=$(log_mark)
jb_pg_ctl restart
check "the worker starts and waits for CREATE EXTENSION" \
  jb_wait_until "log_since $mark | grep -q 'waits for CREATE EXTENSION jobbuf'" 20
started=$(log_mark)

# Arrival is checked with a bound far below the 30 s poll, so only the wake-up can meet it.
stage_and_expect_quickly() {
  local what=$1
  jb_psql -q -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('first', 'list')" >/dev/null
  local t0; t0=$(now_ms)
  jb_sql "SELECT jobbuf_stage('first', '{\"n\": 1}')" >/dev/null
  if jb_wait_until '[ "$(jb_redis LLEN jobbuf:first)" = 1 ]' 10; then
    pass "$what: the first committed job arrives without waiting for the poll ($(( $(now_ms) - t0 )) ms)"
  else
    fail "$what: the first committed job is still staged after 10 s (poll_interval 30 s)"
  fi
  # (the worker commits its delete just after the push)
  wait_staged 0
  expect_eq "$what: delivered once, nothing left staged" \
    "$(jb_redis LLEN jobbuf:first) $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" "1 0"
}

stage_and_expect_quickly "worker started before CREATE EXTENSION"
jb_redis DEL jobbuf:first >/dev/null
jb_psql -q -c "DROP EXTENSION jobbuf"
stage_and_expect_quickly "re-created extension"
expect_eq "the worker never restarted" "$(count_lines 'terminated|exited with exit code' "$(log_since "$started")")" 0
e2e_done

#!/usr/bin/env bash
# A dead job that an admin retries is delivered exactly once, even across a worker restart or a
# Redis reconnect. Redis rejects the job (its list key holds a string: WRONGTYPE), so it goes to
# jobbuf.dead; the key is fixed and the job retried (same id) while its queue is paused; then the
# worker is killed (kill -9) and restarts, or its Redis connection is killed and it reconnects:
# either way it reconciles the batch marker before anything else. The marker must not name the
# rejected job, or reconciliation deletes the retried job as "already in Redis" and it is nowhere.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('wt', 'list'), jobbuf_create_queue('other', 'list')" >/dev/null

# round "<what>" <n> <command that makes the worker reconcile>
round() {
  local what=$1 n=$2; shift 2
  local mark id
  jb_redis SET jobbuf:wt "a string, not a list" >/dev/null
  mark=$(log_mark)
  id=$(jb_sql "SELECT jobbuf_stage('wt', '{\"n\": $n}')")
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.dead WHERE id = $id\")\" = 1 ]" 10
  expect_eq "$what: Redis rejects the job, it goes to jobbuf.dead" \
    "$(jb_sql "SELECT count(*) FROM jobbuf.dead WHERE id = $id AND last_error LIKE '%WRONGTYPE%'")" 1
  jb_redis DEL jobbuf:wt >/dev/null
  jb_sql "SELECT jobbuf_pause('wt')" >/dev/null
  expect_eq "$what: jobbuf_retry_dead puts it back with its id" "$(jb_sql "SELECT jobbuf_retry_dead('wt')")" 1
  expect_eq "$what: the retried job is staged" "$(jb_sql "SELECT id FROM jobbuf.jobs")" "$id"
  "$@"
  wait_worker_running 30
  # The worker reconciles on every (re)connect, before any batch; a job of another queue makes it
  # (re)connect and deliver, so once that job is in Redis reconciliation has run. The queue of the
  # retried job is paused: the job can only have left jobbuf.jobs through reconciliation.
  jb_sql "SELECT jobbuf_stage('other', '{\"n\": $n}')" >/dev/null
  expect_list_reaches jobbuf:other "$n" 10 "$what: the worker (re)connected, reconciled and delivers again"
  expect_eq "$what: reconciliation left the retried job staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE id = $id")" 1
  jb_sql "SELECT jobbuf_resume('wt')" >/dev/null
  expect_list_reaches jobbuf:wt 1 10 "$what: the retried job is delivered"
  expect_eq "$what: exactly once, intact" "$(jb_redis LRANGE jobbuf:wt 0 -1)" "{\"n\": $n}"
  expect_eq "$what: nothing staged or dead" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(jb_sql "SELECT count(*) FROM jobbuf.dead")" "0 0"
  expect_eq "$what: no job removed as already in Redis" "$(count_lines 'already in Redis' "$(log_since "$mark")")" 0
  jb_redis DEL jobbuf:wt >/dev/null
}

kill_worker() {
  local pid
  pid=$(jb_sql "SELECT pid FROM jobbuf_worker_status()")
  kill -9 "$pid"
  jb_wait_until "! kill -0 $pid 2>/dev/null" 10
}
kill_redis_connections() {
  jb_redis CLIENT KILL TYPE normal SKIPME yes >/dev/null
}

round "worker killed and restarted" 1 kill_worker
round "Redis connection killed" 2 kill_redis_connections
e2e_done

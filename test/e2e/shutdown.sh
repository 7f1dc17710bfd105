#!/usr/bin/env bash
# SIGTERM is honoured while Redis hangs: with redis-server frozen (SIGSTOP) in the middle of a
# batch and redis_timeout at 600 s, `pg_ctl stop -m fast` completes long before the timeout.
# Afterwards nothing is lost and nothing is pushed twice: the batch that was cut off is either
# staged again or recognised in Redis by its marker when the server comes back.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.redis_timeout = '600s'"
jb_sql "SELECT jobbuf_create_queue('stop', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('stop', jsonb_build_object('n', n)) FROM generate_series(1, 100) n" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:stop)" = 100 ]' 15
expect_eq "first 100 delivered" "$(jb_redis LLEN jobbuf:stop)" 100
wait_delivered 100 || fail "the worker did not commit the first 100"

kill -STOP "$JB_REDIS_PID"
say "redis-server frozen with SIGSTOP"
jb_sql "SELECT jobbuf_stage('stop', jsonb_build_object('n', n)) FROM generate_series(101, 300) n" >/dev/null
check "the worker waits for Redis's reply to the batch" in_batch
activity=$(jb_sql "SELECT coalesce(wait_event, '') || ' / ' || coalesce(query, '') FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")
say "drain worker while Redis is frozen: $activity"
expect_eq "jobs still staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 200

t0=$(now_ms)
if timeout 60 bash -c "source '$E2E_ROOT/test/harness/servers.sh'; JB_RUN='$JB_RUN' JB_PGDATA='$JB_PGDATA'; jb_pg_ctl stop -m fast"; then
  elapsed=$(( $(now_ms) - t0 ))
  say "pg_ctl stop -m fast took $elapsed ms"
  expect_le "fast shutdown with Redis frozen completes within 30 s of a 600 s redis_timeout (ms)" "$elapsed" 30000
else
  fail "pg_ctl stop -m fast did not complete within 60 s while Redis was frozen"
fi
check "postmaster gone" [ ! -f "$JB_PGDATA/postmaster.pid" ]
expect_eq "no crash on the way down" \
  "$(count_lines 'terminated by signal|PANIC|server process .* exited with exit code [^01]' "$(cat "$JB_RUN/postgres.log")")" 0

kill -CONT "$JB_REDIS_PID"
# Redis runs whatever the worker had sent before it left, then drops the closed connection.
jb_wait_until '[ "$(jb_redis CLIENT LIST | grep -vc "cmd=client")" = 0 ]' 15 \
  || fail "Redis still holds the worker's connection: $(jb_redis CLIENT LIST)"
# The new start takes its earlier start's delivery lease once that has lapsed (2 x redis_timeout
# of Redis being reachable, docs/copies.md): a shorter timeout from now on.
echo "jobbuf.redis_timeout = '2s'" >>"$JB_PGDATA/postgresql.conf"
jb_pg_ctl start
jb_wait_until '[ "$(jb_redis LLEN jobbuf:stop)" -ge 300 ] && [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20
sleep 0.5
expect_eq "after restart: every job in Redis exactly once, in order" \
  "$(jb_redis LRANGE jobbuf:stop 0 -1 | ruby -rjson -e 'puts STDIN.each_line.map { |l| JSON.parse(l)["n"] } == (1..300).to_a')" true
expect_eq "list length" "$(jb_redis LLEN jobbuf:stop)" 300
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
say "$(grep -E 'jobbuf: .*already in Redis' "$JB_RUN/postgres.log" | sed 's/.*LOG: *//' || true)"

e2e_done

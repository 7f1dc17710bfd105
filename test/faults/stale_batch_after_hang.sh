#!/usr/bin/env bash
# A batch sent to a Redis that hangs (SIGSTOP) is not lost when the worker gives up on it: it sits
# in the kernel's socket buffer and Redis executes it when it resumes, even though the worker has
# closed that connection and rolled back its DELETE. The marker protocol must still deliver each
# job once: the reconciliation after the reconnect has to see that stale unit's marker (or keep
# it from running) before the jobs are pushed again.
#
# The hard case, built here on purpose: the stale unit is large (10 jobs of 100 kB each, so Redis
# needs many event-loop turns to read it: it reads at most one big argument per turn), and Redis
# resumes exactly while the worker's new connection waits for the answer to its marker read —
# the new connection's GET is then answered before the stale EXEC has been read. The worker gives
# up on the stale unit because a reload interrupts it (redis_timeout is a minute, so that nothing
# depends on how fast the test reacts), reconnects at once, and Redis resumes once that new
# connection is seen waiting.
# Three attempts, each with 10 fresh jobs; every job must be in Redis exactly once.
source "$(dirname "$0")/tools/lib.sh"

ATTEMPTS=${JB_FAULTS_STALE_ATTEMPTS:-3}
# The memory guard off: its INFO reads would be what hangs, not the unit.
faults_start "--appendonly yes --appendfsync always" \
  "jobbuf.redis_timeout = '60s'
jobbuf.poll_interval = '200ms'
jobbuf.redis_memory_limit = off"
jb_sql "SELECT jobbuf_create_queue('big', 'list', '{\"batch_size\": 10}')" >/dev/null
KEY=jobbuf:big

# connections_to_redis: the local ports of the connections to Redis that are ESTABLISHED from the
# worker's side. While Redis is stopped, connections are completed by the kernel but never
# answered; the ones the worker gave up on are closed (FIN-WAIT-2).
connections_to_redis() {
  ss -Htn state established "( dport = :$JB_REDIS_PORT )" 2>/dev/null | awk '{ sub(/.*:/, "", $3); print $3 }' | sort
}
# bytes_queued_to_redis: what sits in the socket buffers of the established connections to Redis.
bytes_queued_to_redis() {
  ss -Htn state established "( dport = :$JB_REDIS_PORT or sport = :$JB_REDIS_PORT )" 2>/dev/null |
    awk '{ bytes += $1 + $2 } END { print bytes + 0 }'
}
# waits_on_new_connection "<ports>": the worker waits on a connection that is not one of <ports>.
waits_on_new_connection() {
  [ -n "$(comm -13 <(tr ' ' '\n' <<<"$1" | sort) <(connections_to_redis))" ]
}

jb_sql "SELECT jobbuf_stage('big', '{\"n\": 0}'::jsonb)" >/dev/null
wait_delivered 1 || fail "the worker did not deliver a first job"   # connected and reconciled
for attempt in $(seq 1 "$ATTEMPTS"); do
  first=$(( attempt * 100 + 1 )); last=$(( first + 9 ))
  kill -STOP "$JB_REDIS_PID"
  jb_sql "SELECT count(jobbuf_stage('big', jsonb_build_object('n', g, 'pad', repeat('x', 100000)))) FROM generate_series($first, $last) g" >/dev/null
  # The worker sends the unit (1 MB) and waits for the reply; a reload makes it give up on it and
  # roll back, then reconnect at once and read the marker on a fresh connection.
  in_batch || fail "attempt $attempt: the worker is not waiting on the stale unit"
  jb_wait_until '[ "$(bytes_queued_to_redis)" -ge 1000000 ]' 15 \
    || fail "attempt $attempt: the stale unit is not all in the socket buffers ($(bytes_queued_to_redis) bytes)"
  stale=$(connections_to_redis | tr '\n' ' ')
  set_and_reload jobbuf.redis_timeout "$(( 60 + attempt ))s" || fail "attempt $attempt: the reload was not seen"
  # Resume Redis while the worker waits on its fresh connection (its marker read).
  if jb_wait_until "waits_on_new_connection '$stale'" 15; then
    how="while the worker waited on its reconnect"
  else
    fail "attempt $attempt: the worker did not reconnect while Redis was stopped"
    how="(no waiting connection seen)"
  fi
  kill -CONT "$JB_REDIS_PID"
  say "attempt $attempt: jobs $first..$last staged while Redis was stopped; resumed $how"
  wait_staged 0 || say "attempt $attempt: jobs still staged after 15 s"
  sleep 1
done

expected=$(echo 0; for attempt in $(seq 1 "$ATTEMPTS"); do seq $(( attempt * 100 + 1 )) $(( attempt * 100 + 10 )); done)
arrived=$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"]')
say "Redis list: $(jb_redis LLEN "$KEY") elements for $(( ATTEMPTS * 10 + 1 )) jobs"
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "no job delivered twice (duplicated numbers)" "$(sort -n <<<"$arrived" | uniq -d | tr '\n' ' ')" ""
expect_eq "every job delivered (lost numbers)" "$(comm -23 <(sort <<<"$expected") <(sort -u <<<"$arrived") | tr '\n' ' ')" ""
expect_eq "payloads intact (100000-character pad)" \
  "$(jb_redis LRANGE "$KEY" 1 -1 | ruby -rjson -ne 'puts JSON.parse($_)["pad"].size' | sort -u)" 100000
say "reconciliations logged: $(count_lines 'already in Redis when the last batch was interrupted' "$(cat "$JB_RUN/postgres.log")")"
faults_done

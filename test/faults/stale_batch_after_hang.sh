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
# the new connection's GET is then answered before the stale EXEC has been read.
# Three attempts, each with 10 fresh jobs; every job must be in Redis exactly once.
source "$(dirname "$0")/tools/lib.sh"

ATTEMPTS=${JB_FAULTS_STALE_ATTEMPTS:-3}
faults_start "--appendonly yes --appendfsync always" \
  "jobbuf.redis_timeout = '500ms'
jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('big', 'list', '{\"batch_size\": 10}')" >/dev/null
KEY=jobbuf:big

# worker_waits_on_redis: the worker has a connection to Redis open (ESTABLISHED from its side).
# While Redis is stopped, connections are completed by the kernel but never answered; the ones the
# worker gave up on are closed (FIN-WAIT-2), so an established one is the attempt in progress.
worker_waits_on_redis() {
  [ "$(ss -Htn state established "( dport = :$JB_REDIS_PORT )" 2>/dev/null | wc -l)" -ge 1 ]
}

for attempt in $(seq 1 "$ATTEMPTS"); do
  first=$(( attempt * 100 + 1 )); last=$(( first + 9 ))
  before=$(jb_sql "SELECT coalesce(last_error_at, '-infinity') FROM jobbuf_worker_status()")
  kill -STOP "$JB_REDIS_PID"
  jb_sql "SELECT count(jobbuf_stage('big', jsonb_build_object('n', g, 'pad', repeat('x', 100000)))) FROM generate_series($first, $last) g" >/dev/null
  # The worker sends the unit (1 MB), waits 500 ms for the reply, gives up and rolls back.
  if ! jb_wait_until "[ \"\$(jb_sql \"SELECT last_error_at > '$before' FROM jobbuf_worker_status()\")\" = t ]" 10; then
    say "attempt $attempt: the worker did not report the hung push"
  fi
  say "attempt $attempt: worker: $(jb_sql "SELECT last_error FROM jobbuf_worker_status()")"
  # Resume Redis while the worker waits on a fresh connection (its marker read).
  sleep 0.2
  if jb_wait_until worker_waits_on_redis 5; then
    sleep 0.1
    how="while the worker waited on its reconnect"
  else
    how="(no waiting connection seen)"
  fi
  kill -CONT "$JB_REDIS_PID"
  say "attempt $attempt: jobs $first..$last staged while Redis was stopped; resumed $how"
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20 || say "attempt $attempt: jobs still staged after 20 s"
  sleep 1
done

expected=$(for attempt in $(seq 1 "$ATTEMPTS"); do seq $(( attempt * 100 + 1 )) $(( attempt * 100 + 10 )); done)
arrived=$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"]')
say "Redis list: $(jb_redis LLEN "$KEY") elements for $(( ATTEMPTS * 10 )) jobs"
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "no job delivered twice (duplicated numbers)" "$(sort -n <<<"$arrived" | uniq -d | tr '\n' ' ')" ""
expect_eq "every job delivered (lost numbers)" "$(comm -23 <(sort <<<"$expected") <(sort -u <<<"$arrived") | tr '\n' ' ')" ""
expect_eq "payloads intact (100000-character pad)" \
  "$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["pad"].size' | sort -u)" 100000
say "reconciliations logged: $(count_lines 'already in Redis when the last batch was interrupted' "$(cat "$JB_RUN/postgres.log")")"
faults_done

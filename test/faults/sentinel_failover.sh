#!/usr/bin/env bash
# Redis Sentinel failover in the middle of a drain (redis+sentinel://), with and without
# jobbuf.redis_min_replicas:
#   a master (the harness's redis-server), one replica, three sentinels (redis-server --sentinel,
#   quorum 2, down-after 1 s), all on free loopback ports; the worker reaches the master through
#   the sentinels; a backlog drains in small batches while a stager commits one job per
#   transaction; kill -9 of the master mid-drain; the sentinels promote the replica, the worker
#   follows it without operator action; the killed server comes back as the new master's replica.
# Then every job committed in Postgres is compared with what the new master holds:
#   lost (committed, not in Redis), duplicated (in Redis twice), phantom (in Redis, never committed).
# With jobbuf.redis_min_replicas = 1 all three must be 0. The same run with 0 prints what the
# asynchronous replication lost, without asserting it (it depends on what the replica had).
source "$(dirname "$0")/tools/lib.sh"

if [ -z "${SENTINEL_MIN_REPLICAS:-}" ]; then
  SENTINEL_MIN_REPLICAS=1 bash "$0"; status=$?
  echo "  [sentinel_failover] the same failover with jobbuf.redis_min_replicas = 0 (printed, not asserted):"
  SENTINEL_MIN_REPLICAS=0 bash "$0" || true
  exit "$status"
fi
CHECKS_NAME="sentinel_failover min_replicas=$SENTINEL_MIN_REPLICAS"
BACKLOG=${JB_FAULTS_SENTINEL_BACKLOG:-20000}
MASTER_NAME=jobbufmaster

jb_init_run_dir
# start_redis_node PORT [args...]: a redis-server (or sentinel, with --sentinel) in its own directory;
# returns once it answers (JB_PORT_TAKEN when PORT was taken: jb_on_free_port starts it elsewhere).
start_redis_node() {
  local port=$1 from; shift
  mkdir -p "$JB_RUN/node-$port"
  from=$(jb_log_size "$JB_RUN/node-$port/redis.log")
  redis-server "$@" --port "$port" --bind 127.0.0.1 --dir "$JB_RUN/node-$port" \
    --logfile "$JB_RUN/node-$port/redis.log" --daemonize no &
  track_pid $!
  jb_redis_started $! "$JB_RUN/node-$port/redis.log" "$from" -p "$port"
}
sentinel_conf() {  # sentinel_conf PORT MASTER_PORT: a writable config file (Sentinel rewrites it)
  mkdir -p "$JB_RUN/node-$1"
  cat >"$JB_RUN/node-$1/sentinel.conf" <<CONF
sentinel monitor $MASTER_NAME 127.0.0.1 $2 2
sentinel down-after-milliseconds $MASTER_NAME 1000
sentinel failover-timeout $MASTER_NAME 4000
sentinel parallel-syncs $MASTER_NAME 1
CONF
  echo "$JB_RUN/node-$1/sentinel.conf"
}
node_info() { redis-cli -p "$1" INFO replication 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }

# The master (the harness's redis-server), its replica and the sentinels first: the sentinels'
# ports, each taken when it starts, go into the Postgres configuration.
faults_start_redis "--repl-diskless-sync yes --repl-diskless-sync-delay 0"
MASTER=$JB_REDIS_PORT
start_replica() {  # PORT
  start_redis_node "$1" --save "" --appendonly no --repl-diskless-sync yes --repl-diskless-sync-delay 0 \
    --replicaof 127.0.0.1 "$MASTER"
}
start_sentinel() { start_redis_node "$1" "$(sentinel_conf "$1" "$MASTER")" --sentinel; }  # PORT
jb_on_free_port REPLICA start_replica || { fail "the replica did not start"; faults_done; }
for s in S1 S2 S3; do
  jb_on_free_port "$s" start_sentinel || { fail "sentinel $s did not start"; faults_done; }
done
faults_start_postgres "jobbuf.redis_url = 'redis+sentinel://127.0.0.1:$S1,127.0.0.1:$S2,127.0.0.1:$S3/$MASTER_NAME/0'
jobbuf.redis_min_replicas = $SENTINEL_MIN_REPLICAS
jobbuf.redis_timeout = '1s'
jobbuf.poll_interval = '200ms'
jobbuf.batch_size = 50"
jb_wait_until "[ \"\$(node_info $REPLICA master_link_status)\" = up ]" 15 || fail "the replica did not sync"
sentinels_ready() {
  local s
  for s in $S1 $S2 $S3; do
    redis-cli -p "$s" SENTINEL master "$MASTER_NAME" 2>/dev/null | tr -d '\r' |
      awk 'p == "num-slaves" && $0 != "1" { bad = 1 } p == "num-other-sentinels" && $0 != "2" { bad = 1 }
           { p = $0 } END { exit bad }' || return 1
    [ -n "$(redis-cli -p "$s" SENTINEL master "$MASTER_NAME" 2>/dev/null)" ] || return 1
  done
}
jb_wait_until sentinels_ready 30 || fail "the sentinels did not see each other and the replica"

jb_sql "SELECT jobbuf_create_queue('work', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('work', '{\"n\": 0}')" >/dev/null
wait_staged 0 || fail "the worker did not deliver through the sentinels"
expect_eq "delivered through the sentinels to the master" "$(jb_redis LLEN jobbuf:work)" 1

# The committed jobs: 0, the backlog 1..BACKLOG (one transaction), then the live stager's.
COMMITTED=$JB_RUN/committed
{ echo 0; seq 1 "$BACKLOG"; } >"$COMMITTED"
jb_sql "SELECT count(jobbuf_stage('work', jsonb_build_object('n', n))) FROM generate_series(1, $BACKLOG) n" >/dev/null
STOP=$JB_RUN/stop-stager
(
  n=$BACKLOG
  while [ ! -e "$STOP" ]; do
    n=$((n + 1))
    jb_sql "SELECT jobbuf_stage('work', jsonb_build_object('n', $n, 'live', true))" >/dev/null 2>&1 &&
      echo "$n" >>"$COMMITTED.live"
  done
) &
track_pid $!

# Mid-drain: part of the backlog delivered, the rest staged.
jb_wait_until '[ "$(jb_redis LLEN jobbuf:work)" -ge 2000 ]' 30 || fail "the drain did not start"
MARK=$(log_mark)
kill -9 "$JB_REDIS_PID"
in_redis=$(redis-cli -p "$REPLICA" LLEN jobbuf:work)
staged=$(jb_sql "SELECT count(*) FROM jobbuf.jobs")
say "kill -9 of the master mid-drain: the replica had $in_redis jobs, $staged still staged"
check "mid-drain (jobs still staged)" [ "$staged" -gt 0 ]

if jb_wait_until "[ \"\$(node_info $REPLICA role)\" = master ]" 30; then
  pass "the sentinels promoted the replica"
else
  fail "the replica was not promoted"
fi
# The killed server comes back empty, as the new master's replica (its acknowledgements let
# WAIT succeed again when min_replicas = 1).
start_redis_node "$MASTER" --save "" --appendonly no --replicaof 127.0.0.1 "$REPLICA"
jb_wait_until "[ \"\$(node_info $MASTER master_link_status)\" = up ]" 30 || fail "the old master did not rejoin"
sleep 2   # the live stager keeps committing into the new master's drain
touch "$STOP"
wait_for_drain() { [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]; }
jb_wait_until wait_for_drain 90 || fail "jobs still staged 90 s after the failover: $(jb_sql "SELECT count(*) FROM jobbuf.jobs")"
sleep 0.5
cat "$COMMITTED.live" >>"$COMMITTED" 2>/dev/null

# The master the sentinels name now (the promoted replica, or another node if they failed over again).
NEW_MASTER=$(redis-cli -p "$S1" SENTINEL get-master-addr-by-name "$MASTER_NAME" | sed -n 2p | tr -d '\r')
say "the sentinels name 127.0.0.1:$NEW_MASTER as the master (the replica was $REPLICA)"
FOUND=$JB_RUN/found
redis-cli -p "$NEW_MASTER" LRANGE jobbuf:work 0 -1 | ruby -rjson -e 'STDIN.each_line { |l| puts JSON.parse(l)["n"] }' >"$FOUND"
count_delivery "$COMMITTED" "$FOUND"
say "committed $(wc -l <"$COMMITTED") jobs ($(wc -l <"$COMMITTED.live" 2>/dev/null || echo 0) by the live stager); the new master holds $(wc -l <"$FOUND")"
say "lost $lost, duplicated $duplicated, phantom $phantom"
say "jobbuf's WARNINGs during the failover: $(log_since "$MARK" | grep -E 'WARNING: +jobbuf:' | sed 's/.*WARNING: *jobbuf: //' | cut -c1-160 | paste -sd '|')"
if [ "$SENTINEL_MIN_REPLICAS" -ge 1 ]; then
  expect_eq "lost" "$lost" 0
  expect_eq "duplicated" "$duplicated" 0
  expect_eq "phantom" "$phantom" 0
else
  expect_eq "duplicated" "$duplicated" 0
  expect_eq "phantom" "$phantom" 0
fi
expect_match "the worker follows the new master" "$(log_since "$MARK" | grep -E 'LOG: +jobbuf: Redis .* accepts jobs again' | tail -n 1)" \
  "master 127.0.0.1:$NEW_MASTER"
expect_eq "the worker never restarted" \
  "$(count_lines 'jobbuf drain worker.*(exited|terminated)' "$(cat "$JB_RUN/postgres.log")")" 0
faults_done

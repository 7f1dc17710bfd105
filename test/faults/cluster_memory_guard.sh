#!/usr/bin/env bash
# The Redis memory guard on a Redis Cluster (SPEC 1.3, "Flow control at the drain": "On a Cluster,
# 'that Redis' is the master at its limit: units for slots on other masters go on"; docs/flow.md):
#   three masters and three replicas; jobbuf.redis_memory_limit = '12MB' (a size: it applies to
#   every master, whatever maxmemory); before the worker starts, one master holds a 24 MB filler
#   key in the slot of queue 'held's key (a {hash tag}), so that master is above the limit by
#   construction and the others (about 2 MB each) are below it; no maxmemory, so no node answers
#   OOM to anyone. Queues 'held' and 'open' (keys on two different masters, found with CLUSTER
#   KEYSLOT and the cluster's slot map, not hard-coded) get 400 jobs each:
#  * 'open' is delivered in full while every job of 'held' stays staged and its master's list
#    stays empty;
#  * jobbuf_flow_status(): 'held' in state redis_memory (the reason naming that master), 'open'
#    flowing; jobbuf.redis_memory: that master held, the other masters not;
#  * one jobbuf WARNING, naming that master and the limit;
#  * once the filler is deleted, 'held' is delivered: every job of both queues exactly once, in
#    order, nothing dead-lettered.
# Then max_in_redis on the cluster: 30 queues with a cap of 5 and 20 jobs each, their keys on every
# master: each key holds exactly 5, the depths of each master's queues are read in one round trip
# (the masters' LLEN calls outnumber the reads they processed fourfold), and 5 popped from each key
# are made up again.
source "$(dirname "$0")/tools/lib.sh"
source "$FAULTS_ROOT/test/harness/redis_cluster.sh"
CHECKS_NAME=cluster_memory_guard
JOBS=400
FILLER_BYTES=$((24 * 1024 * 1024))
LIMIT_MB=12

jb_init_run_dir
trap faults_cleanup EXIT
on_exit jb_stop_redis_cluster
jb_start_redis_cluster || { fail "the cluster did not start"; faults_done; }
say "cluster: ${JB_CLUSTER_PORTS[*]} (seeds in the URL: $JB_CLUSTER_URL)"

# Two {hash tag} keys whose slots two different masters serve (the cluster's slot map decides).
HELD_KEY= OPEN_KEY= HELD_PORT= OPEN_PORT=
for i in $(seq 1 64); do
  key="{m$i}:jobs"
  owner=$(jb_cluster_owner "$key")
  [ -n "$owner" ] || continue
  if [ -z "$HELD_KEY" ]; then
    HELD_KEY=$key HELD_PORT=$owner
  elif [ "$owner" != "$HELD_PORT" ]; then
    OPEN_KEY=$key OPEN_PORT=$owner
    break
  fi
done
if [ -n "$OPEN_KEY" ]; then
  pass "two queue keys on two different masters ($HELD_KEY on :$HELD_PORT, $OPEN_KEY on :$OPEN_PORT)"
else
  fail "no two of 64 {hash tag} keys on two different masters"; faults_done
fi
HELD_TAG=${HELD_KEY%%:*}
FILLER="$HELD_TAG:filler"
expect_eq "the filler key is in the held queue's slot" \
  "$(redis-cli -p "$HELD_PORT" CLUSTER KEYSLOT "$FILLER")" "$(redis-cli -p "$HELD_PORT" CLUSTER KEYSLOT "$HELD_KEY")"
masters=()
for port in "${JB_CLUSTER_PORTS[@]}"; do
  redis-cli -p "$port" INFO replication | tr -d '\r' | grep -qx 'role:master' && masters+=("$port")
done
expect_eq "three masters" "${#masters[@]}" 3

# counted PORT: used_memory - mem_not_counted_for_evict of that node, as the guard compares.
counted() {
  redis-cli -p "$1" INFO memory | tr -d '\r' |
    awk -F: '$1 == "used_memory" { u = $2 } $1 == "mem_not_counted_for_evict" { n = $2 } END { print u - n }'
}
# The filler: one string of FILLER_BYTES (SETRANGE pads with zero bytes), before anything is
# staged or the worker starts: its first reading of that master already finds it above the limit.
redis-cli -p "$HELD_PORT" SETRANGE "$FILLER" $((FILLER_BYTES - 1)) x >/dev/null
limit=$((LIMIT_MB * 1024 * 1024))
check "precondition: the held queue's master is above the limit ($(counted "$HELD_PORT") bytes >= $limit)" \
  [ "$(counted "$HELD_PORT")" -ge "$limit" ]
for port in "${masters[@]}"; do
  [ "$port" = "$HELD_PORT" ] && continue
  check "precondition: master :$port is below 90 % of the limit ($(counted "$port") bytes)" \
    [ "$(counted "$port")" -lt $((limit * 9 / 10)) ]
done

jb_start_postgres "jobbuf.redis_url = '$JB_CLUSTER_URL'
jobbuf.redis_memory_limit = '${LIMIT_MB}MB'
jobbuf.poll_interval = '200ms'" || exit 1
wait_worker_running 20 || fail "the drain worker did not start"
jb_sql "SELECT jobbuf_create_queue('held', 'list', '{\"key\": \"$HELD_KEY\"}')" >/dev/null
jb_sql "SELECT jobbuf_create_queue('open', 'list', '{\"key\": \"$OPEN_KEY\"}')" >/dev/null
mark=$(log_mark)
jb_sql "SELECT count(jobbuf_stage(q, jsonb_build_object('q', q, 'n', n)))
        FROM generate_series(1, $JOBS) n, unnest(ARRAY['held', 'open']) q" >/dev/null ||
  fail "staging $JOBS jobs in each queue"

flow() { jb_sql "SELECT $1 FROM jobbuf_flow_status() WHERE queue = '$2'"; }
staged() { jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '$1'"; }
t0=$(now_ms)
if jb_wait_until "[ \"\$(staged open)\" = 0 ] && [ \"\$(redis-cli -p $OPEN_PORT LLEN '$OPEN_KEY')\" = $JOBS ]" 30; then
  pass "'open' (master :$OPEN_PORT) delivered in full: $JOBS jobs ($(( $(now_ms) - t0 )) ms)"
else
  fail "'open': $(staged open) still staged, $(redis-cli -p "$OPEN_PORT" LLEN "$OPEN_KEY") in Redis"
fi
# The worker tried 'held' and the guard held it: shown in jobbuf_flow_status(), not waited for by time.
jb_wait_until "[ \"\$(flow state held)\" = redis_memory ]" 15
expect_eq "'held': state redis_memory" "$(flow state held)" redis_memory
expect_match "... the reason names its master" "$(flow reason held)" ":$HELD_PORT is at jobbuf.redis_memory_limit"
expect_eq "'open': state flowing" "$(flow state open)" flowing
expect_eq "'held': every job still staged" "$(staged held)" "$JOBS"
expect_eq "... and none on its master" "$(redis-cli -p "$HELD_PORT" LLEN "$HELD_KEY")" 0
expect_eq "no delivery marker written on the held master" \
  "$(redis-cli -p "$HELD_PORT" --scan --pattern 'jobbuf:marker:*' | grep -c . || true)" 0
check "... while the open queue's master was read and delivered to" \
  [ "$(redis-cli -p "$OPEN_PORT" --scan --pattern 'jobbuf:marker:*' | grep -c . || true)" -gt 0 ]
readings() { jb_sql "SELECT string_agg(split_part(node, ':', 2) || '=' || held, ' ' ORDER BY node) FROM jobbuf.redis_memory"; }
jb_wait_until "readings | grep -qE '(^| )$HELD_PORT=true'" 10
expect_match "jobbuf.redis_memory: the held queue's master is held" "$(readings)" "(^| )$HELD_PORT=true"
expect_match "... the open queue's master is not" "$(readings)" "(^| )$OPEN_PORT=false"
expect_eq "... no other master is held" "$(jb_sql "SELECT count(*) FROM jobbuf.redis_memory WHERE held")" 1
warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
expect_eq "one jobbuf WARNING" "$(grep -c . <<<"$warnings" || true)" 1
expect_match "... naming the master and the limit" "$warnings" \
  "Redis master [^ ]*:$HELD_PORT is at jobbuf.redis_memory_limit \(used [0-9.]+ MB of $LIMIT_MB.0 MB\)"

# Room again: the filler deleted, the held queue is delivered.
redis-cli -p "$HELD_PORT" DEL "$FILLER" >/dev/null
t0=$(now_ms)
if jb_wait_until "[ \"\$(staged held)\" = 0 ]" 30; then
  pass "'held' delivered once its master had room ($(( $(now_ms) - t0 )) ms)"
else
  fail "'held': $(staged held) still staged 30 s after the filler was deleted"
fi
sleep 0.5   # a second delivery of anything would show now
for q in held open; do
  if [ "$q" = held ]; then port=$HELD_PORT key=$HELD_KEY; else port=$OPEN_PORT key=$OPEN_KEY; fi
  got=$(redis-cli -p "$port" LRANGE "$key" 0 -1 | ruby -rjson -ne 'j = JSON.parse($_); puts "#{j["q"]} #{j["n"]}"')
  expect_eq "'$q': every job exactly once, in order" "$(md5sum <<<"$got")" "$(seq 1 $JOBS | sed "s/^/$q /" | md5sum)"
done
expect_eq "nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0
expect_eq "still one jobbuf WARNING" "$(log_since "$mark" | grep -cE 'WARNING: +jobbuf:' || true)" 1

# ---- max_in_redis on the cluster
CAPPED=()
for i in $(seq 1 30); do
  key="{c$i}:jobs"
  jb_sql "SELECT jobbuf_create_queue('c$i', 'list', '{\"key\": \"$key\", \"max_in_redis\": 5}')" >/dev/null
  CAPPED+=("$key")
done
owners=$(for key in "${CAPPED[@]}"; do jb_cluster_owner "$key"; done | sort -u | wc -l)
check "precondition: the capped queues' keys are on more than one master ($owners)" [ "$owners" -ge 2 ]
jb_sql "SELECT count(jobbuf_stage('c' || q, jsonb_build_object('n', n))) FROM generate_series(1, 30) q, generate_series(1, 20) n" >/dev/null ||
  fail "staging 20 jobs in each capped queue"
depths() { local key; for key in "${CAPPED[@]}"; do redis-cli -p "$(jb_cluster_owner "$key")" LLEN "$key"; done | sort -u | tr '\n' ' '; }
capped_staged() { jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue LIKE 'c%'"; }
jb_wait_until "[ \"\$(capped_staged)\" = 450 ]" 30 || fail "the capped queues pushed 150 of 600 ($(capped_staged) staged)"
sleep 0.5  # a push past a cap would show now
expect_eq "each capped queue's key holds exactly its max_in_redis" "$(depths)" "5 "
# masters_stat SECTION FIELD: the sum over the masters.
masters_stat() {
  local port sum=0 n
  for port in "${masters[@]}"; do
    n=$(redis-cli -p "$port" INFO "$1" | tr -d '\r' | sed -n "s/^$2//p" | cut -d, -f1)
    sum=$((sum + ${n:-0}))
  done
  echo "$sum"
}
llen0=$(masters_stat commandstats 'cmdstat_llen:calls=') reads0=$(masters_stat stats 'total_reads_processed:')
sleep 2
llen_calls=$(( $(masters_stat commandstats 'cmdstat_llen:calls=') - llen0 )) reads=$(( $(masters_stat stats 'total_reads_processed:') - reads0 ))
say "30 queues at their cap for 2 s: $llen_calls LLEN calls in $reads reads the masters processed"
check "one round trip per master reads its queues' depths ($llen_calls LLEN calls >= 4 x $reads reads)" \
  test "$llen_calls" -ge 200 -a "$llen_calls" -ge $((4 * reads))
for key in "${CAPPED[@]}"; do redis-cli -p "$(jb_cluster_owner "$key")" LPOP "$key" 5 >/dev/null; done
jb_wait_until "[ \"\$(capped_staged)\" = 300 ]" 30 || fail "the capped queues made up what was popped ($(capped_staged) staged)"
sleep 0.5
expect_eq "... and again after a consumer popped 5 from each" "$(depths)" "5 "
faults_done

#!/usr/bin/env bash
# The Redis memory guard (SPEC 1.3, "Flow control at the drain"; docs/flow.md): the drain is never
# what fills Redis.
#  * 300,000 waiting jobs (~120 bytes each, 36 MB of text) released into a Redis with
#    maxmemory 16mb, noeviction, while a consumer pops about 20,000 a second: Redis never
#    answers OOM, its counted memory stays below maxmemory, every job arrives once and in order;
#    one WARNING names the limit, and jobbuf_worker_status().last_error shows it while it holds;
#  * an allkeys-lru Redis is warned about once and delivered to; with
#    jobbuf.redis_require_noeviction = on nothing is delivered to it until the policy is
#    noeviction again;
#  * a Redis that refuses INFO (its user lacks +info) is named in one WARNING and delivered to
#    unguarded, and one LOG says so once it answers again;
#  * a value of jobbuf.redis_memory_limit that is not off, a fraction or a size is refused.
source "$(dirname "$0")/tools/lib.sh"

JOBS=300000
KEY=jobbuf:flow
PAD=$(printf 'x%.0s' $(seq 1 90))

faults_start "--maxmemory 16mb --maxmemory-policy noeviction" "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('flow', 'list')" >/dev/null
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "SELECT count(*) FROM jobbuf_stage('flow', ARRAY(SELECT jsonb_build_object('n', n, 'pad', '$PAD') FROM generate_series(1, $JOBS) n))" >/dev/null ||
  fail "staging $JOBS jobs"

counted_memory() {
  jb_redis INFO memory | tr -d '\r' |
    awk -F: '$1 == "used_memory" { u = $2 } $1 == "mem_not_counted_for_evict" { n = $2 } END { print u - n }'
}
oom_replies() { jb_redis INFO errorstats | tr -d '\r' | awk -F'[=,]' '/^errorstat_OOM:/ { print $2 }'; }

# The consumer: pops up to 400 entries every 20 ms (a real client, redis-cli, in a loop).
popped=$JB_RUN/popped
: >"$popped"
# An empty list answers nil, an empty line: left out.
( while :; do redis-cli -p "$JB_REDIS_PORT" LPOP "$KEY" 400 | sed '/^$/d' >>"$popped"; sleep 0.02; done ) &
track_pid $!
# The sampler: Redis's counted memory and the worker's last_error, every 100 ms.
samples=$JB_RUN/samples
( while :; do echo "$(counted_memory) $(jb_sql "SELECT coalesce(last_error, '') FROM jobbuf_worker_status()" | tr ' ' '_')" >>"$samples"; sleep 0.1; done ) &
track_pid $!

mark=$(log_mark)
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
if jb_wait_until "[ \"\$(wc -l <'$popped')\" -ge $JOBS ]" 120; then
  pass "the consumer popped $JOBS jobs"
else
  fail "the consumer popped $(wc -l <"$popped") of $JOBS jobs in 120 s"
fi
sleep 0.5
expect_eq "no OOM reply from Redis" "$(oom_replies)" ""
max_counted=$(awk '{ if ($1 > m) m = $1 } END { print m + 0 }' "$samples")
check "Redis's counted memory stayed below maxmemory (largest sample $max_counted bytes of 16 MB)" \
  test "$max_counted" -lt $((16 * 1024 * 1024))
expect_eq "every job once, in order" "$(ruby -rjson -ne 'puts JSON.parse($_)["n"]' "$popped" | md5sum)" "$(seq 1 $JOBS | md5sum)"
wait_staged 0
expect_eq "nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0
warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
expect_eq "one jobbuf WARNING" "$(grep -c . <<<"$warnings" || true)" 1
expect_match "... naming the limit" "$warnings" "is at jobbuf.redis_memory_limit \(used [0-9.]+ MB of 12.8 MB, maxmemory 16.0 MB\)"
check "jobbuf_worker_status().last_error showed it while delivery was held" grep -q 'redis_memory_limit' "$samples"
expect_eq "no LOG that it ended (10 minutes below the limit first)" \
  "$(log_since "$mark" | grep -c 'has stayed below jobbuf.redis_memory_limit' || true)" 0

# An evicting Redis: warned about once, delivered to.
jb_redis CONFIG SET maxmemory-policy allkeys-lru >/dev/null
mark=$(log_mark)
delivered_before=$(wc -l <"$popped")
jb_sql "SELECT jobbuf_stage('flow', '{\"n\": \"lru\"}')" >/dev/null
jb_wait_until "grep -q lru '$popped'" 15 || fail "the job reached an allkeys-lru Redis"
jb_sql "SELECT jobbuf_stage('flow', '{\"n\": \"lru2\"}')" >/dev/null
jb_wait_until "grep -q lru2 '$popped'" 15 || fail "a second job reached it"
warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
expect_eq "allkeys-lru: one WARNING" "$(grep -c . <<<"$warnings" || true)" 1
expect_match "... naming the policy" "$warnings" "evicts keys \(maxmemory-policy allkeys-lru"
# Required: nothing is delivered to it.
set_and_reload jobbuf.redis_require_noeviction on || fail "jobbuf.redis_require_noeviction is on"
jb_sql "SELECT jobbuf_stage('flow', '{\"n\": \"refused\"}')" >/dev/null
sleep 3
expect_eq "redis_require_noeviction: the job stays staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 1
check "... and is not in Redis" test "$(grep -c refused "$popped")" = 0
jb_redis CONFIG SET maxmemory-policy noeviction >/dev/null
if jb_wait_until "grep -q refused '$popped'" 15; then
  pass "delivered once the policy is noeviction"
else
  fail "not delivered after the policy became noeviction"
fi
reset_and_reload jobbuf.redis_require_noeviction off || fail "jobbuf.redis_require_noeviction is reset"

# A Redis that refuses INFO: one WARNING, delivered to unguarded; one LOG once it answers again.
mark=$(log_mark)
jb_redis ACL SETUSER default -info >/dev/null
for n in info1 info2 info3; do
  jb_sql "SELECT jobbuf_stage('flow', '{\"n\": \"$n\"}')" >/dev/null
  jb_wait_until "grep -q $n '$popped'" 15 || fail "$n reached a Redis that refuses INFO"
  sleep 1.2   # past the guard's next reading
done
warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
expect_eq "INFO refused: one WARNING for three jobs" "$(grep -c . <<<"$warnings" || true)" 1
expect_match "... naming the refusal" "$warnings" "refuses INFO memory \(NOPERM"
jb_redis ACL SETUSER default +info >/dev/null
jb_sql "SELECT jobbuf_stage('flow', '{\"n\": \"info4\"}')" >/dev/null
if jb_wait_until "log_since $mark | grep -q 'answers INFO memory again'" 15; then
  pass "one LOG once Redis answers INFO again"
else
  fail "no LOG once Redis answers INFO again"
fi

# Bad values are refused; the setting keeps its value.
for bad in 0 1.5 -1 lots 12XB '50%'; do
  out=$(jb_psql -qtAX -c "ALTER SYSTEM SET jobbuf.redis_memory_limit = '$bad'" 2>&1)
  expect_match "jobbuf.redis_memory_limit = '$bad' is refused" "$out" "invalid value for parameter \"jobbuf.redis_memory_limit\""
done
expect_eq "the setting keeps its value" "$(jb_sql "SHOW jobbuf.redis_memory_limit")" "0.8"
faults_done

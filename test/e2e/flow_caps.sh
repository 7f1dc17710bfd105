#!/usr/bin/env bash
# The queue options max_in_redis and max_rate (SPEC 1.3, "Flow control at the drain"; docs/flow.md),
# each backlog staged while the worker is disabled and released at once:
#  * max_in_redis, each queue's depth sampled every 20 ms while its consumer drains it, and never
#    above the cap; every job delivered once:
#    - list (1,000 jobs pop a second), 6,000 jobs, cap 500, in order;
#    - stream, 3,000 jobs, cap 300 (the group's lag): with no consumer yet the stream holds exactly
#      300; then an ioredis consumer group (XREADGROUP, XACK) reads every job once;
#    - sidekiq with a stock Sidekiq server, 2,000 jobs, cap 200 (LLEN queue:<q>), and a job
#      scheduled 3 s ahead: kept out of Sidekiq's schedule set, it runs after its run_at;
#    - bullmq with a stock BullMQ Worker, 2,000 jobs, cap 200 (wait + paused + prioritized);
#    - celery with a stock Celery worker, 1,000 tasks, cap 100 (LLEN of the Celery queue);
#  * max_rate 500 (jobs/s) on a list nobody reads, 20,000 staged: no sampled window of t s holds
#    more than 500 × t + 500 (the bucket), and the first 30 s hold at least 95 % of 15,000;
#  * 100 capped list queues (weight 3) waiting at their cap with nobody reading, beside two queues
#    sharing one key (one cap for the key), a bullmq queue and a stream queue whose keys already
#    hold other jobs (each capped at a different depth): each key holds exactly its cap, and the
#    depths are read again in one round trip per pass (Redis's LLEN calls outnumber the reads it
#    processed twentyfold; one read per queue would make them about equal);
#  * a capped queue whose key holds another type (its depth cannot be read) waits alone, named in
#    one WARNING, while a capped queue beside it is delivered;
#  * bad values refused at jobbuf_create_queue / jobbuf_alter_queue, nothing changed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/harness/servers.sh
source test/harness/checks.sh
source test/harness/preconditions.sh
source test/consumers/sidekiq/sidekiq.sh
source test/consumers/celery/celery.sh
NODE_DIR=$ROOT/test/consumers/node
SAMPLERS=()

cleanup() {
  local pid
  for pid in "${SAMPLERS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  jb_stop_sidekiq
  jb_stop_celery
  [ -n "${BULL_PID:-}" ] && { kill "$BULL_PID" 2>/dev/null; wait "$BULL_PID" 2>/dev/null; }
  jb_stop_all
}
jb_start_servers cleanup
wait_worker_running 15 || fail "the drain worker runs"
PAD=$(printf 'x%.0s' $(seq 1 60))

# sample FILE 'redis args'...: appends the sum of the integer replies every 20 ms (in background).
sample() {
  local file=$1; shift
  : >"$file"
  ( while :; do
      local sum=0 cmd n
      for cmd in "$@"; do n=$(jb_redis $cmd); sum=$((sum + ${n:-0})); done
      echo "$sum" >>"$file"
      sleep 0.02
    done ) &
  SAMPLERS+=($!)
}
stop_samplers() { local pid; for pid in "${SAMPLERS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done; SAMPLERS=(); }
largest() { sort -n "$1" | tail -n 1; }
release() {  # stages with the worker disabled: $1 the SQL that stages
  set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
  jb_sql "$1" >/dev/null || fail "staging: $1"
}
enable() { set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"; }

jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('capped', 'list', '{"max_in_redis": 500}');
SELECT jobbuf_create_queue('sx', 'stream', '{"max_in_redis": 300}');
SELECT jobbuf_create_queue('sq', 'sidekiq', '{"max_in_redis": 200}');
SELECT jobbuf_create_queue('bq', 'bullmq', '{"max_in_redis": 200}');
SELECT jobbuf_create_queue('cq', 'celery', '{"max_in_redis": 100, "celery_queue": "cq"}');
SELECT jobbuf_create_queue('rated', 'list', '{"max_rate": 500}');
SQL

# ---- list
release "SELECT count(*) FROM jobbuf_stage('capped', ARRAY(SELECT jsonb_build_object('n', n, 'pad', '$PAD') FROM generate_series(1, 6000) n))"
popped=$JB_RUN/popped
: >"$popped"
( while :; do redis-cli -p "$JB_REDIS_PORT" LPOP jobbuf:capped 50 | sed '/^$/d' >>"$popped"; sleep 0.05; done ) &
SAMPLERS+=($!)
sample "$JB_RUN/list.depth" "LLEN jobbuf:capped"
enable
jb_wait_until "[ \"\$(wc -l <'$popped')\" -ge 6000 ]" 60 || fail "list: $(wc -l <"$popped") of 6000 popped in 60 s"
stop_samplers
expect_le "list: the depth never above max_in_redis 500 ($(wc -l <"$JB_RUN/list.depth") samples)" "$(largest "$JB_RUN/list.depth")" 500
check "list: the cap was reached (the consumer is slower than the drain)" test "$(largest "$JB_RUN/list.depth")" -ge 400
expect_eq "list: every job once, in order" "$(ruby -rjson -ne 'puts JSON.parse($_)["n"]' "$popped" | md5sum)" "$(seq 1 6000 | md5sum)"

# ---- stream
release "SELECT count(*) FROM jobbuf_stage('sx', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 3000) n))"
stream_lag() { redis-cli -p "$JB_REDIS_PORT" XINFO GROUPS jobbuf:sx | awk 'prev == "lag" { print } { prev = $0 }'; }
redis-cli -p "$JB_REDIS_PORT" XGROUP CREATE jobbuf:sx g '$' MKSTREAM >/dev/null
: >"$JB_RUN/sx.depth"
( while :; do stream_lag >>"$JB_RUN/sx.depth"; sleep 0.02; done ) &
SAMPLERS+=($!)
enable
# No consumer yet: the group's lag reaches the cap and stays there.
jb_wait_until '[ "$(stream_lag)" = 300 ]' 15 || fail "stream: the group's lag did not reach 300 ($(stream_lag))"
sleep 1
expect_eq "stream: with no consumer, the stream holds the cap and no more (lag, length)" \
  "$(stream_lag) $(jb_redis XLEN jobbuf:sx)" "300 300"
node "$NODE_DIR/stream_consumer.js" --url "redis://127.0.0.1:$JB_REDIS_PORT/0" --stream jobbuf:sx --group g \
  --expect 3000 --out "$JB_RUN/sx.jsonl" --timeout-ms 90000 --count 20 --block-ms 100 >"$JB_RUN/sx.out" 2>&1 </dev/null &
SX_PID=$!
wait "$SX_PID" || fail "stream: the consumer saw 3000 entries ($(grep -c . "$JB_RUN/sx.jsonl") seen)"
stop_samplers
expect_le "stream: the group's lag never above max_in_redis 300 ($(grep -c . "$JB_RUN/sx.depth") samples)" "$(largest "$JB_RUN/sx.depth")" 300
expect_eq "stream: every job once" "$(ruby -rjson -ne 'puts JSON.parse(JSON.parse($_)["payload"])["n"]' "$JB_RUN/sx.jsonl" | sort -un | wc -l),$(grep -c . "$JB_RUN/sx.jsonl")" "3000,3000"

# ---- sidekiq
release "SELECT count(*) FROM (SELECT jobbuf_stage('sq', jsonb_build_object('class', 'HardJob', 'args', jsonb_build_array(n))) FROM generate_series(1, 2000) n) s"
due=$(jb_sql "SELECT extract(epoch FROM now() + interval '3 s') FROM (SELECT jobbuf_stage('sq', '{\"class\": \"HardJob\", \"args\": [\"later\"]}', now() + interval '3 s')) s")
sample "$JB_RUN/sq.depth" "LLEN queue:sq"
sample "$JB_RUN/sq.schedule" "ZCARD schedule"
jb_start_sidekiq "$JB_RUN/sq.ran" sq
jb_wait_sidekiq_ready 30 || fail "Sidekiq started"
enable
jb_wait_until "[ \"\$(grep -c . '$JB_RUN/sq.ran')\" -ge 2001 ]" 90 || fail "sidekiq: $(grep -c . "$JB_RUN/sq.ran") of 2001 ran in 90 s"
stop_samplers
jb_stop_sidekiq
expect_le "sidekiq: LLEN queue:sq never above max_in_redis 200" "$(largest "$JB_RUN/sq.depth")" 200
expect_eq "sidekiq: nothing went to Sidekiq's schedule set" "$(largest "$JB_RUN/sq.schedule")" 0
expect_eq "sidekiq: each job ran once" "$(ruby -rjson -ne 'puts JSON.parse($_)["args"][0]' "$JB_RUN/sq.ran" | sort -u | wc -l)" 2001
check "sidekiq: the scheduled job ran after its run_at" \
  ruby -rjson -e 'l = File.readlines(ARGV[0]).map { |x| JSON.parse(x) }.find { |j| j["args"] == ["later"] }; exit(l && l["ran_at"] >= ARGV[1].to_f ? 0 : 1)' "$JB_RUN/sq.ran" "$due"

# ---- bullmq
release "SELECT count(*) FROM (SELECT jobbuf_stage('bq', jsonb_build_object('name', 'send', 'data', jsonb_build_object('n', n))) FROM generate_series(1, 2000) n) s"
sample "$JB_RUN/bq.depth" "LLEN bull:bq:wait" "LLEN bull:bq:paused" "ZCARD bull:bq:prioritized"
node "$NODE_DIR/bullmq_worker.js" --url "redis://127.0.0.1:$JB_REDIS_PORT/0" --queue bq --prefix bull --concurrency 2 \
  --out "$JB_RUN/bq.jsonl" >"$JB_RUN/bq.worker.out" 2>&1 </dev/null &
BULL_PID=$!
jb_wait_until "grep -q ready '$JB_RUN/bq.worker.out'" 30 || fail "the BullMQ Worker started"
enable
jb_wait_until "[ \"\$(grep -c . '$JB_RUN/bq.jsonl' 2>/dev/null)\" -ge 2000 ]" 90 || fail "bullmq: $(grep -c . "$JB_RUN/bq.jsonl") of 2000 processed in 90 s"
stop_samplers
expect_le "bullmq: wait + paused + prioritized never above max_in_redis 200" "$(largest "$JB_RUN/bq.depth")" 200
expect_eq "bullmq: each job processed once" "$(ruby -rjson -ne 'puts JSON.parse($_)["data"]["n"]' "$JB_RUN/bq.jsonl" | sort -u | wc -l)" 2000

# ---- celery
release "SELECT count(*) FROM (SELECT jobbuf_stage('cq', jsonb_build_object('task', 'jobbuf_e2e.record', 'args', jsonb_build_array(n))) FROM generate_series(1, 1000) n) s"
sample "$JB_RUN/cq.depth" "LLEN cq"
jb_start_celery "$JB_RUN/cq.ran" cq
jb_wait_celery_ready 60 || fail "the Celery worker started"
enable
jb_wait_until "[ \"\$(grep -c . '$JB_RUN/cq.ran')\" -ge 1000 ]" 120 || fail "celery: $(grep -c . "$JB_RUN/cq.ran") of 1000 ran in 120 s"
stop_samplers
jb_stop_celery
expect_le "celery: LLEN cq never above max_in_redis 100" "$(largest "$JB_RUN/cq.depth")" 100
expect_eq "celery: each task ran once" "$(ruby -rjson -ne 'puts JSON.parse($_)["args"][0]' "$JB_RUN/cq.ran" | sort -u | wc -l)" 1000

# ---- max_rate
release "SELECT count(*) FROM jobbuf_stage('rated', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 20000) n))"
# Each sample: the time before LLEN, the count, the time after (ms): a window from an earlier
# sample's "before" to a later one's "after" is at least as long as the real one.
( while :; do b=$(date +%s%3N); n=$(jb_redis LLEN jobbuf:rated); echo "$b $n $(date +%s%3N)"; sleep 0.1; done ) >"$JB_RUN/rated.samples" &
SAMPLERS+=($!)
enable
started=$(date +%s%3N)
sleep 30
count30=$(jb_redis LLEN jobbuf:rated)
stop_samplers
say "max_rate 500: $count30 jobs in the first 30 s (from the reload that enabled the worker)"
check "max_rate: at least 95 % of 15,000 in 30 s" test "$count30" -ge 14250
worst=$(awk '{ b[NR] = $1; n[NR] = $2; a[NR] = $3 }
  END { w = -1e9; for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) {
          t = (a[j] - b[i]) / 1000; x = n[j] - n[i] - (500 * t + 500); if (x > w) w = x }
        print int(w) }' "$JB_RUN/rated.samples")
expect_le "max_rate: no sampled window of t s holds more than 500 × t + 500 (worst excess $worst)" "$worst" 0
check "max_rate: it holds back (far from 20,000 at once)" test "$count30" -le 16000

# ---- many queues at their cap: one round trip reads all their depths
jb_sql "SELECT jobbuf_drop_queue('rated', force => true)" >/dev/null || fail "the rated queue (its pushes count as reads too) is dropped"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('w' || n, 'list', '{"max_in_redis": 5, "weight": 3}') FROM generate_series(1, 100) n;
SELECT jobbuf_create_queue('shared_a', 'list', '{"key": "jobbuf:shared", "max_in_redis": 6, "weight": 3}');
SELECT jobbuf_create_queue('shared_b', 'list', '{"key": "jobbuf:shared", "max_in_redis": 6, "weight": 3}');
SELECT jobbuf_create_queue('wb', 'bullmq', '{"max_in_redis": 7}');
SELECT jobbuf_create_queue('ws', 'stream', '{"max_in_redis": 9}');
SQL
# Other writers' jobs already there: 3 in BullMQ's wait list, 2 entries in the stream.
jb_redis RPUSH bull:wb:wait other-1 other-2 other-3 >/dev/null
jb_redis XADD jobbuf:ws '*' other 1 >/dev/null
jb_redis XADD jobbuf:ws '*' other 2 >/dev/null
release "SELECT count(*) FROM generate_series(1, 100) q, LATERAL jobbuf_stage('w' || q, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 20) n))"
jb_sql "SELECT count(*) FROM unnest(ARRAY['shared_a', 'shared_b', 'ws']) q, LATERAL jobbuf_stage(q, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 20) n))" >/dev/null
jb_sql "SELECT count(*) FROM generate_series(1, 20) n, LATERAL jobbuf_stage('wb', jsonb_build_object('name', 'send', 'data', jsonb_build_object('n', n)))" >/dev/null
enable
all_capped() { [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue ~ '^w[0-9]+$'")" = 1500 ]; }
jb_wait_until all_capped 30 || fail "each of the 100 queues pushed its cap ($(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue ~ '^w[0-9]+$'") staged)"
others_capped() { [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue IN ('shared_a', 'shared_b', 'wb', 'ws')")" = $((80 - 6 - 4 - 7)) ]; }
jb_wait_until others_capped 30 || fail "the shared key, bullmq and stream queues filled their caps ($(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue IN ('shared_a', 'shared_b', 'wb', 'ws')") staged)"
stat_of() { jb_redis INFO "$1" | tr -d '\r' | sed -n "s/^$2//p"; }
llen_before=$(stat_of commandstats 'cmdstat_llen:calls=' | cut -d, -f1)
reads_before=$(stat_of stats 'total_reads_processed:')
sleep 3
llen_calls=$(( $(stat_of commandstats 'cmdstat_llen:calls=' | cut -d, -f1) - llen_before ))
reads=$(( $(stat_of stats 'total_reads_processed:') - reads_before ))
say "100 queues at their cap for 3 s: $llen_calls LLEN calls in $reads reads Redis processed"
check "the capped queues' depths are read again while they wait" test "$llen_calls" -ge 1000
check "one round trip reads the depths of every waiting queue" test "$llen_calls" -ge $((20 * reads))
depths=$(for n in $(seq 1 100); do jb_redis LLEN "jobbuf:w$n"; done | sort -u | tr '\n' ' ')
expect_eq "each queue holds exactly its cap (a weight of 3 pushes no more)" "$depths" "5 "
expect_eq "two queues sharing a key: the key holds one cap, not one per queue" "$(jb_redis LLEN jobbuf:shared)" 6
expect_eq "bullmq: wait holds 3 others + 4 pushed (its cap 7)" "$(jb_redis LLEN bull:wb:wait)" 7
expect_eq "stream: 2 others + 7 pushed (its cap 9)" "$(jb_redis XLEN jobbuf:ws)" 9

# ---- a capped key of another type: that queue alone waits
jb_redis SET jobbuf:wrongtype not-a-list >/dev/null
mark=$(log_mark)
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('wt', 'list', '{"key": "jobbuf:wrongtype", "max_in_redis": 5}');
SELECT jobbuf_create_queue('beside', 'list', '{"max_in_redis": 5}');
SELECT count(*) FROM unnest(ARRAY['wt', 'beside']) q, LATERAL jobbuf_stage(q, ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 3) n));
SQL
jb_wait_until '[ "$(jb_redis LLEN jobbuf:beside)" = 3 ]' 30 || fail "the capped queue beside it was not delivered ($(jb_redis LLEN jobbuf:beside) in Redis)"
jb_wait_until "log_since $mark | grep -q 'queue \"wt\" is not delivered'" 30
expect_match "one WARNING names the queue and the reply" \
  "$(log_since "$mark" | grep 'WARNING: .*jobbuf' | sort -u)" 'queue "wt" is not delivered: reading a queue.s depth in Redis: WRONGTYPE'
expect_eq "... and no other jobbuf WARNING (Redis itself is fine)" "$(log_since "$mark" | grep -c 'WARNING: .*jobbuf')" 1
expect_eq "its jobs stay staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'wt'")" 3
expect_eq "Redis is still connected" "$(jb_sql "SELECT bool_and(redis_connected) FROM jobbuf_worker_status()")" t
jb_sql "SELECT jobbuf_drop_queue(q, force => true) FROM unnest(ARRAY['wt', 'beside']) q" >/dev/null

# ---- bad values
refused() {  # WHAT SQL PATTERN
  local out
  out=$(jb_psql -qtAX -c "$2" 2>&1)
  expect_match "$1" "$out" "$3"
}
refused "max_in_redis 0" "SELECT jobbuf_create_queue('b1', 'list', '{\"max_in_redis\": 0}')" 'must be a positive integer'
refused "max_in_redis 1.5" "SELECT jobbuf_create_queue('b1', 'list', '{\"max_in_redis\": 1.5}')" 'must be a positive integer'
refused "max_in_redis on a none queue" "SELECT jobbuf_create_queue('b1', 'none', '{\"max_in_redis\": 10}')" 'applies only to targets the worker pushes to'
refused "max_rate on a none queue" "SELECT jobbuf_create_queue('b1', 'none', '{\"max_rate\": 10}')" 'HINT: +a none queue is claimed with jobbuf_claim: max_in_flight'
refused "max_rate 0" "SELECT jobbuf_create_queue('b1', 'list', '{\"max_rate\": 0}')" 'must be a number of jobs per second above 0'
refused "max_rate as text" "SELECT jobbuf_create_queue('b1', 'list', '{\"max_rate\": \"fast\"}')" 'must be a number of jobs per second'
refused "a stream's maxlen below max_in_redis" "SELECT jobbuf_create_queue('b1', 'stream', '{\"maxlen\": 100, \"max_in_redis\": 500}')" 'maxlen \(100\) cannot be below max_in_redis \(500\)'
refused "jobbuf_alter_queue: max_rate -1" "SELECT jobbuf_alter_queue('capped', '{\"max_rate\": -1}')" 'must be a number of jobs per second above 0'
expect_eq "nothing created or changed" "$(jb_sql "SELECT count(*) FROM jobbuf.queues WHERE name = 'b1'"),$(jb_sql "SELECT options::text FROM jobbuf.queues WHERE name = 'capped'")" '0,{"max_in_redis": 500}'
checks_done

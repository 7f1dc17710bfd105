#!/usr/bin/env bash
# Fairness: the worker drains queues round-robin, one batch per queue per turn, so a queue with
# 5 jobs is delivered long before a queue with 5000 (committed first, in the same transaction)
# has finished. Order of arrival: last_delivery_at in jobbuf_stats (one timestamp per batch
# transaction) and the Redis list lengths sampled by a watcher while the big queue drains.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.batch_size = 100
jobbuf.poll_interval = '30s'"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('big', 'list');
SELECT jobbuf_create_queue('small', 'list');
SQL
sleep 0.3

# The watcher samples both list lengths in a tight loop until the big queue is complete.
ruby -rredis -e '
  r = Redis.new(port: ARGV[0].to_i)
  deadline = Time.now + 20
  loop do
    big, small = r.pipelined { |p| p.llen("jobbuf:big"); p.llen("jobbuf:small") }
    puts "#{big} #{small}"
    break if big >= 5000 || Time.now > deadline
  end' "$JB_REDIS_PORT" >"$JB_RUN/samples" &
watcher=$!
sleep 0.2
jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('big', jsonb_build_object('n', n)) FROM generate_series(1, 5000) n;
SELECT jobbuf_stage('small', jsonb_build_object('n', n)) FROM generate_series(1, 5) n;
COMMIT;
SQL
wait $watcher

expect_eq "all delivered" "$(jb_redis LLEN jobbuf:big) $(jb_redis LLEN jobbuf:small)" "5000 5"
first_small=$(awk '$2 == 5 { print $1; exit }' "$JB_RUN/samples")
say "big queue's length when the small queue was complete: ${first_small:-never seen}"
check "small queue complete while the big one had at most 5 of its 50 batches in Redis" \
  [ "${first_small:-99999}" -le 500 ]
expect_eq "small queue finished before the big one (last_delivery_at)" \
  "$(jb_sql "SELECT (SELECT last_delivery_at FROM jobbuf_stats() WHERE queue = 'small') < (SELECT last_delivery_at FROM jobbuf_stats() WHERE queue = 'big')")" t
expect_eq "delivered_total" "$(jb_sql "SELECT string_agg(delivered_total::text, ' ' ORDER BY queue) FROM jobbuf_stats()")" "5000 5"
expect_eq "big queue in id order" \
  "$(jb_redis LRANGE jobbuf:big 0 -1 | ruby -rjson -e 'n = STDIN.each_line.map { |l| JSON.parse(l)["n"] }; puts n == (1..5000).to_a')" true

e2e_done

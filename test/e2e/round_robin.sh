#!/usr/bin/env bash
# Fairness: the worker drains queues round-robin, one batch per queue per turn, so a queue with
# 5 jobs is delivered long before a queue with 5000 jobs (committed first, in the same
# transaction) has finished. Both queues push to the same Redis list (key option), so the list
# itself records the order of arrival; last_delivery_at in jobbuf_stats agrees.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.batch_size = 100
jobbuf.poll_interval = '30s'"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('big', 'list', '{"key": "rr:arrivals"}');
SELECT jobbuf_create_queue('small', 'list', '{"key": "rr:arrivals"}');
SQL
worker_idle || fail "the worker did not go back to sleep after the queues were created"
jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('big', jsonb_build_object('q', 'big', 'n', n)) FROM generate_series(1, 5000) n;
SELECT jobbuf_stage('small', jsonb_build_object('q', 'small', 'n', n)) FROM generate_series(1, 5) n;
COMMIT;
SQL
jb_wait_until '[ "$(jb_redis LLEN rr:arrivals)" -ge 5005 ]' 20
wait_staged 0 || fail "the worker did not commit its last batch"   # it pushes first, then commits

expect_eq "all delivered" "$(jb_redis LLEN rr:arrivals)" 5005
positions=$(jb_redis LRANGE rr:arrivals 0 -1 | ruby -rjson -e '
  jobs = STDIN.each_line.map { |l| JSON.parse(l) }
  small = jobs.each_index.select { |i| jobs[i]["q"] == "small" }
  big_before = jobs[0..small.last].count { |j| j["q"] == "big" }
  puts "#{small.last} #{big_before}"')
read -r last_small big_before <<<"$positions"
say "the small queue's last job arrived at position $last_small, after $big_before of the 5000 big jobs"
expect_le "small queue complete within the first two turns (big jobs before it)" "$big_before" 200
expect_eq "small queue finished before the big one (last_delivery_at)" \
  "$(jb_sql "SELECT (SELECT last_delivery_at FROM jobbuf_stats() WHERE queue = 'small') < (SELECT last_delivery_at FROM jobbuf_stats() WHERE queue = 'big')")" t
expect_eq "delivered_total" "$(jb_sql "SELECT string_agg(delivered_total::text, ' ' ORDER BY queue) FROM jobbuf_stats()")" "5000 5"
expect_eq "each queue in id order" \
  "$(jb_redis LRANGE rr:arrivals 0 -1 | ruby -rjson -e '
      jobs = STDIN.each_line.map { |l| JSON.parse(l) }
      big = jobs.select { |j| j["q"] == "big" }.map { |j| j["n"] }
      small = jobs.select { |j| j["q"] == "small" }.map { |j| j["n"] }
      puts big == (1..5000).to_a && small == (1..5).to_a')" true

e2e_done

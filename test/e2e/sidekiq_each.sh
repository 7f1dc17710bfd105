#!/usr/bin/env bash
# End-to-end: the `sidekiq` target (delivery 'each') against a real, unmodified Sidekiq server
# (Debian's ruby-sidekiq) running test/consumers/sidekiq/app.rb.
#
# Part 1, Redis only (no Sidekiq listens on these queues): the JSON jobbuf pushes — class, args,
# extra keys, queue, 24-hex jid, retry, created_at/enqueued_at as float seconds (Sidekiq 6/7) or
# integer milliseconds (sidekiq_version 8), reserved keys in the payload replaced, scheduled jobs
# in `schedule` scored by run_at without enqueued_at, and the namespace option's key prefix.
# Part 2, with Sidekiq running: committed jobs run exactly once, rolled-back ones never, a
# scheduled job runs after run_at and not before, sidekiq_queue routes to another Sidekiq queue,
# and a failing job goes through Sidekiq's own retry set (it has `retry`).
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh
source test/consumers/sidekiq/sidekiq.sh
source test/harness/preconditions.sh
source test/consumers/checks.sh

# rb_expect RAW_JSON 'ruby condition over j (parsed) and raw (text)': true → exit 0.
rb_expect() {
  RAW="$1" ruby -rjson -e 'raw = ENV["RAW"]; j = JSON.parse(raw); exit(eval(ARGV[0]) ? 0 : 1)' "$2"
}
rb_expect_staged() { STAGED="$1" rb_expect "$2" "$3"; }
# Number of times KEY appears as an object key in RAW (duplicate keys would slip past a parser).
key_count() { grep -o "\"$2\"[[:space:]]*:" <<<"$1" | wc -l; }

cleanup() {
  jb_stop_sidekiq_reporting "$failures"
  jb_stop_all
}

jb_start_servers cleanup

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('peek', 'sidekiq');
SELECT jobbuf_create_queue('peek8', 'sidekiq', '{"sidekiq_version": 8}');
SELECT jobbuf_create_queue('nsq', 'sidekiq', '{"namespace": "myapp"}');
SELECT jobbuf_create_queue('hard', 'sidekiq');
SELECT jobbuf_create_queue('routed_src', 'sidekiq', '{"sidekiq_queue": "routed"}');
SQL

# ---------------------------------------------------------------- part 1: the JSON in Redis
echo "# part 1: jobs as pushed to Redis (no Sidekiq running)"
# stage_refused PAYLOAD: staging it on the sidekiq queue `hard` must fail in the caller.
stage_refused() { ! jb_sql "SELECT jobbuf_stage('hard', '$1')" >/dev/null 2>&1; }
check "staging refuses a sidekiq job without a string class" stage_refused '{"class": 1, "args": []}'
check "staging refuses a sidekiq job without an args array" stage_refused '{"class": "HardJob", "args": 1}'
check "staging refuses a sidekiq job that is not an object" stage_refused '[1]'
check "nothing staged by the refused attempts" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]
staged=$(jb_sql "SELECT jobbuf_stage('peek', '{\"class\": \"HardJob\", \"args\": [1, \"two\", {\"three\": 3.5}],
                   \"tags\": [\"t1\"], \"queue\": \"bogus\", \"jid\": \"bogus\", \"created_at\": 1, \"enqueued_at\": 2}')
                 || ' ' || extract(epoch FROM now())")
peek_id=${staged% *}; peek_staged=${staged#* }
jb_wait_until '[ "$(jb_redis LLEN queue:peek)" -ge 1 ]' 10 || true
raw=$(jb_redis LRANGE queue:peek 0 -1)
echo "# queue:peek -> $raw"
check "immediate job pushed with LPUSH queue:peek (one element)" [ "$(jb_redis LLEN queue:peek)" = 1 ]
check "SADD queues peek" [ "$(jb_redis SISMEMBER queues peek)" = 1 ]
check "class and args carried" rb_expect "$raw" 'j["class"] == "HardJob" && j["args"] == [1, "two", {"three" => 3.5}]'
check "extra payload keys kept (tags)" rb_expect "$raw" 'j["tags"] == ["t1"]'
check "queue is the jobbuf queue name" rb_expect "$raw" 'j["queue"] == "peek"'
check "jid is 24 lowercase hex characters" rb_expect "$raw" 'j["jid"].is_a?(String) && j["jid"].match?(/\A[0-9a-f]{24}\z/)'
check "retry: true added when the payload has none" rb_expect "$raw" 'j["retry"] == true'
for k in queue jid created_at enqueued_at retry class; do
  check "exactly one \"$k\" key (payload's own reserved keys replaced)" [ "$(key_count "$raw" "$k")" = 1 ]
done
check "created_at is float epoch seconds with a decimal point" rb_expect "$raw" 'raw.match?(/"created_at":\s*\d{10}\.\d+[,}]/)'
check "enqueued_at is float epoch seconds with a decimal point" rb_expect "$raw" 'raw.match?(/"enqueued_at":\s*\d{10}\.\d+[,}]/)'
check "created_at is the staging time (±10 ms)" \
  rb_expect_staged "$peek_staged" "$raw" '(j["created_at"] - ENV["STAGED"].to_f).abs < 0.01'
check "enqueued_at is the push time (>= created_at, within 10 s)" \
  rb_expect "$raw" 'j["enqueued_at"] >= j["created_at"] && j["enqueued_at"] - j["created_at"] < 10'
peek_jid=$(RAW="$raw" ruby -rjson -e 'print JSON.parse(ENV["RAW"])["jid"]')

jb_sql "SELECT jobbuf_stage('peek', '{\"class\": \"HardJob\", \"args\": [2], \"retry\": 5}')" >/dev/null
jb_sql "SELECT jobbuf_stage('peek', '{\"class\": \"HardJob\", \"args\": [3], \"retry\": false}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN queue:peek)" -ge 3 ]' 10 || true
raw2=$(jb_redis LINDEX queue:peek 1)   # LPUSH: the newest is at index 0
raw3=$(jb_redis LINDEX queue:peek 0)
check "payload's retry: 5 kept, not overridden" rb_expect "$raw2" 'j["args"] == [2] && j["retry"] == 5'
check "payload's retry: 5 appears once" [ "$(key_count "$raw2" retry)" = 1 ]
check "payload's retry: false kept" rb_expect "$raw3" 'j["args"] == [3] && j["retry"] == false'
check "payload's retry: false appears once" [ "$(key_count "$raw3" retry)" = 1 ]
PEEK_JID=$peek_jid check "jids differ between jobs" rb_expect "$raw2" 'j["jid"] != ENV["PEEK_JID"]'

staged8=$(jb_sql "SELECT jobbuf_stage('peek8', '{\"class\": \"HardJob\", \"args\": []}') || ' ' || extract(epoch FROM now())")
staged8=${staged8#* }
jb_wait_until '[ "$(jb_redis LLEN queue:peek8)" -ge 1 ]' 10 || true
raw8=$(jb_redis LINDEX queue:peek8 0)
echo "# queue:peek8 -> $raw8"
check "sidekiq_version 8: created_at is integer epoch milliseconds" rb_expect "$raw8" 'raw.match?(/"created_at":\s*\d{13}[,}]/)'
check "sidekiq_version 8: enqueued_at is integer epoch milliseconds" rb_expect "$raw8" 'raw.match?(/"enqueued_at":\s*\d{13}[,}]/)'
check "sidekiq_version 8: created_at is the staging time in ms (±10 ms)" \
  rb_expect_staged "$staged8" "$raw8" 'j["created_at"].is_a?(Integer) && (j["created_at"] - ENV["STAGED"].to_f * 1000).abs < 10'

far=$(jb_sql "SELECT jobbuf_stage('peek', '{\"class\": \"HardJob\", \"args\": [\"far\"]}', now() + interval '1 hour')
              || ' ' || extract(epoch FROM now() + interval '1 hour')")
far_run_at=${far#* }
jb_wait_until '[ "$(jb_redis ZCARD schedule)" -ge 1 ]' 10 || true
sched=$(jb_redis ZRANGE schedule 0 -1 WITHSCORES)
sraw=$(sed -n 1p <<<"$sched"); sscore=$(sed -n 2p <<<"$sched")
echo "# schedule -> $sraw @ $sscore"
check "future run_at: pushed at once to ZADD schedule" [ "$(jb_redis ZCARD schedule)" = 1 ]
check "future run_at: not in queue:peek" [ "$(jb_redis LLEN queue:peek)" = 3 ]
check "schedule score is run_at in float epoch seconds (±1 ms)" \
  ruby -e 'exit((ARGV[0].to_f - ARGV[1].to_f).abs < 0.001)' "$sscore" "$far_run_at"
check "scheduled job has class, args, queue, jid, retry, created_at" \
  rb_expect "$sraw" 'j["class"] == "HardJob" && j["args"] == ["far"] && j["queue"] == "peek" && j["jid"].match?(/\A[0-9a-f]{24}\z/) && j["retry"] == true && j["created_at"].is_a?(Float)'
check "scheduled job has no enqueued_at" rb_expect "$sraw" '!j.key?("enqueued_at")'

jb_sql "SELECT jobbuf_stage('nsq', '{\"class\": \"HardJob\", \"args\": [\"ns\"]}')" >/dev/null
jb_sql "SELECT jobbuf_stage('nsq', '{\"class\": \"HardJob\", \"args\": [\"ns-later\"]}', now() + interval '1 hour')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN myapp:queue:nsq)" -ge 1 ] && [ "$(jb_redis ZCARD myapp:schedule)" -ge 1 ]' 10 || true
check "namespace: LPUSH myapp:queue:nsq" rb_expect "$(jb_redis LINDEX myapp:queue:nsq 0)" 'j["args"] == ["ns"] && j["queue"] == "nsq"'
check "namespace: SADD myapp:queues nsq" [ "$(jb_redis SISMEMBER myapp:queues nsq)" = 1 ]
check "namespace: ZADD myapp:schedule" rb_expect "$(jb_redis ZRANGE myapp:schedule 0 0)" 'j["args"] == ["ns-later"]'
check "namespace: no un-prefixed queue:nsq key" [ "$(jb_redis EXISTS queue:nsq)" = 0 ]
check "namespace: queues set without prefix has no nsq" [ "$(jb_redis SISMEMBER queues nsq)" = 0 ]
check "namespace: un-prefixed schedule holds only peek's job" [ "$(jb_redis ZCARD schedule)" = 1 ]

# ---------------------------------------------------------------- part 2: a real Sidekiq
echo "# part 2: a real Sidekiq $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION') server"
RUN_LOG=$JB_RUN/ran.jsonl
jb_start_sidekiq "$RUN_LOG" hard routed
check "sidekiq process started and registered" jb_wait_sidekiq_ready 20

# Scheduled first: Sidekiq's poller sleeps up to 5 s before its first poll.
sched=$(jb_sql "SELECT jobbuf_stage('hard', '{\"class\": \"HardJob\", \"args\": [\"scheduled\"]}', now() + interval '3 seconds')
                || ' ' || extract(epoch FROM now() + interval '3 seconds')")
sched_run_at=${sched#* }

# Committed, in several shapes: one transaction of 20, 10 autocommit statements, the array form,
# a plain INSERT, and a job kept across a rolled-back savepoint.
jb_psql -q >/dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('hard', jsonb_build_object('class', 'HardJob', 'args', jsonb_build_array(g)))
  FROM generate_series(1, 20) g;
COMMIT;
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [21]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [22]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [23]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [24]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [25]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [26]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [27]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [28]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [29]}');
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [30]}');
SELECT jobbuf_stage('hard', ARRAY(SELECT jsonb_build_object('class', 'HardJob', 'args', jsonb_build_array(g))
                                  FROM generate_series(31, 35) g));
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('hard', '{"class": "HardJob", "args": [36]}');
BEGIN;
SAVEPOINT s;
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [1011]}');
ROLLBACK TO SAVEPOINT s;
SELECT jobbuf_stage('hard', '{"class": "HardJob", "args": [37]}');
COMMIT;
BEGIN;
SELECT jobbuf_stage('hard', jsonb_build_object('class', 'HardJob', 'args', jsonb_build_array(g)))
  FROM generate_series(1001, 1010) g;
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('hard', '{"class": "HardJob", "args": [1012]}');
ROLLBACK;
SELECT jobbuf_stage('routed_src', '{"class": "HardJob", "args": ["routed-1"]}');
SELECT jobbuf_stage('hard', '{"class": "FailJob", "args": ["boom"]}');
SELECT jobbuf_stage('hard', '{"class": "FailJob", "args": ["boom-no-retry"], "retry": false}');
SQL

# expect_runs: prints what is missing or wrong in the run log; exit 0 when all is as expected.
expect_runs() {
  ruby -rjson -e '
    runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }
    ran = runs.select { |r| r["kind"] == "ran" }
    want = (1..37).map { |n| [n] } + [["scheduled"], ["routed-1"]]
    problems = []
    want.each do |a|
      n = ran.count { |r| r["args"] == a }
      problems << "args #{a.inspect} ran #{n} times" if n != 1
    end
    ran.each { |r| problems << "unexpected run #{r["args"].inspect}" unless want.include?(r["args"]) }
    %w[boom boom-no-retry].each do |a|
      n = runs.count { |r| r["kind"] == "failed" && r["args"] == [a] }
      problems << "FailJob #{a} ran #{n} times" if n != 1
    end
    puts problems.first(10)
    exit(problems.empty? ? 0 : 1)' "$RUN_LOG"
}
jb_wait_until 'expect_runs >/dev/null' 25 || true
sleep 1.5   # a duplicate delivery would show up here
echo "# run log: $(wc -l <"$RUN_LOG") lines"
check "every committed job ran exactly once, no rolled-back job ran (jobs 1001-1012)" expect_runs

check "jids of the runs are distinct 24-hex" ruby -rjson -e '
  jids = File.readlines(ARGV[0]).map { |l| JSON.parse(l)["jid"] }
  exit(jids.uniq.size == jids.size && jids.all? { |j| j.to_s.match?(/\A[0-9a-f]{24}\z/) })' "$RUN_LOG"
# The scheduled job's enqueued_at is Sidekiq's own, written when its poller moved the job from
# the schedule to the queue: float seconds up to Sidekiq 7, integer milliseconds from 8 on.
SIDEKIQ_MAJOR=$(ruby -e 'require "sidekiq"; print Sidekiq::VERSION.to_i')
check "Sidekiq saw queue hard, retry true, float created_at/enqueued_at on HardJob runs" ruby -rjson -e '
  sidekiq_stamp = ARGV[1].to_i >= 8 ? Integer : Float
  ran = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.select { |r| r["kind"] == "ran" && r["args"] != ["routed-1"] }
  exit(!ran.empty? && ran.all? { |r| r["queue"] == "hard" && r["retry"] == true && r["created_at"].is_a?(Float) &&
                                     r["enqueued_at"].is_a?(r["args"] == ["scheduled"] ? sidekiq_stamp : Float) })' \
  "$RUN_LOG" "$SIDEKIQ_MAJOR"
check "sidekiq_queue option: routed_src's job ran from Sidekiq queue 'routed'" ruby -rjson -e '
  r = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.find { |x| x["args"] == ["routed-1"] }
  exit(!r.nil? && r["queue"] == "routed")' "$RUN_LOG"
check "sidekiq_queue option: nothing pushed to queue:routed_src" [ "$(jb_redis EXISTS queue:routed_src)" = 0 ]

sched_ran_at=$(ruby -rjson -e '
  r = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.find { |x| x["args"] == ["scheduled"] }
  print r ? r["ran_at"] : ""' "$RUN_LOG")
echo "# scheduled job: run_at $sched_run_at, ran at ${sched_ran_at:-never}"
check "scheduled job ran" [ -n "$sched_ran_at" ]
check "scheduled job did not run before run_at" \
  ruby -e 'exit(!ARGV[0].empty? && ARGV[0].to_f >= ARGV[1].to_f)' "${sched_ran_at:-}" "$sched_run_at"

retry_job=$(jb_redis ZRANGE retry 0 -1 | grep '"FailJob"' | grep '"boom"' || true)
echo "# retry -> ${retry_job:-<empty>}"
[ -n "$retry_job" ] || retry_job='{}'
check "failing job (payload without retry) is in Sidekiq's retry set" [ "$(jb_redis ZCARD retry)" -ge 1 ]
check "retried job carries retry_count 0 and the error" \
  rb_expect "$retry_job" 'j["args"] == ["boom"] && j["retry_count"] == 0 && j["error_class"] == "RuntimeError"'
boom_jid=$(ruby -rjson -e '
  r = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.find { |x| x["args"] == ["boom"] }
  print r ? r["jid"] : ""' "$RUN_LOG")
BOOM_JID=$boom_jid check "retried job keeps the jid jobbuf gave it" rb_expect "$retry_job" '!ENV["BOOM_JID"].empty? && j["jid"] == ENV["BOOM_JID"]'
check "failing job with retry: false was dropped by Sidekiq (not in retry, not in dead)" \
  bash -c "! { redis-cli -p $JB_REDIS_PORT ZRANGE retry 0 -1; redis-cli -p $JB_REDIS_PORT ZRANGE dead 0 -1; } | grep -q boom-no-retry"

check "queue:hard drained by Sidekiq" [ "$(jb_redis LLEN queue:hard)" = 0 ]
wait_staged 0 "WHERE queue = 'hard'" || true   # the worker commits after its push
check "no staged jobs left in Postgres for hard" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'hard'")" = 0 ]
delivered=$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'hard'")
check "jobbuf_stats counts the 40 jobs delivered for hard (got $delivered)" [ "$delivered" = 40 ]

sidekiq_pid=$JB_SIDEKIQ_PID
jb_stop_sidekiq
check "Sidekiq stopped" bash -c "! kill -0 $sidekiq_pid 2>/dev/null"

if [ "$failures" -ne 0 ]; then
  echo "sidekiq_each: $failures check(s) failed"
  exit 1
fi
echo "sidekiq_each: all checks passed"

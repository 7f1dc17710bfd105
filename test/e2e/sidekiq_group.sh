#!/usr/bin/env bash
# End-to-end: delivery 'group' on the `sidekiq` target against a real, unmodified Sidekiq server
# (Debian's ruby-sidekiq) running test/consumers/sidekiq/app.rb.
#
# Part 1, queue `bulk` (group_class GroupJob, batch_size 100): 1,000 jobs committed in one
# transaction — next to jobs of rolled-back transactions and a rolled-back savepoint, and a
# transaction that stays open while the groups are claimed and then rolls back — become exactly
# 10 Sidekiq jobs of class GroupJob, args [group_id]; each perform(group_id) reads its 100 jobs with
# jobbuf_group and completes them. Every committed job is processed exactly once, no rolled-back
# job ever, jobbuf.jobs ends empty and jobbuf_stats counts 1,000 delivered. Then 300 more jobs in
# 30 small commits: between 3 and 30 groups, still exactly once.
# Part 2, queue `flaky` (group_class CrashOnceGroupJob, visibility 60 s, batch_size 10, worker poll
# 200 ms): the consumer returns without completing the first delivery of each group. Once every
# first delivery was abandoned the test expires the leases (an UPDATE of lease_until: a lease short
# enough to wait for could also run out while a slow machine still works on the second delivery);
# the worker then claims the jobs again under a NEW group id (no new commit needed: the poll does
# it) and Sidekiq runs them again; the second delivery sees attempts 1 and last_error
# 'lease expired', the abandoned group id is fenced (complete returns 0, jobbuf_group is empty),
# and every job is completed exactly once, with no third delivery.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh
source test/consumers/sidekiq/sidekiq.sh

source test/harness/preconditions.sh
source test/consumers/checks.sh

cleanup() {
  jb_stop_sidekiq_reporting "$failures"
  jb_stop_all
}

jb_start_redis
jb_start_postgres "jobbuf.poll_interval = '200ms'"
trap cleanup EXIT
trap 'exit 130' INT TERM

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('bulk', 'sidekiq', '{"delivery": "group", "group_class": "GroupJob", "batch_size": 100}');
SELECT jobbuf_create_queue('flaky', 'sidekiq',
  '{"delivery": "group", "group_class": "CrashOnceGroupJob", "batch_size": 10, "visibility": 60}');
SQL

RUN_LOG=$JB_RUN/ran.jsonl
jb_start_sidekiq "$RUN_LOG" bulk flaky
check "sidekiq $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION') process started and registered" jb_wait_sidekiq_ready 20


# ---------------------------------------------------------------- part 1: 1,000 jobs, 10 groups
echo "# part 1: queue bulk, 1000 committed jobs in one transaction, batch_size 100"
jb_psql -q >/dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'rolled_back', true))
  FROM generate_series(1, 40) g;
ROLLBACK;
SQL
# A transaction that has staged 30 jobs and stays open until every committed one was processed.
tx_open
tx_run "BEGIN; SELECT jobbuf_stage('bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'rolled_back', true))
  FROM generate_series(2001, 2030) g;" || not_ok "the transaction that stays open staged its jobs"
# ids of the committed jobs, in order, as the staging transaction got them
committed_ids=$JB_RUN/bulk_ids
t0=$(date +%s.%N)
jb_psql -qtAX >"$committed_ids" <<'SQL'
BEGIN;
SELECT jobbuf_stage('bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'n', g))
  FROM generate_series(1, 500) g;
SAVEPOINT s;
SELECT jobbuf_stage('bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'rolled_back', true))
  FROM generate_series(3001, 3010) g \g /dev/null
ROLLBACK TO SAVEPOINT s;
INSERT INTO jobbuf.jobs (queue, payload)
  SELECT 'bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'n', g)
  FROM generate_series(501, 1000) g
  RETURNING id;
COMMIT;
SQL

bulk_done() {
  rb_log_check '
    jobs = runs.select { |r| r["class"] == "GroupJob" }.flat_map { |r| r["jobs"] }
    jobs.map { |j| j["payload"]["n"] }.compact.uniq.size >= 1000'
}
jb_wait_until bulk_done 30 || true
t1=$(date +%s.%N)
tx_close ROLLBACK || true
# (the worker counts a group's delivery after its push, in a transaction of its own)
jb_wait_until "[ \"\$(jb_sql \"SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'bulk'\")\" -ge 1000 ]" 15 || true
sleep 1   # a duplicate or a late rolled-back job would show up here
echo "# 1000 jobs processed by GroupJob in $(ruby -e 'printf("%.2f", ARGV[1].to_f - ARGV[0].to_f)' "$t0" "$t1") s;" \
     "GroupJob runs: $(rb_log 'runs.count { |r| r["class"] == "GroupJob" }'), group sizes:" \
     "$(rb_log 'runs.select { |r| r["class"] == "GroupJob" }.map { |r| r["jobs"].size }.join(",")')"

check "committed ids read back (1000)" [ "$(wc -l <"$committed_ids")" = 1000 ]
check "exactly 10 GroupJob executions for 1000 jobs in one commit" \
  rb_log_check 'runs.count { |r| r["class"] == "GroupJob" } == 10'
check "each group holds 100 jobs, in id order" \
  rb_log_check 'g = runs.select { |r| r["class"] == "GroupJob" }; g.all? { |r| r["jobs"].size == 100 && r["jobs"].map { |j| j["id"] } == r["jobs"].map { |j| j["id"] }.sort }'
check "Sidekiq ran each as class GroupJob, args [group_id] (a uuid), queue bulk, 24-hex jid, retry true" \
  rb_log_check 'g = runs.select { |r| r["class"] == "GroupJob" }; !g.empty? && g.all? { |r|
    r["args"] == [r["group_id"]] && r["group_id"].match?(/\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/) &&
    r["queue"] == "bulk" && r["jid"].to_s.match?(/\A[0-9a-f]{24}\z/) && r["retry"] == true }'
check "10 distinct group ids and 10 distinct jids" \
  rb_log_check 'g = runs.select { |r| r["class"] == "GroupJob" }; g.map { |r| r["group_id"] }.uniq.size == 10 && g.map { |r| r["jid"] }.uniq.size == 10'
check "every committed job processed exactly once (ids and payloads 1..1000)" ruby -rjson -e '
  runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }
  want = File.readlines(ARGV[1]).map(&:to_i)
  jobs = runs.select { |r| r["class"] == "GroupJob" }.flat_map { |r| r["jobs"] }
  ids = jobs.map { |j| j["id"] }
  ns = jobs.map { |j| j["payload"]["n"] }
  problems = []
  problems << "ids processed: #{ids.size}, distinct #{ids.uniq.size}" unless ids.size == 1000 && ids.uniq.size == 1000
  problems << "ids differ from the committed ones" unless ids.sort == want
  problems << "payload numbers differ from 1..1000" unless ns.sort == (1..1000).to_a
  problems << "a payload does not match its args" unless jobs.all? { |j| j["payload"]["args"] == [j["payload"]["n"]] }
  puts problems
  exit(problems.empty? ? 0 : 1)' "$RUN_LOG" "$committed_ids"
check "no job of a rolled-back transaction or savepoint was ever processed" \
  rb_log_check '!runs.flat_map { |r| r["jobs"] || [] }.any? { |j| j["payload"]["rolled_back"] }'
check "every job was processed on its first attempt (attempts 0)" \
  rb_log_check 'runs.select { |r| r["class"] == "GroupJob" }.flat_map { |r| r["jobs"] }.all? { |j| j["attempts"] == 0 }'
check "jobbuf.jobs ends empty for bulk" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bulk'")" = 0 ]
check "nothing dead-lettered" [ "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" = 0 ]
delivered=$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'bulk'")
check "jobbuf_stats: delivered_total 1000 for bulk (got $delivered)" [ "$delivered" = 1000 ]
wait_census || fail "no census of the worker"
check "jobbuf_stats: bulk has 0 ready, 0 claimed" \
  [ "$(jb_sql "SELECT ready || '/' || claimed FROM jobbuf_stats() WHERE queue = 'bulk'")" = 0/0 ]
check "queue:bulk drained, Sidekiq retry and dead sets empty" \
  [ "$(jb_redis LLEN queue:bulk)/$(jb_redis ZCARD retry)/$(jb_redis ZCARD dead)" = 0/0/0 ]

echo "# part 1b: 300 more jobs in 30 commits of 10 while the worker delivers"
before=$(rb_log 'runs.count { |r| r["class"] == "GroupJob" }')
for c in $(seq 0 29); do
  echo "SELECT jobbuf_stage('bulk', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'n', g))
        FROM generate_series($((10001 + c * 10)), $((10010 + c * 10))) g;"
done | jb_psql -q >/dev/null
jb_wait_until 'rb_log_check "runs.select { |r| r[\"class\"] == \"GroupJob\" }.flat_map { |r| r[\"jobs\"] }.count { |j| j[\"payload\"][\"n\"].to_i > 10000 } >= 300"' 20 || true
jb_wait_until "[ \"\$(jb_sql \"SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'bulk'\")\" -ge 1300 ]" 15 || true
sleep 0.5   # a duplicate would show up here
groups_b=$(( $(rb_log 'runs.count { |r| r["class"] == "GroupJob" }') - before ))
echo "# 300 jobs in 30 commits became $groups_b groups"
check "300 jobs in 30 commits: between 3 and 30 groups (got $groups_b)" [ "$groups_b" -ge 3 ] && [ "$groups_b" -le 30 ]
check "300 jobs in 30 commits: each processed exactly once" rb_log_check '
  ns = runs.select { |r| r["class"] == "GroupJob" }.flat_map { |r| r["jobs"] }.map { |j| j["payload"]["n"] }.select { |n| n.to_i > 10000 }
  ns.sort == (10001..10300).to_a'
check "jobbuf.jobs empty again, delivered_total 1300" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bulk'")/$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'bulk'")" = 0/1300 ]

# ---------------------------------------------------------------- part 2: lease expiry
echo "# part 2: queue flaky, 25 jobs, batch_size 10, visibility 60 s; the consumer abandons each first delivery"
flaky_ids=$JB_RUN/flaky_ids
jb_psql -qtAX >"$flaky_ids" <<'SQL'
BEGIN;
SELECT jobbuf_stage('flaky', jsonb_build_object('class', 'Item', 'args', jsonb_build_array(g), 'n', g))
  FROM generate_series(1, 25) g;
COMMIT;
SQL
flaky_done() {
  rb_log_check 'runs.select { |r| r["kind"] == "completed" }.sum { |r| r["completed"] } >= 25'
}
flaky_abandoned() {
  rb_log_check 'runs.select { |r| r["kind"] == "abandoned" }.sum { |r| r["jobs"].size } >= 25'
}
jb_wait_until flaky_abandoned 20 || true
read -r expired_jobs expired_at <<<"$(jb_sql "WITH u AS (UPDATE jobbuf.jobs SET lease_until = now() WHERE queue = 'flaky' RETURNING 1)
  SELECT count(*) || ' ' || extract(epoch FROM now()) FROM u")"
check "the 25 abandoned jobs held their leases until the test expired them ($expired_jobs)" [ "$expired_jobs" = 25 ]
jb_wait_until flaky_done 20 || true
sleep 1   # a third delivery would show up here
echo "# flaky: $(rb_log 'runs.count { |r| r["kind"] == "abandoned" }') abandoned deliveries" \
     "(sizes $(rb_log 'runs.select { |r| r["kind"] == "abandoned" }.map { |r| r["jobs"].size }.join(",")')," \
     "$(rb_log 'runs.count { |r| r["kind"] == "completed" }') completing deliveries" \
     "(sizes $(rb_log 'runs.select { |r| r["kind"] == "completed" }.map { |r| r["jobs"].size }.join(",")')," \
     "re-delivered $(rb_log '
        c = runs.select { |r| r["kind"] == "completed" && !r["jobs"].empty? }
        c.empty? ? "?" : format("%.2f", c.map { |r| r["enqueued_at"] }.min - '"$expired_at"')') s after the leases expired"
echo "# flaky stats: $(jb_sql "SELECT 'delivered_total=' || delivered_total || ' failed_total=' || failed_total FROM jobbuf_stats() WHERE queue = 'flaky'")"

check "flaky ids read back (25)" [ "$(wc -l <"$flaky_ids")" = 25 ]
check "first deliveries: every job handed out once with attempts 0, then abandoned" rb_log_check '
  a = runs.select { |r| r["kind"] == "abandoned" }.flat_map { |r| r["jobs"] }
  a.map { |j| j["payload"]["n"] }.sort == (1..25).to_a && a.all? { |j| j["attempts"] == 0 }'
check "second deliveries: every job handed out again, each exactly once, and completed" rb_log_check '
  c = runs.select { |r| r["kind"] == "completed" }
  c.flat_map { |r| r["jobs"] }.map { |j| j["payload"]["n"] }.sort == (1..25).to_a &&
    c.all? { |r| r["completed"] == r["jobs"].size }'
check "no third delivery of any job (each job in exactly 2 non-empty deliveries)" rb_log_check '
  d = runs.select { |r| r["class"] == "CrashOnceGroupJob" }.flat_map { |r| r["jobs"] }.group_by { |j| j["id"] }
  d.size == 25 && d.values.all? { |v| v.size == 2 }'
check "re-delivered under NEW group ids (no group id of a first delivery reused)" rb_log_check '
  a = runs.select { |r| r["kind"] == "abandoned" }.map { |r| r["group_id"] }
  c = runs.select { |r| r["kind"] == "completed" && !r["jobs"].empty? }.map { |r| r["group_id"] }
  !a.empty? && !c.empty? && (a & c).empty? && (a + c).uniq.size == a.size + c.size'
check "Sidekiq ran each delivery as CrashOnceGroupJob, args [group_id], queue flaky" rb_log_check '
  d = runs.select { |r| r["class"] == "CrashOnceGroupJob" }
  d.size >= 2 && d.all? { |r| r["args"] == [r["group_id"]] && r["queue"] == "flaky" }'
# A re-delivered group is a new Sidekiq job (other args, other group): it must not reuse the jid of
# the abandoned message, or a consumer that dedupes by jid (as the README invites) drops it and the
# group is never processed (it is re-claimed until max_attempts buries it).
echo "# flaky jids: $(rb_log 'runs.select { |r| r["class"] == "CrashOnceGroupJob" }.map { |r| "#{r["kind"]} #{r["group_id"][0, 8]} jid #{r["jid"]}" }.join("; ")')"
check "a re-delivered group gets a new Sidekiq jid (no jid of an abandoned message reused)" rb_log_check '
  d = runs.select { |r| r["class"] == "CrashOnceGroupJob" }
  d.map { |r| r["jid"] }.uniq.size == d.size'
check "second delivery: attempts 1 (the expired lease counted), last_error 'lease expired'" rb_log_check '
  c = runs.select { |r| r["kind"] == "completed" }.flat_map { |r| r["jobs"] }
  c.size == 25 && c.all? { |j| j["attempts"] == 1 && j["last_error"] == "lease expired" }'
# Per job: the push time of its second delivery (Sidekiq's enqueued_at, set by the worker).
second_pushes='second = {}
  runs.select { |r| r["kind"] == "completed" }.each { |r| r["jobs"].each { |j| second[j["id"]] = r["enqueued_at"] } }'
check "re-delivery only after the lease ran out (every second push after the expiry)" rb_log_check "$second_pushes
  second.size == 25 && second.values.all? { |t| t >= $expired_at }"
check "re-delivery within 15 s after the lease ran out (poll 200 ms; the original lease was 60 s)" rb_log_check "$second_pushes
  second.size == 25 && second.values.all? { |t| t - $expired_at <= 15 }"
check "stale consumer fenced: jobbuf_complete on an abandoned group id returns 0, jobbuf_group on it is empty" rb_log_check '
  s = runs.select { |r| r["kind"] == "completed" && !r["jobs"].empty? }.flat_map { |r| r["stale"] }
  !s.empty? && s.all? { |x| x["complete"] == 0 && x["group_rows"] == 0 }'
check "flaky: jobbuf.jobs empty, nothing dead-lettered" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'flaky'")/$(jb_sql "SELECT count(*) FROM jobbuf.dead")" = 0/0 ]
check "queue:flaky drained, Sidekiq retry and dead sets empty" \
  [ "$(jb_redis LLEN queue:flaky)/$(jb_redis ZCARD retry)/$(jb_redis ZCARD dead)" = 0/0/0 ]
check "no empty delivery (every group message found its jobs under lease)" \
  rb_log_check '!runs.any? { |r| r["class"].to_s.end_with?("GroupJob") && r["jobs"].empty? }'

sidekiq_pid=$JB_SIDEKIQ_PID
jb_stop_sidekiq
check "Sidekiq stopped" bash -c "! kill -0 $sidekiq_pid 2>/dev/null"

if [ "$failures" -ne 0 ]; then
  echo "sidekiq_group: $failures check(s) failed"
  exit 1
fi
echo "sidekiq_group: all checks passed"

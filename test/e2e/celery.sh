#!/usr/bin/env bash
# End-to-end: the `celery` target consumed by a real, unmodified Celery worker (Debian 12's
# python3-celery 5.2 with the Redis broker, test/consumers/celery/jobbuf_e2e_tasks.py).
#
# - Queue `tasks` (celery_queue default "celery"): 2000 tasks committed in 20 transactions,
#   60 more with run_at 4 s ahead, next to 300 rolled-back ones. Every committed task runs exactly
#   once with the staged args and kwargs, under the task id derived from its jobbuf id
#   (<salt>-6a62-8000-...); no rolled-back one runs; the scheduled ones run not before their
#   run_at and carry it as eta; jobbuf.jobs is empty after.
# - Queue `digest` (celery_queue "{jb}digest", delivery group, group_class jobbuf_e2e.group,
#   batch_size 50): 150 jobs become 3 tasks called with the group id; the test reads each group
#   through jobbuf_group and finishes it with jobbuf_complete: every job in exactly one group.
# - A payload Celery cannot carry is refused in the producer's transaction, with a hint.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh
source test/consumers/checks.sh
source test/consumers/celery/celery.sh

cleanup() {
  jb_stop_celery || true
  jb_stop_all
}
jb_start_servers cleanup

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('tasks', 'celery');
SELECT jobbuf_create_queue('digest', 'celery', '{"celery_queue": "{jb}digest", "delivery": "group",
                                                 "group_class": "jobbuf_e2e.group", "batch_size": 50}');
SQL

RUN_LOG=$JB_RUN/celery_runs.jsonl
jb_start_celery "$RUN_LOG" 'celery,{jb}digest'
check "the Celery worker is ready" jb_wait_celery_ready 60
echo "# $(/usr/bin/python3 -c 'import celery, kombu; print("celery", celery.__version__, "kombu", kombu.__version__)')"

: >"$JB_RUN/committed.tsv"
for t in $(seq 1 20); do
  jb_psql -qtAX -F $'\t' >>"$JB_RUN/committed.tsv" <<SQL
BEGIN;
SELECT jobbuf_stage('tasks', p), (p->'args')::text, (p->'kwargs')::text FROM (
  SELECT jsonb_build_object('task', 'jobbuf_e2e.record', 'args', jsonb_build_array($t, g, 1.5, null),
                            'kwargs', jsonb_build_object('text', E'tab\t "q" é ✓', 'ok', true)) AS p
  FROM generate_series(1, 100) g) s;
COMMIT;
SQL
done
jb_psql -qtAX -F $'\t' >>"$JB_RUN/committed.tsv" <<'SQL'
BEGIN;
SELECT jobbuf_stage('tasks', p, run_at => r), (p->'args')::text, (p->'kwargs')::text FROM (
  SELECT jsonb_build_object('task', 'jobbuf_e2e.record', 'args', '[]'::jsonb,
           'kwargs', jsonb_build_object('due', extract(epoch FROM r)::float8)) AS p, r
  FROM (SELECT g, now() + interval '4 s' AS r FROM generate_series(1, 60) g) x) s;
COMMIT;
SQL
jb_psql -qtAX -F $'\t' >"$JB_RUN/rolled_back.tsv" <<'SQL'
BEGIN;
SELECT jobbuf_stage('tasks', jsonb_build_object('task', 'jobbuf_e2e.record', 'args', jsonb_build_array('rb', g)))
  FROM generate_series(1, 300) g;
ROLLBACK;
SQL
COMMITTED=$(grep -c . "$JB_RUN/committed.tsv")
echo "# staged $COMMITTED committed and $(grep -c . "$JB_RUN/rolled_back.tsv") rolled-back tasks"
jb_psql -qtAX >/dev/null <<'SQL'
SELECT jobbuf_stage('digest', jsonb_build_object('task', 'unused', 'args', jsonb_build_array(g))) FROM generate_series(1, 150) g;
SQL

runs_of() { [ -f "$RUN_LOG" ] && grep -c "\"kind\": \"$1\"" "$RUN_LOG" || echo 0; }
check "the worker ran $COMMITTED tasks" jb_wait_until '[ "$(runs_of run)" -ge '"$COMMITTED"' ]' 120
check "the worker ran 3 group tasks" jb_wait_until '[ "$(runs_of group)" -ge 3 ]' 30
sleep 1  # anything run twice would show up now

verify() {
  ruby -rjson -e '
    runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.select { |r| r["kind"] == "run" }
    want = File.readlines(ARGV[1], chomp: true).reject(&:empty?).map { |l| l.split("\t", 3) }
    rb = File.readlines(ARGV[2], chomp: true).reject(&:empty?)
    problems = []
    id_of = lambda do |tid|
      m = tid.match(/\A([0-9a-f]{8})-6a62-8000-([0-9a-f]{4})-([0-9a-f]{12})\z/) or next nil
      ((m[2] + m[3]).to_i(16) & ((1 << 62) - 1)).to_s
    end
    by_id = runs.group_by { |r| id_of.(r["task_id"]) }
    problems << "task ids not derived from jobbuf ids: #{by_id[nil].map { |r| r["task_id"] }.first(3)}" if by_id[nil]
    problems << "more than one salt" if runs.map { |r| r["task_id"][0, 8] }.uniq.size > 1
    want.each do |id, args, kwargs|
      hits = by_id[id] || []
      if hits.size != 1 then problems << "task #{id} ran #{hits.size} times"
      elsif hits[0]["args"] != JSON.parse(args) then problems << "task #{id}: args #{hits[0]["args"].inspect}, staged #{args}"
      elsif hits[0]["kwargs"] != JSON.parse(kwargs) then problems << "task #{id}: kwargs #{hits[0]["kwargs"].inspect}, staged #{kwargs}"
      elsif hits[0]["routing_key"] != "celery" then problems << "task #{id}: routing key #{hits[0]["routing_key"]}"
      end
    end
    (by_id.keys.compact - want.map(&:first)).each { |id| problems << "unexpected task #{id}" }
    (by_id.keys & rb).each { |id| problems << "rolled-back task #{id} ran" }
    late = runs.select { |r| r["kwargs"].key?("due") }
    problems << "#{late.size} scheduled tasks ran, not 60" unless late.size == 60
    late.each do |r|
      due = r["kwargs"]["due"]
      problems << "task #{r["task_id"]} ran at #{r["ran_at"]}, before its run_at #{due}" if r["ran_at"] < due
      eta = r["eta"] && Time.iso8601(r["eta"]).to_f rescue nil
      problems << "task #{r["task_id"]}: eta #{r["eta"].inspect}, run_at #{due}" unless eta && (eta - due).abs < 0.001
    end
    problems << "an immediate task carried an eta" if runs.any? { |r| !r["kwargs"].key?("due") && r["eta"] }
    puts problems.first(10).map { |p| "#   #{p}" }
    exit(problems.empty? ? 0 : 1)' -rtime "$RUN_LOG" "$JB_RUN/committed.tsv" "$JB_RUN/rolled_back.tsv"
}
check "every committed task ran exactly once with its args and kwargs; no rolled-back one; scheduled ones not before run_at, with it as eta" verify
check "jobbuf.jobs is empty for tasks" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'tasks'"'")" = 0 ]' 10

check "the group tasks were called with a group id, routed to {jb}digest" \
  rb_log_check 'g = runs.select { |r| r["kind"] == "group" }; g.size == 3 && g.all? { |r| r["task"] == "jobbuf_e2e.group" && r["args"].size == 1 && r["routing_key"] == "{jb}digest" }'
# shellcheck disable=SC2046  # one argument a group id
check_groups_finished args 150 $(rb_log 'runs.select { |r| r["kind"] == "group" }.map { |r| r["args"][0] }.join(" ")')

refused() { refused_with_hint tasks "$@"; }  # refused PAYLOAD PATTERN
check "a payload without task is refused with a hint" refused '{"args": []}' 'needs a string "task"'
check "args that are not an array are refused" refused '{"task": "t", "args": {}}' '"args" must be an array'
check "kwargs that are not an object are refused" refused '{"task": "t", "kwargs": []}' '"kwargs" must be an object'
check "an unknown key is refused" refused '{"task": "t", "queue": "x"}' '"queue" is not a key'
group_without_class() {
  local out
  out=$(jb_psql -v ON_ERROR_STOP=1 -c "SELECT jobbuf_create_queue('g2', 'celery', '{\"delivery\": \"group\"}')" 2>&1) && return 1
  grep -q 'needs the option group_class' <<<"$out"
}
check "a celery queue with delivery group needs group_class" group_without_class

if [ "$failures" -ne 0 ]; then
  tail -n 20 "$JB_CELERY_LOG" | sed 's/^/#   /'
  grep -E 'WARNING|ERROR' "$JB_RUN/postgres.log" | tail -5 | sed 's/^/#   /'
  echo "celery: $failures check(s) failed"
  exit 1
fi
echo "celery: all checks passed"
exit 0

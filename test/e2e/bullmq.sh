#!/usr/bin/env bash
# End-to-end: the `bullmq` target consumed by the real, unmodified BullMQ Worker
# (test/consumers/node/bullmq_worker.js, the bullmq version the lockfile pins).
#
# - The reference script the target sends is what that BullMQ version's Queue.add writes
#   (bullmq_format_check.js compare; the unit tests check the target sends that script).
# - Queue `mail` (prefix "{jb}", bullmq_queue "mail"): 2000 immediate jobs committed in 20
#   transactions, 40 with opts (priority, attempts, backoff, remove*), 60 with run_at 4 s ahead,
#   next to 300 rolled-back ones. Every committed job runs exactly once, with the staged name and
#   data, under its id jb-<salt>-<jobbuf id>; no rolled-back job runs; the delayed ones run not
#   before their run_at; jobbuf.jobs is empty after.
# - Queue `digest` (delivery group, group_class digest_batch, batch_size 50): 150 jobs become
#   3 BullMQ jobs named digest_batch whose data is {"group_id": ...}; the test reads each group
#   through jobbuf_group and finishes it with jobbuf_complete: every job in exactly one group.
# - A payload BullMQ cannot carry is refused in the producer's transaction, with a hint.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/harness/servers.sh
source test/consumers/checks.sh

bash test/consumers/install.sh
NODE_DIR=$ROOT/test/consumers/node

WORKER_PIDS=()
cleanup() {
  jb_stop_pids "${WORKER_PIDS[@]}"
  jb_stop_all
}
jb_start_servers cleanup
URL=redis://127.0.0.1:$JB_REDIS_PORT/0

echo "# BullMQ $(node -p "require('$NODE_DIR/node_modules/bullmq/package.json').version")"
check "the target's script writes exactly what this BullMQ's Queue.add writes" \
  node "$NODE_DIR/bullmq_format_check.js" compare --url "$URL" --queue fmt

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('mail', 'bullmq', '{"prefix": "{jb}", "bullmq_queue": "mail"}');
SELECT jobbuf_create_queue('digest', 'bullmq', '{"delivery": "group", "group_class": "digest_batch", "batch_size": 50}');
SQL

# start_worker QUEUE PREFIX: a BullMQ Worker recording to $JB_RUN/QUEUE.jsonl.
start_worker() {
  node "$NODE_DIR/bullmq_worker.js" --url "$URL" --queue "$1" --prefix "$2" --concurrency 8 \
    --out "$JB_RUN/$1.jsonl" >"$JB_RUN/$1.worker.out" 2>&1 </dev/null &
  WORKER_PIDS+=($!)
}
start_worker mail '{jb}'
start_worker digest bull
check "two BullMQ Workers started" \
  jb_wait_until '[ "$(cat "$JB_RUN/mail.worker.out" "$JB_RUN/digest.worker.out" | grep -c ready)" = 2 ]' 30

# Committed jobs: "id<TAB>name<TAB>data" lines in committed.tsv; delayed ones also carry due_ms.
: >"$JB_RUN/committed.tsv"
for t in $(seq 1 20); do
  jb_psql -qtAX -F $'\t' >>"$JB_RUN/committed.tsv" <<SQL
BEGIN;
SELECT jobbuf_stage('mail', p), p->>'name', (p->'data')::text FROM (
  SELECT jsonb_build_object('name', 'send', 'data', jsonb_build_object('t', $t, 'g', g, 'text', E'tab\t "q" é ✓',
                            'list', jsonb_build_array(g, 1.5, null, true))) AS p
  FROM generate_series(1, 100) g) s;
COMMIT;
SQL
done
jb_psql -qtAX -F $'\t' >>"$JB_RUN/committed.tsv" <<'SQL'
SELECT jobbuf_stage('mail', p), p->>'name', (p->'data')::text FROM (
  SELECT jsonb_build_object('name', 'vip', 'data', g,
         'opts', jsonb_build_object('priority', g % 7, 'attempts', 3, 'backoff', 100,
                                    'removeOnComplete', true, 'removeOnFail', 10)) AS p
  FROM generate_series(1, 40) g) s;
SQL
jb_psql -qtAX -F $'\t' >>"$JB_RUN/committed.tsv" <<'SQL'
BEGIN;
SELECT jobbuf_stage('mail', p, run_at => r), p->>'name', (p->'data')::text FROM (
  SELECT jsonb_build_object('name', 'later', 'data',
           jsonb_build_object('due_ms', (extract(epoch FROM r) * 1000)::bigint)) AS p, r
  FROM (SELECT g, now() + interval '4 s' AS r FROM generate_series(1, 60) g) x) s;
COMMIT;
SQL
jb_psql -qtAX -F $'\t' >"$JB_RUN/rolled_back.tsv" <<'SQL'
BEGIN;
SELECT jobbuf_stage('mail', jsonb_build_object('name', 'rolled-back', 'data', g)), 'rolled-back', g::text
  FROM generate_series(1, 300) g;
ROLLBACK;
SQL
COMMITTED=$(grep -c . "$JB_RUN/committed.tsv")
echo "# staged $COMMITTED committed and $(grep -c . "$JB_RUN/rolled_back.tsv") rolled-back jobs"

jb_psql -qtAX >/dev/null <<'SQL'
SELECT jobbuf_stage('digest', jsonb_build_object('name', 'part', 'data', g)) FROM generate_series(1, 150) g;
SQL

lines_in() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
check "the Worker ran $COMMITTED jobs" jb_wait_until '[ "$(lines_in "$JB_RUN/mail.jsonl")" -ge '"$COMMITTED"' ]' 90
sleep 1  # anything run twice would show up now

verify() {
  ruby -rjson -e '
    runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }
    want = File.readlines(ARGV[1], chomp: true).reject(&:empty?).map { |l| l.split("\t", 3) }
    rb = File.readlines(ARGV[2], chomp: true).reject(&:empty?).map { |l| l.split("\t", 2)[0] }
    problems = []
    by_id = runs.group_by { |r| r["id"][/\Ajb-[0-9a-f]{8}-(\d+)\z/, 1] }
    problems << "ids not of the form jb-<salt>-<id>: #{by_id[nil].map { |r| r["id"] }.first(3)}" if by_id[nil]
    problems << "more than one salt" if runs.map { |r| r["id"][3, 8] }.uniq.size > 1
    want.each do |id, name, data|
      hits = by_id[id] || []
      if hits.size != 1 then problems << "job #{id} ran #{hits.size} times"
      elsif hits[0]["name"] != name then problems << "job #{id}: name #{hits[0]["name"].inspect}"
      elsif hits[0]["data"] != JSON.parse(data) then problems << "job #{id}: data #{hits[0]["data"].inspect}, staged #{data}"
      end
    end
    (by_id.keys.compact - want.map(&:first)).each { |id| problems << "unexpected job #{id}" }
    (by_id.keys & rb).each { |id| problems << "rolled-back job #{id} ran" }
    runs.select { |r| r["name"] == "later" }.each do |r|
      due = r["data"]["due_ms"]
      problems << "delayed job #{r["id"]} ran at #{r["ran_at"]}, before its run_at #{due}" if r["ran_at"] < due || r["processedOn"] < due
      # (BullMQ sets the hash field delay to 0 when it promotes the job; opts keep it)
      problems << "delayed job #{r["id"]}: opts #{r["opts"]}" unless r["opts"]["delay"].to_i > 0
    end
    vip = runs.select { |r| r["name"] == "vip" }
    problems << "opts not carried" unless vip.size == 40 && vip.all? { |r|
      r["priority"] == r["data"] % 7 && r["opts"]["attempts"] == 3 && r["opts"]["backoff"] == {"type" => "fixed", "delay" => 100} &&
      r["opts"]["removeOnComplete"] == true && r["opts"]["removeOnFail"] == 10 && r["opts"]["jobId"] == r["id"] }
    puts problems.first(10).map { |p| "#   #{p}" }
    exit(problems.empty? ? 0 : 1)' "$JB_RUN/mail.jsonl" "$JB_RUN/committed.tsv" "$JB_RUN/rolled_back.tsv"
}
check "every committed job ran exactly once with its name, data and opts; no rolled-back job; delayed ones not before run_at" verify
check "jobbuf.jobs is empty for mail" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'mail'"'")" = 0 ]' 10
check "BullMQ keeps $((COMMITTED - 40)) completed jobs (the 40 removeOnComplete ones removed)" \
  [ "$(jb_redis ZCARD '{jb}:mail:completed')" = $((COMMITTED - 40)) ]
check "every key of the queue carries the {jb} hash tag" \
  [ -z "$(jb_redis --scan --pattern '*mail*' | grep -v '^{jb}:mail:')" ]

# Group delivery: the test is the consumer's group reader.
check "3 group jobs ran" jb_wait_until '[ "$(lines_in "$JB_RUN/digest.jsonl")" -ge 3 ]' 30
sleep 1
RUN_LOG=$JB_RUN/digest.jsonl
check "the group jobs are named digest_batch, carry only a group id and a jbg- id" \
  rb_log_check 'runs.size == 3 && runs.all? { |r| r["name"] == "digest_batch" && r["data"].keys == ["group_id"] && r["id"].start_with?("jbg-") }'
# shellcheck disable=SC2046  # one argument a group id
check_groups_finished data 150 $(rb_log 'runs.map { |r| r["data"]["group_id"] }.join(" ")')

refused() { refused_with_hint mail "$@"; }  # refused PAYLOAD PATTERN
check "a payload without name is refused with a hint" refused '{"data": 1}' 'needs a string "name"'
check "a payload without data is refused" refused '{"name": "x"}' 'needs a value "data"'
check "a float priority is refused" refused '{"name": "x", "data": 1, "opts": {"priority": 1.5}}' '"opts.priority" must be an integer from 0 to 2097151'
check "an unknown option is refused" refused '{"name": "x", "data": 1, "opts": {"jobId": "mine"}}' '"opts.jobId" is not a key'
check "an unknown top-level key is refused" refused '{"name": "x", "data": 1, "delay": 5}' '"delay" is not a key'

if [ "$failures" -ne 0 ]; then
  for f in mail digest; do sed 's/^/#   /' "$JB_RUN/$f.worker.out" | tail -5; done
  grep -E 'WARNING|ERROR' "$JB_RUN/postgres.log" | tail -5 | sed 's/^/#   /'
  echo "bullmq: $failures check(s) failed"
  exit 1
fi
echo "bullmq: all checks passed"
exit 0

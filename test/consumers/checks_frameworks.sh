#!/usr/bin/env bash
# Self-check of the job-framework test consumers and of jobbuf's documented wire formats for the
# `bullmq` and `celery` targets (docs/formats/), without the extension: a private redis-server,
# the real BullMQ Worker (test/consumers/node/bullmq_worker.js) and the real Celery worker
# (test/consumers/celery/), fed once by each framework's own producer (Queue.add / addBulk,
# apply_async) and once by jobbuf's reference producers (the script of
# src/redis/targets/bullmq_add_script.h through bullmq_format_check.js, celery/reference_message.py). TAP-style output; exits 1 on a failure.
#
#   bash test/consumers/checks_frameworks.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/harness/servers.sh
source test/consumers/checks.sh
source test/consumers/celery/celery.sh
bash test/consumers/install.sh || exit 1

jb_start_redis || exit 1
URL=redis://127.0.0.1:$JB_REDIS_PORT/0
NODE_DIR=$ROOT/test/consumers/node
CELERY_DIR=$ROOT/test/consumers/celery
PY=/usr/bin/python3

# lines_in FILE: how many JSON lines a consumer recorded so far.
lines_in() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# ---------------------------------------------------------------------------------------------
echo "# BullMQ $(node -p "require('$NODE_DIR/node_modules/bullmq/package.json').version")"

check "jobbuf's reference script writes exactly what Queue.add/addBulk write (same keys, fields, scores, events)" \
  node "$NODE_DIR/bullmq_format_check.js" compare --url "$URL" --queue fmt

BULL_LOG=$JB_RUN/bullmq.jsonl
node "$NODE_DIR/bullmq_worker.js" --url "$URL" --queue mail --out "$BULL_LOG" >"$JB_RUN/bullmq_worker.out" 2>&1 &
BULL_PID=$!
check "the BullMQ Worker starts" jb_wait_until 'grep -q ready "$JB_RUN/bullmq_worker.out"' 30

# BullMQ's own producer: 20 immediate jobs (addBulk), one prioritized, one delayed by 1.5 s.
(cd "$NODE_DIR" && node -e '
const { Queue } = require("bullmq");
const u = new URL(process.argv[1]);
(async () => {
  const q = new Queue("mail", { connection: { host: u.hostname, port: +u.port } });
  await q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: "own", data: { i } })));
  await q.add("own-vip", { i: 20 }, { priority: 3 });
  const delayed = await q.add("own-delayed", { due: Date.now() + 1500 }, { delay: 1500 });
  await q.close();
})().catch((e) => { console.error(e); process.exit(1); });' "$URL")
check "Queue.add's jobs are processed by the Worker (22 records)" \
  jb_wait_until '[ "$(lines_in "$BULL_LOG")" -ge 22 ]' 30

# jobbuf's reference producer: 20 immediate, one prioritized, one delayed (run_at = now + 1.5 s),
# then the first job pushed again (one job: BullMQ sees the id exists and records "duplicated").
now_ms=$(date +%s%3N)
node -e '
const now = +process.argv[1];
const jobs = Array.from({ length: 20 }, (_, i) => ({ id: `jb-0000abcd-${i + 1}`, name: "ref", data: { i } }));
jobs.push({ id: "jb-0000abcd-21", name: "ref-vip", data: { i: 20 }, opts: { priority: 3, attempts: 2 } });
jobs.push({ id: "jb-0000abcd-22", name: "ref-delayed", data: { due: now + 1500 }, run_at_ms: now + 1500 });
require("fs").writeFileSync(process.argv[2], JSON.stringify(jobs));
require("fs").writeFileSync(process.argv[3], JSON.stringify([jobs[0]]));' "$now_ms" "$JB_RUN/ref_jobs.json" "$JB_RUN/ref_again.json"
check "the reference script adds 22 jobs" \
  bash -c "node '$NODE_DIR/bullmq_format_check.js' add --url '$URL' --queue mail --jobs '$JB_RUN/ref_jobs.json' | grep -qx '{\"added\":22,\"duplicated\":0}'"
check "pushing a job again adds nothing (duplicated)" \
  bash -c "node '$NODE_DIR/bullmq_format_check.js' add --url '$URL' --queue mail --jobs '$JB_RUN/ref_again.json' | grep -qx '{\"added\":0,\"duplicated\":1}'"
check "the reference jobs are processed by the Worker (44 records)" \
  jb_wait_until '[ "$(lines_in "$BULL_LOG")" -ge 44 ]' 30

RUN_LOG=$BULL_LOG
check "every BullMQ job ran exactly once" rb_log_check 'runs.size == 44 && runs.map { |r| r["id"] }.uniq.size == 44'
check "the reference ids are the jobbuf ids" rb_log_check '(1..22).all? { |i| runs.count { |r| r["id"] == "jb-0000abcd-#{i}" } == 1 }'
check "delayed jobs (both producers) did not run before they were due" \
  rb_log_check 'd = runs.select { |r| r["name"].end_with?("delayed") }; d.size == 2 && d.all? { |r| r["ran_at"] >= r["data"]["due"] && r["processedOn"] >= r["data"]["due"] }'
check "the Worker sees the reference job's data, priority and opts" \
  rb_log_check 'r = runs.find { |x| x["id"] == "jb-0000abcd-21" }; r["data"] == {"i" => 20} && r["priority"] == 3 && r["opts"]["attempts"] == 2'

# A paused queue: the reference script puts the job in `paused` without a marker; it runs after resume.
redis-cli -p "$JB_REDIS_PORT" HSET bull:mail:meta paused 1 >/dev/null
redis-cli -p "$JB_REDIS_PORT" DEL bull:mail:marker >/dev/null
echo '[{"id":"jb-0000abcd-23","name":"ref-paused","data":{}}]' >"$JB_RUN/ref_paused.json"
node "$NODE_DIR/bullmq_format_check.js" add --url "$URL" --queue mail --jobs "$JB_RUN/ref_paused.json" >/dev/null
check "a job added to a paused queue waits in the paused list" \
  test "$(redis-cli -p "$JB_REDIS_PORT" LRANGE bull:mail:paused 0 -1)" = "jb-0000abcd-23"
(cd "$NODE_DIR" && node -e '
const { Queue } = require("bullmq"); const u = new URL(process.argv[1]);
const q = new Queue("mail", { connection: { host: u.hostname, port: +u.port } });
q.resume().then(() => q.close());' "$URL")
check "it runs once the queue is resumed" jb_wait_until 'grep -q jb-0000abcd-23 "$BULL_LOG"' 30

kill -TERM "$BULL_PID"
wait "$BULL_PID"
check "the BullMQ Worker exits 0 on SIGTERM" test $? -eq 0

# ---------------------------------------------------------------------------------------------
echo "# Celery $($PY -c 'import celery, kombu; print(celery.__version__, "/ kombu", kombu.__version__)')"

CELERY_LOG=$JB_RUN/celery.jsonl
jb_start_celery "$CELERY_LOG" celery "$URL"
check "the Celery worker starts" jb_wait_celery_ready 60

due=$(date +%s.%N | awk '{ printf "%.3f", $1 + 1.5 }')
(cd "$CELERY_DIR" && JOBBUF_CELERY_BROKER=$URL $PY -c '
import datetime, sys, jobbuf_e2e_tasks as t
for i in range(20):
    t.record_task.apply_async(("own", i))
t.record_task.apply_async(("own-vip", 20), priority=5)
due = float(sys.argv[1])
t.record_task.apply_async(("own-delayed", due), eta=datetime.datetime.fromtimestamp(due, datetime.timezone.utc))
t.group_task.apply_async(("7b0e4c1e-0000-4000-8000-000000000001",))' "$due")
check "apply_async's tasks are run by the worker (23 records)" \
  jb_wait_until '[ "$(lines_in "$CELERY_LOG")" -ge 23 ]' 30

$PY - "$JB_RUN/celery_ref.json" "$(date +%s.%N)" <<'EOF'
import json, sys
now = float(sys.argv[2])
jobs = [{"id": i, "task": "jobbuf_e2e.record", "args": ["ref", i], "kwargs": {"n": i}} for i in range(1, 21)]
jobs.append({"id": 21, "task": "jobbuf_e2e.record", "args": ["ref-vip", 21], "priority": 5})
jobs.append({"id": 22, "task": "jobbuf_e2e.record", "args": ["ref-delayed", now + 1.5], "run_at": now + 1.5})
json.dump(jobs, open(sys.argv[1], "w"))
EOF
(cd "$CELERY_DIR" && $PY reference_message.py "$URL" celery 0000abcd "$JB_RUN/celery_ref.json" >"$JB_RUN/celery_ref_ids.txt")
check "jobbuf-format messages are run by the worker (45 records)" \
  jb_wait_until '[ "$(lines_in "$CELERY_LOG")" -ge 45 ]' 30

RUN_LOG=$CELERY_LOG
check "every Celery task ran exactly once" rb_log_check 'runs.size == 45 && runs.map { |r| r["task_id"] }.uniq.size == 45'
check "jobbuf-format task ids are the derived UUIDs" \
  rb_log_check "ids = File.readlines('$JB_RUN/celery_ref_ids.txt').map(&:strip); ids.size == 22 && ids.all? { |id| runs.count { |r| r['task_id'] == id } == 1 } && ids.first == '0000abcd-6a62-8000-8000-000000000001'"
check "args and kwargs arrive as sent" \
  rb_log_check 'r = runs.find { |x| x["args"] == ["ref", 7] }; r && r["kwargs"] == {"n" => 7}'
check "eta tasks (both producers) did not run before their eta" \
  rb_log_check 'd = runs.select { |r| r["args"][0].to_s.end_with?("delayed") }; d.size == 2 && d.all? { |r| r["eta"] && r["ran_at"] >= r["args"][1] }'
check "the group task ran with the group id as its only argument" \
  rb_log_check 'runs.one? { |r| r["kind"] == "group" && r["args"] == ["7b0e4c1e-0000-4000-8000-000000000001"] }'
jb_stop_celery
check "nothing is left unacked in Redis" test "$(redis-cli -p "$JB_REDIS_PORT" HLEN unacked)" = 0

echo "# $failures failure(s)"
[ "$failures" -eq 0 ]

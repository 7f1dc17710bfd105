#!/usr/bin/env bash
# End-to-end: the Node client (clients/node) against a stock BullMQ Worker
# (test/consumers/node/bullmq_worker.js, the bullmq the lockfile pins). clients/node/test/
# transactions.cjs stages about 200 BullMQ jobs with Queue.add, Queue.addBulk and stage() inside
# node-postgres, Knex, Drizzle, Sequelize and TypeORM transactions, every 10th transaction rolled
# back, into the BullMQ queue "mail" (jobbuf queue mail_jobs, bullmq_queue "mail": the lookup
# jobbuf_queue_for). Then: every committed job ran once as one BullMQ job (twice when it fails
# once with attempts 2), no rolled-back one ran, delayed ones not before their delay, priority /
# attempts / backoff / removeOnComplete honoured; options jobbuf cannot carry, pools and unknown
# BullMQ queues are refused with errors naming what to do. The TypeScript types compile.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
bash "$ROOT/test/clients/install_node.sh"
NODE_TEST=$ROOT/clients/node/test

e2e_start
URL=redis://127.0.0.1:$JB_REDIS_PORT/0
PG_URL="postgres://postgres@127.0.0.1:$JB_PGPORT/$JB_DB"
jb_sql "SELECT jobbuf_create_queue('mail_jobs', 'bullmq', '{\"bullmq_queue\": \"mail\"}')" >/dev/null

node "$ROOT/test/consumers/node/bullmq_worker.js" --url "$URL" --queue mail --concurrency 8 \
  --fail-names flaky --out "$JB_RUN/ran.jsonl" >"$JB_RUN/worker.out" 2>&1 </dev/null &
E2E_EXTRA_PIDS+=($!)
check "a BullMQ Worker started" jb_wait_until 'grep -q ready "$JB_RUN/worker.out"' 30

node "$NODE_TEST/transactions.cjs" stage "$PG_URL" "$JB_RUN/expected.json" >"$JB_RUN/stage.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/stage.out"
expect_eq "the staging script passed its checks" "$status" 0
CHECKS_FAILURES=$((CHECKS_FAILURES + $(grep -c '^not ok' "$JB_RUN/stage.out")))
runs=$(sed -n 's/^runs //p' "$JB_RUN/stage.out")

check "the Worker ran the $runs runs the committed jobs make" \
  jb_wait_until '[ "$(wc -l <"$JB_RUN/ran.jsonl")" -ge '"${runs:-1}"' ]' 60
# Nothing left to run: jobbuf delivered everything (it pushes, then commits) and BullMQ's wait,
# delayed, prioritized and active sets are empty, so a duplicate would be in ran.jsonl by now.
wait_staged 0
check "BullMQ's queue is drained" jb_wait_until \
  '[ "$(jb_redis EVAL "return redis.call(\"LLEN\",KEYS[1])+redis.call(\"ZCARD\",KEYS[2])+redis.call(\"ZCARD\",KEYS[3])+redis.call(\"LLEN\",KEYS[4])" 4 bull:mail:wait bull:mail:delayed bull:mail:prioritized bull:mail:active)" = 0 ]' 30
node "$NODE_TEST/transactions.cjs" verify "$URL" "$JB_RUN/expected.json" "$JB_RUN/ran.jsonl" >"$JB_RUN/verify.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/verify.out"
expect_eq "the Worker's runs match the committed jobs" "$status" 0

# The types: a TypeScript program using stage() and Queue compiles (strict), one misusing them does not.
check "index.d.ts: a correct program type-checks" \
  "$ROOT/clients/node/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
  "$NODE_TEST/types_ok.ts"
check "index.d.ts: a wrong option is a type error" \
  bash -c "! '$ROOT/clients/node/node_modules/.bin/tsc' --noEmit --strict --module nodenext --moduleResolution nodenext '$NODE_TEST/types_wrong.ts' >/dev/null"
e2e_done

#!/usr/bin/env bash
# End-to-end: plain Sidekiq jobs made transactional by Jobbuf::Sidekiq.transactional_push! (the
# jobbuf gem's client middleware), run by an unmodified Sidekiq server (the sidekiq on PATH or
# installed as a gem: Debian's 6.4 here). test/clients/sidekiq_transactions.rb pushes HardJob with
# perform_async, perform_in, set(queue:, retry:) and push_bulk inside 60 ActiveRecord
# transactions, 6 rolled back; Sidekiq must run each committed job once, in its queue ("critical"
# reaches the jobbuf queue crit through its sidekiq_queue option), perform_in jobs not early, no
# rolled-back job, Floats as Floats; a NUL character is refused before the transaction is touched.
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/e2e/tools/lib.sh
source test/consumers/sidekiq/sidekiq.sh

cleanup() {
  jb_stop_sidekiq_reporting "$CHECKS_FAILURES"
  e2e_cleanup
}
e2e_start
trap cleanup EXIT
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
export REDIS_URL=redis://127.0.0.1:$JB_REDIS_PORT/0
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('default', 'sidekiq');
SELECT jobbuf_create_queue('crit', 'sidekiq', '{"sidekiq_queue": "critical"}');
SQL
jb_start_sidekiq "$JB_RUN/ran.jsonl" default critical
check "the Sidekiq server started" jb_wait_sidekiq_ready 30

ruby test/clients/sidekiq_transactions.rb stage "$JB_RUN/expected.json" >"$JB_RUN/stage.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/stage.out"
expect_eq "the producer passed its checks" "$status" 0
runs=$(sed -n 's/^runs //p' "$JB_RUN/stage.out")

check "Sidekiq ran the $runs committed jobs" jb_wait_until '[ "$(wc -l <"$JB_RUN/ran.jsonl")" -ge '"${runs:-1}"' ]' 60
# Drained: jobbuf delivered everything and Sidekiq's queues and schedule are empty, so a job
# delivered twice would have run by now.
wait_staged 0
check "Sidekiq's queues and schedule are empty" jb_wait_until \
  '[ "$(jb_redis EVAL "return redis.call(\"LLEN\",\"queue:default\")+redis.call(\"LLEN\",\"queue:critical\")+redis.call(\"ZCARD\",\"schedule\")" 0)" = 0 ]' 30
jb_wait_until '[ "$(jb_redis EVAL "local n=0 for _,k in ipairs(redis.call(\"KEYS\",\"*:workers\")) do n=n+redis.call(\"HLEN\",k) end return n" 0)" = 0 ]' 10
ruby test/clients/sidekiq_transactions.rb verify "$JB_RUN/expected.json" "$JB_RUN/ran.jsonl" >"$JB_RUN/verify.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/verify.out"
expect_eq "what Sidekiq ran matches the committed jobs" "$status" 0
e2e_done

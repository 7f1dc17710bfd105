#!/usr/bin/env bash
# Prints the commit-to-Redis latency of single-job transactions on an idle server (p50/p99/max
# over 500 jobs; see tools/latency.rb). A measurement, not an assertion on timings: the script
# fails only if a job does not arrive at all. poll_interval is 30 s, so every job is delivered
# by the commit wake-up.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'"
out=$(ruby "$(dirname "$0")/tools/latency.rb" --pg "host=$JB_PGHOST port=$JB_PGPORT dbname=$JB_DB user=postgres" \
  --redis-port "$JB_REDIS_PORT" --n 500 2>&1)
rc=$?
say "$out"
check "every single-job transaction's job arrived (BLPOP)" [ "$rc" -eq 0 ]
wait_staged 0 || fail "the worker did not commit its last batches"   # it pushes first, then commits
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "delivered by the worker" "$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'latency'")" 510

e2e_done

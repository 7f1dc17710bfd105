#!/usr/bin/env bash
# A worker whose every queue is paused keeps its delivery lease: it refreshes the lease at least
# every jobbuf.redis_timeout / 2 as a worker with queues does, so a clone started beside it cannot
# take the lease meanwhile. The lease lasts 2 x redis_timeout (6 s here): watched for 3 lifetimes,
# it must never be missing and its remaining time must go up again (a refresh).
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.redis_timeout = '3s'
jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('only', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('only', '{\"n\": 1}')" >/dev/null
expect_list_reaches jobbuf:only 1 15 "the worker delivers (and takes the delivery lease)"
lease=$(jb_redis --scan --pattern 'jobbuf:lease:*' | head -n 1)
check "the worker holds a delivery lease ($lease)" [ -n "$lease" ]
jb_sql "SELECT jobbuf_pause('only')" >/dev/null
jb_sql "SELECT jobbuf_stage('only', '{\"n\": 2}')" >/dev/null

# 18 s: three lifetimes of the lease. Without a refresh it expires 6 s after the last one.
missing=0 refreshed=0 last=-1
for _ in $(seq 36); do
  ttl=$(jb_redis PTTL "$lease")
  if [ "${ttl:--2}" -lt 0 ]; then missing=$((missing + 1)); fi
  if [ "$last" -ge 0 ] && [ "${ttl:--2}" -gt "$last" ]; then refreshed=$((refreshed + 1)); fi
  last=${ttl:--2}
  sleep 0.5
done
expect_eq "with every queue paused, the lease was never missing" "$missing" 0
check "... and it was refreshed ($refreshed times in 18 s)" [ "$refreshed" -ge 3 ]
expect_eq "the paused queue's job waits in Postgres" "$(jb_redis LLEN jobbuf:only) $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" "1 1"
e2e_done

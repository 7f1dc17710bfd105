#!/usr/bin/env bash
# A worker whose every queue is paused keeps its delivery lease: it refreshes the lease at least
# every jobbuf.redis_timeout / 2 as a worker with queues does, so a clone started beside it cannot
# take the lease meanwhile (it lapses for another cluster after 2 x redis_timeout, 6 s here, seen
# unchanged). Watched for 3 lifetimes, its refresh count ("<holder>#<n>") must keep going up.
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

# 18 s: three lifetimes of the lease; the longest time its refresh count stood still must stay
# well within one lifetime (refreshes come every 1.5 s).
refreshes() { jb_redis GET "$lease" | sed -n 's/.*#\([0-9]*\)\(;[0-9]*\)\{0,1\}$/\1/p'; }  # "<holder>#<n>;<counter>"
missing=0 refreshed=0 still=0 longest=0 last=$(refreshes)
for _ in $(seq 36); do
  sleep 0.5
  n=$(refreshes)
  if [ -z "$n" ]; then missing=$((missing + 1)); continue; fi
  if [ "$n" -gt "${last:-0}" ]; then refreshed=$((refreshed + 1)); still=0; else still=$((still + 1)); fi
  [ "$still" -gt "$longest" ] && longest=$still
  last=$n
done
expect_eq "with every queue paused, the lease was never missing" "$missing" 0
check "... and it was refreshed ($refreshed times in 18 s; at most $((longest * 500)) ms without one)" \
  test "$refreshed" -ge 3 -a "$longest" -lt 12
expect_eq "the paused queue's job waits in Postgres" "$(jb_redis LLEN jobbuf:only) $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" "1 1"
e2e_done

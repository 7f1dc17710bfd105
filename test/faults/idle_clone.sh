#!/usr/bin/env bash
# A clone of an idle cluster never takes the lease from its live original (docs/copies.md,
# "Clones and later starts"). The original delivers nothing after the copy is taken, so no marker
# in Redis moves past the clone's counter; but the holder advances its counter at least once per
# lease lifetime without batches and carries it in the lease ("<holder>#<n>;<counter>"). Then the
# original's worker stalls for more than the lease's lifetime (SIGSTOP 5 s, as a partition or a
# long pause would): the lease lapses for the clone, which does not continue its holder (the
# lease's counter is ahead of its own) and stays held; the original goes on delivering.
# (Before: equal counters, the clone took the lease and the original was held.)
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"
jb_sql "SELECT jobbuf_create_queue('idle', 'list')" >/dev/null
KEY=jobbuf:idle
lease=jobbuf:lease:$(jb_sql "SELECT jobbuf.installation_id()")
jb_sql "SELECT jobbuf_stage('idle', '{\"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10 || fail "the original delivers job 0"
wait_staged 0 || fail "the original's worker did not commit job 0"
# a job due later, staged before the copy: both carry it
jb_sql "SELECT jobbuf_stage('idle', '{\"n\": \"later\"}', now() + interval '15 seconds')" >/dev/null
check "the idle holder's lease carries its committed counter" \
  jb_wait_until '[ "$(jb_redis GET "$lease" | sed -n "s/.*#[0-9]*;\([0-9]*\)$/\1/p")" -ge 1 ] 2>/dev/null' 10
c0=$(jb_sql "SELECT delivered_unit FROM jobbuf.delivery_counter")
sleep 3
expect_le "... and the idle holder advances it (one row version per lease lifetime or so)" \
  "$(( c0 + 1 ))" "$(jb_sql "SELECT delivered_unit FROM jobbuf.delivery_counter")"
start_clone
check "the clone is held" jb_wait_until "grep -q 'another PostgreSQL cluster' '$JB_RUN/clone.log'" 20
wp=$(worker_pid)
say "the original's worker ($wp) stops for 5 s (the lease lives 2 s)"
kill -STOP "$wp"; sleep 5; kill -CONT "$wp"
check "the clone finds the lease lapsed and does not continue its holder" \
  jb_wait_until "grep -q 'delivery lease of another start lapsed; this start does not continue it' '$JB_RUN/clone.log'" 10
expect_eq "the clone never took the lease" "$(grep -c 'took over' "$JB_RUN/clone.log")" 0
jb_sql "SELECT jobbuf_stage('idle', '{\"n\": 1}')" >/dev/null
check "the original delivers its new job and the later one" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20
expect_eq "Redis has 0, 1 and later once each" "$(jb_redis LRANGE "$KEY" 0 -1 | sort -u | wc -l) of $(jb_redis LLEN "$KEY")" "3 of 3"
expect_eq "the clone delivered nothing (it keeps its copy of the later job)" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" 1
expect_eq "the original was never held" "$(grep -c 'another PostgreSQL cluster' "$JB_RUN/postgres.log")" 0
faults_done

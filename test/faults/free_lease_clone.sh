#!/usr/bin/env bash
# A clone beside its original finds the delivery lease FREE (the key gone, as a Redis restarted
# without persistence, a FLUSHDB or a 1.2 lease's TTL leaves it) and reconnects first
# (docs/copies.md, "Clones and later starts"):
#   1. Redis still holds the original's markers, whose delivery number is ahead of the clone's
#      counter (the original delivered two batches after the copy): the clone does not take the
#      free lease (same continuity test as for a lapsed lease) and delivers nothing; the original,
#      whose marker it is, takes it again and delivers every job of its own once; one WARNING on
#      the clone for the whole time.
#   2. everything lost (lease and markers gone): no evidence of an earlier holder is left, so the
#      first start to look takes the lease, here the clone (its counter > 0 proves nothing either
#      way). The original then finds it held: one WARNING naming both clusters and the two ways
#      out; once the clone is stopped, jobbuf_take_over() on the original delivers its job.
#      (jobbuf_reset_identity() on the clone is the other way out.)
# The original's worker is stopped (SIGSTOP) while the key is deleted, until the clone has looked
# at the lease: the clone reconnects first by construction.
# (Before: a free lease was taken at once, so in 1. the clone took it and delivered its jobs.)
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"
jb_sql "SELECT jobbuf_create_queue('twin', 'list')" >/dev/null
KEY=jobbuf:twin
id=$(jb_sql "SELECT jobbuf.installation_id()")
lease=jobbuf:lease:$id
marker=jobbuf:marker:$id
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10 || fail "the original delivers job 0"
wait_staged 0 || fail "the original's worker did not commit job 0"

start_clone
held='WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity delivers its jobs to this Redis'
check "the clone finds the lease held" jb_wait_until "grep -q '$held' '$JB_RUN/clone.log'" 20

# Two batches of the original after the copy: its marker's number is two past the clone's counter.
for n in 1 2; do
  jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": $n}')" >/dev/null
  jb_wait_until "[ \"\$(jb_redis LLEN $KEY)\" = $(( n + 1 )) ]" 10 || fail "the original delivers job $n"
  wait_staged 0 || fail "the original's worker did not commit job $n"
done
number=$(jb_redis GET "$marker" | cut -d';' -f2)
clone_counter=$(clone_sql "SELECT delivered_unit FROM jobbuf.delivery_counter")
say "the original's marker: number $number; the clone's counter: $clone_counter"
check "precondition: the marker is at least two ahead of the clone's counter" [ "$number" -ge $(( clone_counter + 2 )) ]
clone_sql "SELECT count(jobbuf_stage('twin', jsonb_build_object('side', 'clone', 'n', g))) FROM generate_series(1, 10) g" >/dev/null

evals() { jb_redis INFO commandstats | sed -n 's/^cmdstat_eval:calls=\([0-9]*\).*/\1/p'; }
count_side() { jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'side = ARGV[0]; ns = STDIN.read.lines.map { |l| JSON.parse(l) }.select { |j| j["side"] == side }.map { |j| j["n"] }; puts "#{ns.size} #{ns.uniq.size}"' "$1"; }

# --- 1. the lease key deleted, the markers kept; the clone looks first
original=$(worker_pid)
check "the original's drain worker ($original)" [ -n "$original" ]
kill -STOP "$original"
on_exit "kill -CONT $original 2>/dev/null"
clone_mark=$(wc -l <"$JB_RUN/clone.log")
jb_redis DEL "$lease" >/dev/null
jb_redis CONFIG RESETSTAT >/dev/null
# The clone (the only script runner while the original is stopped) looks every quarter second.
check "the clone looked at the free lease three times" jb_wait_until '[ "$(evals)" -ge 3 ] 2>/dev/null' 20
clone_since() { tail -n +"$(( clone_mark + 1 ))" "$JB_RUN/clone.log"; }
expect_eq "the clone did not take the free lease" "$(jb_redis EXISTS "$lease")" 0
expect_eq "... it asked once whether it continues the markers' writer, and does not" \
  "$(clone_since | grep -c 'delivery lease is free but Redis holds the delivery marker of an earlier start; this start does not continue it' || true)" 1
expect_eq "the clone delivered nothing" "$(count_side clone)" "0 0"
mark=$(log_mark)
kill -CONT "$original"
check "the original takes its lease again" jb_wait_until '[ -n "$(jb_redis GET "$lease" | grep -F "port $JB_PGPORT ")" ]' 20
check "... and says why" jb_wait_until "[ \"\$(log_since $mark | grep -c 'delivery lease was missing from Redis; this start took it again')\" = 1 ]" 10
jb_sql "SELECT count(jobbuf_stage('twin', jsonb_build_object('side', 'original', 'n', g))) FROM generate_series(3, 12) g" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20 || fail "the original delivers again"
sleep 1   # the clone looks at the lease several times meanwhile
expect_eq "every job of the original once (lost 0, duplicated 0)" "$(count_side original)" "13 13"
expect_eq "none of the clone's" "$(count_side clone)" "0 0"
expect_eq "the clone keeps its jobs staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" 10
expect_eq "the clone never reconciled the original's marker" "$(grep -c 'already in Redis' "$JB_RUN/clone.log")" 0
expect_eq "one WARNING on the clone for the whole time" "$(grep -c "$held" "$JB_RUN/clone.log")" 1
expect_eq "the original was never held" "$(grep -c 'another PostgreSQL cluster' "$JB_RUN/postgres.log")" 0

# --- 2. everything lost: the lease and the markers; the clone looks first and takes it
kill -STOP "$original"
jb_redis DEL "$lease" "$marker" >/dev/null
check "the clone takes the lease (no evidence of an earlier holder is left)" \
  jb_wait_until '[ -n "$(jb_redis GET "$lease" | grep -F "port $CLONE_PORT ")" ]' 20
check "... and delivers its jobs" jb_wait_until '[ "$(count_side clone)" = "10 10" ]' 20
expect_eq "... logging that it took the lease with nothing to prove" \
  "$(grep -c 'no delivery marker of this installation left' "$JB_RUN/clone.log")" 1
mark=$(log_mark)
kill -CONT "$original"
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": 13}')" >/dev/null
check "the original finds the lease held: one WARNING" jb_wait_until "grep -q '$held' '$JB_RUN/postgres.log'" 20
warning=$(grep -m 1 "$held" "$JB_RUN/postgres.log")
expect_match "... naming the clone as the holder and the original as this one" "$warning" \
  "this Redis \\(.*port $CLONE_PORT .*\\); this one \\(.*port $JB_PGPORT .*\\) does not deliver"
expect_match "... and both ways out" "$warning" "jobbuf_reset_identity\(\).*jobbuf_take_over\(\)"
sleep 2
expect_eq "the original delivered nothing meanwhile" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 1
expect_eq "one WARNING, not one per look" "$(grep -c "$held" "$JB_RUN/postgres.log")" 1
# The way out: the clone stopped, jobbuf_take_over() on the original. Its worker is stopped
# meanwhile, so it acts on the request before the clone's lease could lapse for it.
kill -STOP "$original"
clone_ctl stop -m fast
jb_sql "SELECT jobbuf_take_over()" >/dev/null
kill -CONT "$original"
check "jobbuf_take_over() on the original" \
  jb_wait_until "grep -q 'took the delivery lease over from .* as jobbuf_take_over() asked' '$JB_RUN/postgres.log'" 20
check "... which delivers its job" jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20
expect_eq "every job of the original once" "$(count_side original)" "14 14"
faults_done

#!/usr/bin/env bash
# Claimed jobs of queues the worker delivers one by one (list, stream, sidekiq) are never left
# stranded once their lease expires: the worker releases them (an attempt counted, last_error
# 'lease expired'), or buries them at max_attempts, and its drain delivers them exactly once.
#
# Part 1, from 1.0: jobbuf 1.0 let consumers claim jobs of any queue. A 1.0 database (the frozen
# 1.0 script, run by the current library, whose worker waits for the update) holds such claims:
# expired ones on a list, a stream and a Sidekiq queue, a live one, one at max_attempts, and an
# expired one whose unique key a newer waiting job holds. After ALTER EXTENSION jobbuf UPDATE the
# expired ones are delivered once each, the live group stays claimed and completes with its id,
# the one at max_attempts is a dead letter, and the unique key's newer job wins.
# Part 2, delivery changed: jobbuf_alter_queue(q, '{"delivery": null}') on a group-delivery queue
# with two groups in flight keeps their leases (with a NOTICE): the group its consumer finishes
# completes, the abandoned group's jobs are delivered one by one once its lease expired.
source "$(dirname "$0")/../e2e/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"

# ---------------------------------------------------------------- part 1
say "part 1: claims a 1.0 database made on list, stream and sidekiq queues"
jb_psql -q -c "DROP EXTENSION jobbuf" -c "CREATE EXTENSION jobbuf VERSION '1.0'"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('lst', 'list', '{"visibility": 1}');
SELECT jobbuf_create_queue('strm', 'stream', '{"visibility": 1}');
SELECT jobbuf_create_queue('sk', 'sidekiq', '{"visibility": 1}');
SELECT jobbuf_create_queue('fragile', 'list', '{"visibility": 1, "max_attempts": 1}');
SELECT jobbuf_create_queue('uq', 'list', '{"visibility": 1}');
SELECT jobbuf_stage('lst', jsonb_build_object('n', n)) FROM generate_series(1, 5) n;
SELECT jobbuf_stage('strm', '{"s": 1}');
SELECT jobbuf_stage('sk', '{"class": "Mailer", "args": [1]}');
SELECT jobbuf_stage('fragile', '{"doomed": true}');
SELECT jobbuf_stage('uq', '{"old": true}', NULL, 'k');
SQL
# lst: jobs 1-3 in a group whose lease (1 s) will expire, jobs 4-5 in a group leased for an hour.
expired=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('lst', 3)")
jb_sql "SELECT jobbuf_alter_queue('lst', '{\"visibility\": 3600}')" >/dev/null
live=$(jb_sql "SELECT DISTINCT group_id FROM jobbuf_claim('lst', 2)")
for q in strm sk fragile uq; do
  jb_sql "SELECT count(*) FROM jobbuf_claim('$q', 1)" >/dev/null
done
# Staged after its namesake was claimed: the unique key is free again, and this job takes it.
jb_sql "SELECT jobbuf_stage('uq', '{\"new\": true}', NULL, 'k')" >/dev/null
expect_eq "1.0 claimed the jobs of list, stream and sidekiq queues" \
  "$(jb_sql "SELECT count(*) FILTER (WHERE group_id IS NOT NULL) || ' ' || count(*) FROM jobbuf.jobs")" "9 10"
check "the short leases have expired" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE lease_until <= now()")" = 7 ]' 5
expect_eq "nothing was delivered under 1.0 SQL" \
  "$(jb_redis LLEN jobbuf:lst) $(jb_redis XLEN jobbuf:strm) $(jb_redis LLEN queue:sk) $(jb_redis LLEN jobbuf:uq)" "0 0 0 0"

jb_psql -q -c "ALTER EXTENSION jobbuf UPDATE"
expect_list_reaches jobbuf:lst 3 10 "the expired claim's 3 list jobs are delivered after the update"
check "the expired stream job is delivered" jb_wait_until '[ "$(jb_redis XLEN jobbuf:strm)" = 1 ]' 10
check "the expired Sidekiq job is delivered" jb_wait_until '[ "$(jb_redis LLEN queue:sk)" = 1 ]' 10
expect_list_reaches jobbuf:uq 1 10 "the unique key's job is delivered"
check "the job at max_attempts is a dead letter" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" = 1 ]' 10
wait_staged 2
sleep 1   # several full passes: a second delivery, or a release of the live lease, would show here
expect_eq "the list jobs of the expired claim arrive once each" \
  "$(jb_redis LRANGE jobbuf:lst 0 -1 | sort | tr '\n' ' ')" '{"n": 1} {"n": 2} {"n": 3} '
expect_eq "one stream entry, one Sidekiq job" "$(jb_redis XLEN jobbuf:strm) $(jb_redis LLEN queue:sk)" "1 1"
expect_eq "of two jobs with one unique key, the newer waiting one is delivered, once" \
  "$(jb_redis LRANGE jobbuf:uq 0 -1 | tr '\n' ' ')" '{"new": true} '
expect_eq "the dead letter: attempts 1, lease expired" \
  "$(jb_sql "SELECT queue || ' ' || attempts || ' ' || last_error FROM jobbuf.dead")" "fragile 1 lease expired"
expect_eq "the live group stays claimed, untouched" \
  "$(jb_sql "SELECT count(*) || ' ' || max(attempts) FROM jobbuf.jobs WHERE group_id = '$live' AND lease_until > now()")" "2 0"
expect_eq "the live group completes with its 1.0 group id" "$(jb_sql "SELECT jobbuf_complete('$live')")" 2
expect_eq "the expired group is fenced off (its jobs went to Redis)" "$(jb_sql "SELECT jobbuf_complete('$expired')")" 0
wait_census || fail "no census of the worker after the groups completed"  # jobbuf_stats() counts as of it
expect_eq "jobbuf_stats: delivered, nothing ready or claimed" \
  "$(jb_sql "SELECT string_agg(queue || ' ' || ready || ' ' || claimed || ' ' || delivered_total, ', ' ORDER BY queue) FROM jobbuf_stats()")" \
  "fragile 0 0 0, lst 0 0 3, sk 0 0 1, strm 0 0 1, uq 0 0 1"
expect_eq "jobbuf.jobs is empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0

# ---------------------------------------------------------------- part 2
say "part 2: a group-delivery queue with groups in flight switched to delivery each"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('grp', 'list', '{"delivery": "group", "batch_size": 2, "visibility": 3600}');
SELECT jobbuf_stage('grp', jsonb_build_object('n', n)) FROM generate_series(1, 4) n;
SQL
expect_list_reaches jobbuf:grp 2 10 "the worker claims two groups and pushes their messages"
groups=$(jb_redis LRANGE jobbuf:grp 0 -1 | ruby -rjson -e 'puts STDIN.readlines.map { |l| JSON.parse(l)["group_id"] }')
finished=$(sed -n 1p <<<"$groups")
abandoned=$(sed -n 2p <<<"$groups")
notice=$(jb_psql -qtAX -c "SELECT jobbuf_alter_queue('grp', '{\"delivery\": null}')" 2>&1 >/dev/null)
check "jobbuf_alter_queue says the groups in flight keep their lease (${notice:0:300})" \
  grep -q "2 groups in flight keep their lease" <<<"$notice"
expect_eq "the change is made" "$(jb_sql "SELECT options ? 'delivery' FROM jobbuf.queues WHERE name = 'grp'")" f
sleep 1   # full passes: a group released while its lease holds would be delivered here
expect_eq "the groups stay claimed while their leases hold" \
  "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE group_id IN ('$finished', '$abandoned')") $(jb_redis LLEN jobbuf:grp)" "4 2"
expect_eq "the group its consumer finishes completes" "$(jb_sql "SELECT jobbuf_complete('$finished')")" 2
want=$(jb_sql "SELECT string_agg(payload::text, ' ' ORDER BY id) FROM jobbuf.jobs WHERE group_id = '$abandoned'")
# The abandoned group's lease runs out (moved to now rather than waited for).
jb_sql "UPDATE jobbuf.jobs SET lease_until = now() WHERE group_id = '$abandoned'" >/dev/null
expect_list_reaches jobbuf:grp 4 10 "the abandoned group's 2 jobs are delivered one by one"
wait_staged 0
sleep 1   # a second delivery would show here
expect_eq "once each, after the two group messages" "$(jb_redis LRANGE jobbuf:grp 2 -1 | tr '\n' ' ')" "$want "
expect_eq "the abandoned group is fenced off" "$(jb_sql "SELECT jobbuf_complete('$abandoned')")" 0
expect_eq "jobbuf.jobs is empty, nothing dead" \
  "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(jb_sql "SELECT count(*) FROM jobbuf.dead WHERE queue = 'grp'")" "0 0"
expect_eq "the worker logged no database error" \
  "$(grep -E 'WARNING: +jobbuf:' "$JB_RUN/postgres.log" | grep -cvE 'ALTER EXTENSION jobbuf UPDATE|not installed|does not exist; the worker starts')" 0
e2e_done

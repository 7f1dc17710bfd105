#!/usr/bin/env bash
# Copies of a database (docs/copies.md), every database drained (jobbuf.database = '*'), one Redis:
# - pg_dump of `app` holding 30 jobs due in a few seconds, restored next to it as `app_copy`: the
#   original delivers its 30 once; the copy holds its 30 (stats count none of them as waiting,
#   claims skip them, one WARNING), while a job staged in the copy afterwards is delivered.
# - CREATE DATABASE app_clone TEMPLATE tmpl (a template with staged jobs and no worker): the clone
#   holds the template's jobs, delivers its own.
# - jobbuf_release_restored('q') adopts held jobs of a queue (delivered once, with the ids consumers
#   saw from the original: Sidekiq jid here), jobbuf_discard_restored() deletes the rest; both are
#   for jobbuf_admin, not for producers or consumers.
# - dead letters keep their job's origin and owner: in a restored copy, jobbuf_retry_dead of the
#   original's dead letter stages a held job (no claim takes it); a released job that dies there
#   (by jobbuf_fail, or rejected by Redis in the worker) and is retried keeps its origin, so the
#   ids consumers see. Before, the copy's retry made the original's dead jobs claimable at once,
#   under the copy's identity.
# Before 1.2 the copy delivered every restored job a second time (60 pushes for 30 jobs).
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'
jobbuf.database = '$JB_DB, app, app_copy, app_clone, dl, dl_copy'"
sql() { jb_psql_db "$1" -qtAX -c "$2"; }
in_postgres() { jb_psql_db postgres -qtAX -c "$1"; }
N=30

in_postgres "CREATE DATABASE app" >/dev/null
jb_psql_db app -q -o /dev/null <<SQL
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('work', 'list');
SELECT jobbuf_create_queue('mail', 'sidekiq');
SELECT jobbuf_pause('mail');
SELECT jobbuf_create_queue('batch', 'none');
SELECT jobbuf_stage('work', jsonb_build_object('n', n), now() + interval '4 seconds') FROM generate_series(1, $N) n;
SELECT jobbuf_stage('mail', '{"class": "Mailer", "args": [1]}');
SELECT jobbuf_stage('batch', jsonb_build_object('b', n)) FROM generate_series(1, 3) n;
SQL
"$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -Fc -f "$JB_RUN/app.dump" app
in_postgres "CREATE DATABASE app_copy" >/dev/null
out=$("$JB_PGBIN/pg_restore" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d app_copy "$JB_RUN/app.dump" 2>&1)
check "restored next to the original ${out:0:200}" [ -z "$out" ]

expect_eq "the copy has an identity of its own" \
  "$([ "$(sql app "SELECT jobbuf.installation_id()")" != "$(sql app_copy "SELECT jobbuf.installation_id()")" ] && echo different)" different
expect_eq "the restored jobs keep every column (ids, payloads, origin)" \
  "$(sql app_copy "SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM (SELECT id, queue, payload, origin, owner FROM jobbuf.jobs) j")" \
  "$(sql app "SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM (SELECT id, queue, payload, origin, owner FROM jobbuf.jobs) j")"
expect_eq "jobbuf_stats in the copy counts none of them as ready, scheduled or claimed" \
  "$(sql app_copy "SELECT sum(ready + scheduled + claimed) FROM jobbuf_stats()")" 0
if jb_wait_until "[ \"\$(sql app_copy \"SELECT sum(held) FROM jobbuf_queue_metrics()\")\" = $((N + 4)) ]" 15; then
  pass "jobbuf_queue_metrics in the copy counts them as held once its worker counted ($((N + 4)))"
else
  fail "jobbuf_queue_metrics in the copy: held $(sql app_copy "SELECT sum(held) FROM jobbuf_queue_metrics()"), expected $((N + 4))"
fi
expect_eq "a claim in the copy takes none of them" "$(sql app_copy "SELECT count(*) FROM jobbuf_claim('batch', 10)")" 0
sql app "SELECT jobbuf_resume('mail')" >/dev/null
sql app_copy "SELECT jobbuf_resume('mail')" >/dev/null
after=$(sql app_copy "SELECT jobbuf_stage('work', '{\"staged\": \"in the copy\"}')")

# The original delivers its jobs when they come due; by then the copy's worker has delivered the
# job staged there (it runs passes), and had the same chance at the restored ones.
expect_list_reaches jobbuf:work $(( N + 1 )) 20 "the original's $N jobs and the copy's own job arrive"
jb_wait_until "[ \"\$(jb_redis LLEN queue:mail)\" = 1 ]" 10
jb_wait_until '[ "$(sql app "SELECT count(*) FROM jobbuf.jobs WHERE queue <> '"'batch'"'")" = 0 ]' 10
sleep 1   # a second more of 200 ms passes in the copy: a held job would be pushed by now
expect_eq "Redis holds each job once: $N from the original, 1 staged in the copy" \
  "$(jb_redis LRANGE jobbuf:work 0 -1 | sort | uniq -c | awk '$1 > 1' | wc -l) $(jb_redis LLEN jobbuf:work)" "0 $(( N + 1 ))"
expect_eq "the copy still holds its restored jobs" \
  "$(sql app_copy "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" $(( N + 4 ))
expect_eq "the job staged in the copy was delivered (not held)" "$(sql app_copy "SELECT count(*) FROM jobbuf.jobs WHERE id = $after")" 0
expect_eq "one WARNING about the held jobs, naming the database" \
  "$(grep -c 'WARNING: .*database "app_copy" holds 34 job(s) in 3 queue(s) that another installation' "$JB_RUN/postgres.log")" 1

# Roles: only jobbuf_admin (and superusers) release or discard; only superusers reset the identity.
jb_psql_db app_copy -q -o /dev/null <<'SQL'
CREATE ROLE copy_admin LOGIN IN ROLE jobbuf_admin;
CREATE ROLE copy_consumer LOGIN IN ROLE jobbuf_consumer;
SQL
out=$(jb_psql_db app_copy -qtAX -c "SET ROLE copy_consumer" -c "SELECT jobbuf_release_restored()" 2>&1)
expect_match "a consumer cannot release held jobs" "$out" "permission denied"
out=$(jb_psql_db app_copy -qtAX -c "SET ROLE copy_admin" -c "SELECT jobbuf_reset_identity()" 2>&1)
expect_match "an admin cannot reset the identity" "$out" "permission denied"

# Releasing a queue: its held jobs are delivered once, with the jid the original gave them.
original_jid=$(jb_redis LINDEX queue:mail 0 | ruby -rjson -e 'puts JSON.parse(STDIN.read)["jid"]')
expect_eq "jobbuf_release_restored('mail') adopts the queue's held job" \
  "$(jb_psql_db app_copy -qtAX -c "SET ROLE copy_admin" -c "SELECT jobbuf_release_restored('mail')")" 1
expect_list_reaches queue:mail 2 10 "the released job is delivered"
expect_eq "with the jid the original gave it (a consumer can tell it ran)" \
  "$(jb_redis LRANGE queue:mail 0 -1 | ruby -rjson -e 'puts STDIN.read.lines.map { |l| JSON.parse(l)["jid"] }.uniq.join(",")')" \
  "$original_jid"
expect_eq "jobbuf_discard_restored() deletes the other held jobs" \
  "$(jb_psql_db app_copy -qtAX -c "SET ROLE copy_admin" -c "SELECT jobbuf_discard_restored()")" $(( N + 3 ))
expect_eq "nothing is held any more" "$(sql app_copy "SELECT count(*) FROM jobbuf.jobs")" 0
check "the worker says so once" \
  jb_wait_until "grep -q 'LOG: .*database \"app_copy\" holds no job of another installation' '$JB_RUN/postgres.log'" 10

# CREATE DATABASE ... TEMPLATE: the clone carries the template's rows, identity included; it tells
# by the database oid, holds the template's jobs and delivers its own.
in_postgres "CREATE DATABASE tmpl" >/dev/null
jb_psql_db tmpl -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('cloned', 'list');
SELECT jobbuf_stage('cloned', jsonb_build_object('template', n)) FROM generate_series(1, 5) n;
SQL
in_postgres "CREATE DATABASE app_clone TEMPLATE tmpl" >/dev/null
own=$(sql app_clone "SELECT jobbuf_stage('cloned', '{\"staged\": \"in the clone\"}')")
expect_list_reaches jobbuf:cloned 1 20 "the clone delivers the job staged in it"
sleep 1
expect_eq "and only that one: the template's 5 are held there" \
  "$(jb_redis LRANGE jobbuf:cloned 0 -1) $(sql app_clone "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" \
  '{"staged": "in the clone"} 5'
expect_eq "the clone's identity differs from the template's" \
  "$([ "$(sql tmpl "SELECT jobbuf.installation_id()")" != "$(sql app_clone "SELECT jobbuf.installation_id()")" ] && echo different)" different
check "job $own of the clone is gone from it" [ "$(sql app_clone "SELECT count(*) FROM jobbuf.jobs WHERE id = $own")" = 0 ]

# Dead letters of a copy: the original's dead letter is held in the copy when retried, and a
# released job that dies in the copy keeps its origin through the dead letter and back.
in_postgres "CREATE DATABASE dl" >/dev/null
jb_psql_db dl -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('crm', 'none', '{"max_attempts": 1}');
SELECT jobbuf_create_queue('wt', 'list');
SELECT jobbuf_pause('wt');
SELECT jobbuf_stage('crm', '{"dies": "in the original"}');
SELECT jobbuf_fail(c.group_id, 'failed in the original') FROM jobbuf_claim('crm', 1) c;
SELECT jobbuf_stage('crm', '{"dies": "in the copy"}');
SELECT jobbuf_stage('wt', '{"rejected": "in the copy"}');
SQL
original=$(sql dl "SELECT jobbuf.installation_id()")
expect_eq "the original has one dead letter" "$(sql dl "SELECT count(*) FROM jobbuf.dead")" 1
"$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -Fc -f "$JB_RUN/dl.dump" dl
in_postgres "CREATE DATABASE dl_copy" >/dev/null
"$JB_PGBIN/pg_restore" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d dl_copy "$JB_RUN/dl.dump"
expect_eq "jobbuf_retry_dead in the copy moves the original's dead letter" "$(sql dl_copy "SELECT jobbuf_retry_dead('crm')")" 1
expect_eq "as a held job of the original (origin and owner kept)" \
  "$(sql dl_copy "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'crm' AND origin = '$original' AND owner = '$original'")" 2
expect_eq "which no claim in the copy takes" "$(sql dl_copy "SELECT count(*) FROM jobbuf_claim('crm', 10)")" 0
expect_eq "jobbuf_release_restored('crm') adopts both" "$(sql dl_copy "SELECT jobbuf_release_restored('crm')")" 2
expect_eq "they die in the copy" \
  "$(sql dl_copy "SELECT jobbuf_fail(c.group_id, 'failed in the copy') FROM (SELECT DISTINCT group_id FROM jobbuf_claim('crm', 10)) c")" 2
expect_eq "both are retried" "$(sql dl_copy "SELECT jobbuf_retry_dead('crm')")" 2
expect_eq "keeping the original's origin (their ids for consumers), owned by the copy" \
  "$(sql dl_copy "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'crm' AND origin = '$original' AND owner = jobbuf.installation_id()")" 2
expect_eq "and are claimable" "$(sql dl_copy "SELECT count(*) FROM jobbuf_claim('crm', 10)")" 2
# The worker's dead letters (a job Redis rejects) keep the origin too.
jb_redis SET jobbuf:wt "a string, not a list" >/dev/null
sql dl_copy "SELECT jobbuf_release_restored('wt'), jobbuf_resume('wt')" >/dev/null
check "the copy's worker dead-letters the released job Redis rejects" \
  jb_wait_until "[ \"\$(sql dl_copy \"SELECT count(*) FROM jobbuf.dead WHERE queue = 'wt'\")\" = 1 ]" 15
expect_eq "with the original's origin, owned by the copy" \
  "$(sql dl_copy "SELECT origin = '$original' AND owner = jobbuf.installation_id() FROM jobbuf.dead WHERE queue = 'wt'")" t
jb_redis DEL jobbuf:wt >/dev/null

e2e_done

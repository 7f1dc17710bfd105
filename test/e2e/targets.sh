#!/usr/bin/env bash
# Redis targets: a list with a custom key, a list with the default key, a stream (XADD with
# fields id and payload, id = the job id), a stream with maxlen, and a 'none' queue that the
# worker leaves alone.
source "$(dirname "$0")/tools/lib.sh"

e2e_start
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('mails', 'list', '{"key": "myapp:mail-jobs"}');
SELECT jobbuf_create_queue('plain', 'list');
SELECT jobbuf_create_queue('events', 'stream');
SELECT jobbuf_create_queue('capped', 'stream', '{"maxlen": 100}');
SELECT jobbuf_create_queue('manual', 'none');
SQL

ids=$(jb_psql -qtAX <<'SQL'
BEGIN;
SELECT jobbuf_stage('mails', '{"to": "a@example.com"}'::jsonb);
SELECT jobbuf_stage('mails', '{"to": "b@example.com"}'::jsonb);
SELECT jobbuf_stage('plain', '[1, "two", null]'::jsonb);
SELECT jobbuf_stage('events', '{"event": "signup", "user": 7}'::jsonb);
SELECT jobbuf_stage('events', '"just a string"'::jsonb);
SELECT jobbuf_stage('manual', '{"by": "claim"}'::jsonb);
COMMIT;
SQL
)
read -r mail1 mail2 plain1 ev1 ev2 manual1 <<<"$(echo $ids)"
jb_sql "SELECT jobbuf_stage('capped', jsonb_build_object('n', n)) FROM generate_series(1, 1000) n" >/dev/null

jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue <> '"'manual'"'")" = 0 ]' 10

expect_eq "list with key option: LRANGE myapp:mail-jobs" \
  "$(jb_redis LRANGE myapp:mail-jobs 0 -1 | tr '\n' '|')" '{"to": "a@example.com"}|{"to": "b@example.com"}|'
expect_eq "no list under the default key when key is set" "$(jb_redis EXISTS jobbuf:mails)" 0
expect_eq "list with the default key jobbuf:plain" "$(jb_redis LRANGE jobbuf:plain 0 -1)" '[1, "two", null]'
expect_eq "stream type" "$(jb_redis TYPE jobbuf:events)" stream
fields=$(jb_redis XRANGE jobbuf:events - + | ruby -e '
  lines = STDIN.read.lines.map(&:chomp)
  # redis-cli --raw prints: entry id, then field, value, field, value, field, value
  puts lines.each_slice(7).map { |e| e[1..].join(",") }.join(";")')
# uid: the first 8 hex digits of the installation's identity, then the job id in 16.
uid() { jb_sql "SELECT substr(replace(jobbuf.installation_id()::text, '-', ''), 1, 8) || lpad(to_hex($1), 16, '0')"; }
expect_eq "stream: id = the job id, uid = its stable identity, payload = the jsonb text" \
  "$fields" "id,$ev1,uid,$(uid $ev1),payload,{\"user\": 7, \"event\": \"signup\"};id,$ev2,uid,$(uid $ev2),payload,\"just a string\""
capped=$(jb_redis XLEN jobbuf:capped)
check "stream with maxlen 100 is trimmed (XLEN $capped after 1000 jobs)" [ "$capped" -ge 100 -a "$capped" -lt 1000 ]
expect_eq "capped stream keeps the newest job" \
  "$(jb_redis XREVRANGE jobbuf:capped + - COUNT 1 | sed -n 7p)" '{"n": 1000}'
expect_eq "delivered_total per queue (capped, events, mails, manual, plain)" \
  "$(jb_sql "SELECT string_agg(delivered_total::text, ',' ORDER BY queue) FROM jobbuf_stats()")" "1000,2,2,0,1"
expect_eq "target none: the job stays staged for jobbuf_claim" \
  "$(jb_sql "SELECT string_agg(id::text, ',') FROM jobbuf.jobs")" "$manual1"
expect_eq "target none: nothing pushed to Redis" "$(jb_redis EXISTS jobbuf:manual)" 0

e2e_done

#!/usr/bin/env bash
# A tick staged again after a failover with asynchronous replication carries the same framework
# id. A standby made by pg_basebackup -R is left behind (not started, so it receives nothing more)
# while the primary stages and delivers ticks of a "2 seconds" schedule as Sidekiq jobs; then the
# primary dies (immediate shutdown) and the standby is started and promoted. Behind the primary's
# last batch, it does not continue the primary (docs/copies.md) and stays held until
# jobbuf_take_over(); then it stages again the ticks the primary had staged after the backup
# (catch_up all) and delivers them with the jids the primary gave them, so a consumer that dedupes
# on jid runs each tick once.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"
jb_sql "SELECT jobbuf_create_queue('tq', 'sidekiq'),
               jobbuf_schedule('every2', '2 seconds', 'tq', '{\"class\": \"TickJob\", \"args\": []}', '{\"catch_up\": \"all\"}')" >/dev/null
jids() { jb_redis LRANGE queue:tq 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["jid"]' | sort; }
jb_wait_until '[ "$(jb_redis LLEN queue:tq)" -ge 1 ]' 20 || fail "no tick delivered by the primary"

STANDBY=$JB_RUN/standby
on_exit "[ -f '$STANDBY/postmaster.pid' ] && jb_as_postgres '$JB_PGBIN/pg_ctl' -D '$STANDBY' -m immediate stop"
jb_as_postgres "$JB_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$JB_PGPORT" -U postgres -D "$STANDBY" -R -X stream -c fast \
  >"$JB_RUN/basebackup.log" 2>&1 || { fail "pg_basebackup -R"; cat "$JB_RUN/basebackup.log"; faults_done; }
at_backup=$(jids)
# The primary goes on: at least three more ticks delivered; those staged after the backup's end
# the standby never sees.
jb_wait_until "[ \"\$(jb_redis LLEN queue:tq)\" -ge $(( $(wc -l <<<"$at_backup") + 3 )) ]" 30 ||
  fail "the primary did not deliver three more ticks"
jb_pg_ctl -m immediate stop
lost=$(comm -13 <(echo "$at_backup") <(jids))
say "ticks the primary delivered after the backup: $(wc -l <<<"$lost")"

jb_on_free_port STANDBY_PORT jb_pg_start "$STANDBY" "$JB_RUN/standby.log" ||
  { fail "the standby starts"; tail -n 20 "$JB_RUN/standby.log"; faults_done; }
jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$STANDBY" -w -t 60 promote >/dev/null || fail "pg_ctl promote"
standby_sql() { psql -X -qtAX -v ON_ERROR_STOP=1 -h "$JB_RUN" -p "$STANDBY_PORT" -U postgres -d "$JB_DB" -c "$1"; }
expect_eq "the standby is promoted" "$(standby_sql "SELECT pg_is_in_recovery()")" f
# It replayed less than the primary delivered: it does not continue the primary's start, and stays
# held (one WARNING naming the ways out) until the operator says it is the cluster to deliver.
if jb_wait_until "grep -q 'jobbuf_take_over()' '$JB_RUN/standby.log'" 30; then
  pass "the promoted standby, behind the primary, stays held with a WARNING naming jobbuf_take_over()"
else
  fail "no WARNING from the promoted standby naming jobbuf_take_over()"
fi
# Ticks it still holds staged: the primary may have pushed some of them already (a batch in flight
# when the backup was taken, whose marker jobbuf_take_over() never acts on: pushed again, same jid).
standby_staged=$(standby_sql "SELECT lpad(to_hex(tick_id), 16, '0') FROM jobbuf.jobs WHERE tick_id IS NOT NULL AND tick_id <> 0")
standby_sql "SELECT jobbuf_take_over()" >/dev/null || fail "jobbuf_take_over() on the promoted standby"
# Its ticks reach Redis once it holds the delivery lease.
before=$(jb_redis LLEN queue:tq)
jb_wait_until "[ \"\$(jb_redis LLEN queue:tq)\" -ge $(( before + $(wc -l <<<"$lost") + 2 )) ]" 60 ||
  fail "the promoted standby delivered $(( $(jb_redis LLEN queue:tq) - before )) ticks in 60 s"

all=$(jids)
twice=$(uniq -d <<<"$all")
# Each jid names its tick (the installation's salt, then jobbuf.tick_id of the schedule's name and
# the tick): every tick from the first to the last delivered is there, none lost.
created=$(standby_sql "SELECT extract(epoch FROM created_at)::bigint FROM jobbuf.schedules WHERE name = 'every2'")
standby_sql "SELECT lpad(to_hex(jobbuf.tick_id('every2', t)), 16, '0') || ' ' || extract(epoch FROM t)::bigint
             FROM generate_series(to_timestamp($created - $created % 2), now(), '2 seconds') t" >"$JB_RUN/ticks.map"
tick_of() { while read -r jid; do awk -v s="${jid:8}" '$1 == s { print $2 }' "$JB_RUN/ticks.map"; done; }
delivered=$(tick_of <<<"$all" | sort -un)
expect_eq "every jid is a tick of the schedule" "$(tick_of <<<"$all" | wc -l)" "$(wc -l <<<"$all")"
expect_eq "every tick from the first to the last delivered, none lost across the failover" \
  "$delivered" "$(seq "$(head -1 <<<"$delivered")" 2 "$(tail -1 <<<"$delivered")")"
check "ticks the standby never received were staged again by it ($(grep -c . <<<"$twice") of $(wc -l <<<"$lost"))" \
  test -n "$twice"
suffixes() { sed -E 's/^.{8}//' | sort -u; }
expect_eq "a tick came twice only if the primary delivered it after the backup, or the standby held it staged, with the same jid" \
  "$(comm -23 <(suffixes <<<"$twice") <(cat <(suffixes <<<"$lost") <(sort -u <<<"$standby_staged") | sort -u))" ""
expect_eq "no jid three times" "$(uniq -c <<<"$all" | awk '$1 > 2' | wc -l)" 0
faults_done

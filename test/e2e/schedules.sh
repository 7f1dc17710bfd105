#!/usr/bin/env bash
# Periodic jobs in real time, in one window of about two minutes: a "5 seconds" schedule and an
# every-minute one across two minute boundaries, through a kill -9 of the drain worker and an
# immediate shutdown (down for 11 s) at moments around ticks, with catch_up all, one and none
# side by side; a second database firing its own schedule; a restored copy holding its schedules
# until jobbuf_release_restored. Asserted on tick values: the queues are paused, so every staged
# tick waits in jobbuf.jobs with run_at = its tick; at the end they are resumed and every one
# reaches Redis. First, a tick staged twice shows consumers the same ids in every format. (The parser, the next-tick function, DST and bad input: test/unit/cron_*,
# test/regress/sql/schedules.sql.)
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.database = '*'"
DB2=${JB_DB}_two
COPY=${JB_DB}_copy
jb_psql_db postgres -q -c "CREATE DATABASE $DB2" -c "CREATE DATABASE $COPY" >/dev/null
jb_psql_db "$DB2" -q -c "CREATE EXTENSION jobbuf" >/dev/null
sql2() { jb_psql_db "$DB2" -qtAX -c "$1"; }
sqlc() { jb_psql_db "$COPY" -qtAX -c "$1"; }

for q in every5 every5_one every5_none minutely; do
  jb_sql "SELECT jobbuf_create_queue('$q', 'list'), jobbuf_pause('$q')" >/dev/null
done
sql2 "SELECT jobbuf_create_queue('two', 'list'), jobbuf_pause('two')" >/dev/null
jb_sql "SELECT jobbuf_schedule('s_all', '5 seconds', 'every5', '{\"s\": \"all\"}', '{\"catch_up\": \"all\"}'),
               jobbuf_schedule('s_one', '5 seconds', 'every5_one', '{\"s\": \"one\"}', '{\"catch_up\": \"one\"}'),
               jobbuf_schedule('s_none', '5 seconds', 'every5_none', '{\"s\": \"none\"}', '{\"catch_up\": \"none\"}'),
               jobbuf_schedule('m_all', '* * * * *', 'minutely', '{\"m\": 1}', '{\"catch_up\": \"all\"}')" >/dev/null
sql2 "SELECT jobbuf_schedule('two', '5 seconds', 'two', '{\"db\": 2}', '{\"catch_up\": \"all\"}')" >/dev/null
created=$(jb_sql "SELECT extract(epoch FROM created_at) FROM jobbuf.schedules WHERE name = 'm_all'")
say "schedules created at $(date -u -d "@${created%.*}" +%T)"

# A tick staged twice (as after a failover with asynchronous replication that lost the first
# staging: here by moving the schedule back by hand, in the staging transaction) shows consumers
# the same ids in every format, and other jobs other ids.
for target in sidekiq bullmq celery stream; do
  case $target in
    sidekiq) payload='{"class": "TickJob", "args": []}' ;;
    bullmq) payload='{"name": "tick", "data": {}}' ;;
    celery) payload='{"task": "app.tick", "args": []}' ;;
    stream) payload='{"tick": true}' ;;
  esac
  jb_sql "SELECT jobbuf_create_queue('twice_$target', '$target'),
                 jobbuf_schedule('twice_$target', '@yearly', 'twice_$target', '$payload')" >/dev/null
done
for _ in 1 2; do
  jb_psql -q -o /dev/null -c "BEGIN" \
    -c "UPDATE jobbuf.schedules SET next_run_at = '2026-01-01 00:00+00' WHERE name LIKE 'twice_%'" \
    -c "SELECT jobbuf.stage_due_ticks()" -c "COMMIT"
done
jb_sql "SELECT jobbuf_stage('twice_sidekiq', '{\"class\": \"PlainJob\", \"args\": []}')" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue LIKE '"'twice_%'"'")" = 0 ]' 20 ||
  fail "the ticks staged twice were not delivered"
ids() {
  case $1 in
    sidekiq) jb_redis LRANGE queue:twice_sidekiq 0 -1 | ruby -rjson -ne 'j = JSON.parse($_); puts "#{j["class"]} #{j["jid"]}"' | sort ;;
    bullmq) jb_redis LRANGE bull:twice_bullmq:wait 0 -1 ;;
    celery) jb_redis LRANGE celery 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["headers"]["id"]' ;;
    stream) jb_redis XRANGE jobbuf:twice_stream - + | awk 'prev == "uid" { print } { prev = $0 }' ;;
  esac
}
for target in celery stream; do
  got=$(ids $target)
  check "$target: the tick staged twice shows one id twice ($(tr '\n' ' ' <<<"$got"))" \
    test "$(wc -l <<<"$got") $(sort -u <<<"$got" | wc -l)" = "2 1"
done
# BullMQ itself drops a job whose id it has (Queue.add with an existing jobId adds nothing).
got=$(ids bullmq)
check "bullmq: the tick staged twice is one job, deduplicated by its id ($got)" \
  test "$(wc -l <<<"$got") $(jb_redis HGET "bull:twice_bullmq:$got" name)" = "1 tick"
got=$(ids sidekiq)
check "sidekiq: the tick staged twice has one jid, the plain job another ($(tr '\n' ' ' <<<"$got"))" \
  test "$(grep -c '^TickJob' <<<"$got") $(grep '^TickJob' <<<"$got" | sort -u | wc -l) $(grep -c "^PlainJob $(grep -m1 '^TickJob' <<<"$got" | cut -d' ' -f2)" <<<"$got")" = "2 1 0"
for target in sidekiq bullmq celery stream; do jb_sql "SELECT jobbuf_unschedule('twice_$target')" >/dev/null; done

# The restored copy: a dump of the database with its schedules, restored into another one.
jb_as_postgres "$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -Fc -f "$JB_RUN/db.dump" "$JB_DB" ||
  fail "pg_dump"
jb_as_postgres "$JB_PGBIN/pg_restore" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$COPY" "$JB_RUN/db.dump" ||
  fail "pg_restore"
expect_eq "the restored copy holds its 4 schedules" "$(sqlc "SELECT count(*) FILTER (WHERE held) FROM jobbuf_schedules()")" 4

worker_pid() { jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker' AND datname = current_database()"; }
# sleep_until_tick OFFSET: sleeps until OFFSET seconds (may be negative) from the next multiple of 5.
sleep_until_tick() {
  local now next
  now=$(date +%s.%N)
  next=$(awk -v n="$now" -v o="$1" 'BEGIN { t = (int(n / 5) + 1) * 5 + o; if (t - n < 0.5) t += 5; printf "%.3f", t - n }')
  sleep "$next"
}

# kill -9 of the drain worker 0.1 s before a tick (the postmaster restarts every backend).
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE payload->>'"'s'"' = '"'all'"'")" -ge 2 ]' 20 ||
  fail "no tick of the 5-second schedule within 20 s"
sleep_until_tick -0.1
pid=$(worker_pid)
kill -9 "$pid" && say "kill -9 of the drain worker $pid at $(date -u +%T.%N | cut -c1-12)"
jb_wait_until '[ -n "$(worker_pid 2>/dev/null)" ] && [ "$(worker_pid 2>/dev/null)" != "'"$pid"'" ]' 30 ||
  fail "no drain worker after the kill -9"

# An immediate shutdown 0.05 s after a tick, down for 11 s.
sleep_until_tick 0.05
jb_pg_ctl -m immediate stop && say "immediate shutdown at $(date -u +%T.%N | cut -c1-12)"
sleep 11
jb_pg_ctl start || fail "the server did not start again"
jb_wait_until '[ -n "$(worker_pid 2>/dev/null)" ]' 30 || fail "no drain worker after the restart"

# The copy: nothing fired while held; released, its schedules fire.
# (Jobs the dump carried keep their original's origin; the copy's own ticks have the copy's.)
own_ticks="SELECT count(*) FROM jobbuf.jobs WHERE origin = jobbuf.installation_id()"
expect_eq "the held copy staged no tick" "$(sqlc "$own_ticks")" 0
sqlc "SELECT jobbuf_release_restored()" >/dev/null
if jb_wait_until '[ "$(sqlc "$own_ticks")" -ge 3 ]' 20; then
  pass "released, the copy's schedules fire"
else
  fail "released, the copy's schedules fired $(sqlc "$own_ticks") ticks in 20 s"
fi

# Two minute boundaries after the schedules were created.
second=$(awk -v c="$created" 'BEGIN { printf "%d", (int(c / 60) + 2) * 60 }')
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'minutely'"' AND run_at >= to_timestamp('"$second"')")" -ge 1 ]' 200 ||
  fail "the every-minute schedule did not reach its second boundary"
for s in s_all s_one s_none m_all; do jb_sql "SELECT jobbuf_unschedule('$s')" >/dev/null; done
sql2 "SELECT jobbuf_unschedule('two')" >/dev/null
sqlc "SELECT jobbuf_unschedule(name) FROM jobbuf.schedules" >/dev/null

# Tick values. Every "5 seconds" tick of catch_up all from the first after creation to the last:
# each once, none staged before its tick.
ticks() { jb_sql "SELECT extract(epoch FROM run_at)::bigint FROM jobbuf.jobs WHERE queue = '$1' ORDER BY run_at"; }
all=$(ticks every5)
first=$(head -1 <<<"$all"); last=$(tail -1 <<<"$all")
expect_eq "catch_up all: the first tick is the first multiple of 5 after creation" "$first" \
  "$(awk -v c="$created" 'BEGIN { printf "%d", (int(c / 5) + 1) * 5 }')"
expect_eq "catch_up all: every multiple of 5 s from $first to $last once, through kill -9 and the shutdown" \
  "$all" "$(seq "$first" 5 "$last")"
expect_eq "the every-minute schedule: each minute boundary once" "$(ticks minutely)" \
  "$(seq "$(awk -v c="$created" 'BEGIN { printf "%d", (int(c / 60) + 1) * 60 }')" 60 "$(tail -1 <<<"$(ticks minutely)")")"
check "the every-minute schedule crossed two boundaries" [ "$(ticks minutely | wc -l)" -ge 2 ]
expect_eq "no tick staged before its tick" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE staged_at < run_at")" 0
# The ticks staged together with others were missed (the worker was down, or late past the next
# tick): catch_up one keeps the latest of each such group, none skips them all; the three
# schedules were staged by the same calls, so they saw the same due ticks.
groups=$(jb_sql "SELECT string_agg(extract(epoch FROM run_at)::bigint::text, ' ' ORDER BY run_at)
                 FROM jobbuf.jobs WHERE queue = 'every5' GROUP BY staged_at HAVING count(*) > 1")
say "ticks staged together (missed): ${groups:-none}"
check "the 11 s shutdown left missed ticks" [ -n "$groups" ]
missed=$(tr ' ' '\n' <<<"$groups" | sort -n)
latest_missed=$(while read -r g; do tr ' ' '\n' <<<"$g" | tail -1; done <<<"$groups" | sort -n)
in_window() { awk -v f="$first" -v l="$last" '$1 >= f && $1 <= l'; }
expect_eq "catch_up one: every tick but the missed ones, and the latest of each missed group" \
  "$(ticks every5_one | in_window)" "$(comm -23 <(seq "$first" 5 "$last") <(comm -23 <(echo "$missed") <(echo "$latest_missed")) | sort -n)"
# (none stages the latest missed tick still, when the worker got to it within 10 s of it.)
none_ticks=$(ticks every5_none | in_window)
check "catch_up none: every tick but the missed ones, the latest of a group only if staged within 10 s" \
  test -z "$(comm -23 <(comm -23 <(seq "$first" 5 "$last") <(echo "$missed") | sort) <(sort <<<"$none_ticks"))" \
       -a -z "$(comm -13 <(ticks every5_one | in_window | sort) <(sort <<<"$none_ticks"))"

# The second database's schedule was fired by its own worker: its ticks are its own jobs.
two=$(sql2 "SELECT extract(epoch FROM run_at)::bigint FROM jobbuf.jobs ORDER BY run_at")
check "the second database fired its schedule ($(wc -l <<<"$two") ticks)" [ "$(wc -l <<<"$two")" -ge 10 ]
expect_eq "the second database: every multiple of 5 s once" "$two" "$(seq "$(head -1 <<<"$two")" 5 "$(tail -1 <<<"$two")")"

# Resumed, every staged tick reaches Redis once.
n=$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'every5'")
m=$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'minutely'")
jb_sql "SELECT jobbuf_resume('every5'), jobbuf_resume('minutely')" >/dev/null
expect_list_reaches jobbuf:every5 "$n" 15 "the 5-second ticks reach Redis once resumed ($n)"
expect_list_reaches jobbuf:minutely "$m" 15 "the every-minute ticks reach Redis once resumed ($m)"
e2e_done

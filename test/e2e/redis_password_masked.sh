#!/usr/bin/env bash
# A password in jobbuf.redis_url is masked in everything that shows the setting, for every role:
# the exporter's role of docs/operations.md (pg_monitor + jobbuf_monitor: pg_monitor carries
# pg_read_all_settings, which reads superuser-only settings) and superusers see
# redis://default:********@host:port/0 in SHOW, current_setting() and pg_settings (setting,
# reset_val, boot_val), while the worker connects with the password as written: jobs are
# delivered to a Redis that requires it, after a reload, and after the worker puts back the
# server's URL in place of one that ALTER ROLE gave its role (worker_session.cpp restores it from
# the masked text).
source "$(dirname "$0")/tools/lib.sh"

PW='s3cr3t@pw'  # an unescaped '@': the last '@' ends the credentials
export REDISCLI_AUTH=$PW
jb_start_redis --requirepass "$PW" || exit 1
jb_start_postgres "jobbuf.redis_url = 'redis://default:$PW@127.0.0.1:$JB_REDIS_PORT/0'
jobbuf.poll_interval = '200ms'" || exit 1
trap e2e_cleanup EXIT
wait_worker_running 15 || fail "the drain worker did not start"
masked="redis://default:********@127.0.0.1:$JB_REDIS_PORT/0"

jb_sql "SELECT jobbuf_create_queue('q', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('q', '{\"n\": 1}')" >/dev/null
expect_list_reaches jobbuf:q 1 20 "a job reaches the Redis that requires the URL's password"

jb_psql -q -o /dev/null -c "CREATE ROLE jobbuf_exporter LOGIN" -c "GRANT pg_monitor, jobbuf_monitor TO jobbuf_exporter"
as_exporter() { psql -X -qtAX -h "$JB_PGHOST" -p "$JB_PGPORT" -U jobbuf_exporter -d "$JB_DB" -c "$1" 2>&1; }
shown_to() {  # every way a role reads the setting, one per line
  local run=$1
  $run "SHOW jobbuf.redis_url"
  $run "SELECT current_setting('jobbuf.redis_url')"
  $run "SELECT concat_ws(' | ', setting, reset_val, boot_val) FROM pg_settings WHERE name = 'jobbuf.redis_url'"
  $run "SELECT setting FROM pg_show_all_settings() WHERE name = 'jobbuf.redis_url'"
}
for who in exporter superuser; do
  if [ $who = exporter ]; then out=$(shown_to as_exporter); else out=$(shown_to jb_sql); fi
  expect_eq "$who: no line shows the password" "$(grep -cF 's3cr3t' <<<"$out")" 0
  expect_eq "$who: SHOW gives the masked URL" "$(sed -n 1p <<<"$out")" "$masked"
  expect_eq "$who: current_setting() gives the masked URL" "$(sed -n 2p <<<"$out")" "$masked"
  expect_eq "$who: pg_settings setting | reset_val | boot_val" "$(sed -n 3p <<<"$out")" \
    "$masked | $masked | redis://127.0.0.1:6379/0"
done
jb_sql "CREATE ROLE plain LOGIN" >/dev/null
expect_eq "a role without pg_read_all_settings still cannot read it" \
  "$(psql -X -qtAX -h "$JB_PGHOST" -p "$JB_PGPORT" -U plain -d "$JB_DB" \
       -c "SELECT count(*) FROM pg_settings WHERE name = 'jobbuf.redis_url'" 2>&1)" 0

# A superuser's own SET in a session is masked as well.
expect_eq "SET in a session: SHOW masks it" \
  "$(jb_psql -qtAX -c "SET jobbuf.redis_url = 'rediss://u:other-secret@h:6380/2'" -c "SHOW jobbuf.redis_url")" \
  "rediss://u:********@h:6380/2"

# A reload keeps the worker's password.
jb_sql "SELECT pg_reload_conf()" >/dev/null
jb_sql "SELECT jobbuf_stage('q', '{\"n\": 2}')" >/dev/null
expect_list_reaches jobbuf:q 2 20 "after a reload: delivered with the password"

# ALTER ROLE postgres SET jobbuf.redis_url: the worker puts back the server's URL, which it reads
# masked (GetConfigOption), and still connects with its password.
worker_pid() { jb_sql "SELECT pid FROM jobbuf_worker_status()" 2>/dev/null; }
jb_sql "ALTER ROLE postgres SET jobbuf.redis_url = 'redis://127.0.0.1:1/0'" >/dev/null
old=$(worker_pid)
jb_sql "SELECT pg_terminate_backend($old)" >/dev/null
check "the worker comes back" jb_wait_until "[ -n \"\$(worker_pid)\" ] && [ \"\$(worker_pid)\" != $old ]" 20
jb_sql "SELECT jobbuf_stage('q', '{\"n\": 3}')" >/dev/null
expect_list_reaches jobbuf:q 3 20 "the server's URL restored over the role's: delivered with the password"
jb_sql "ALTER ROLE postgres RESET jobbuf.redis_url" >/dev/null

expect_eq "no connection refused for a wrong password in the log" \
  "$(grep -ciE 'WRONGPASS|invalid password|NOAUTH' "$JB_RUN/postgres.log")" 0
e2e_done

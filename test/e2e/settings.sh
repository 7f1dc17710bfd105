#!/usr/bin/env bash
# Configuration: SIGHUP (ALTER SYSTEM + pg_reload_conf) moves delivery to another Redis without a
# restart; bad values are refused with the reason at SET / ALTER SYSTEM / reload time and never
# reach the worker; jobbuf.redis_url (it may carry a password) is hidden from non-superusers.
source "$(dirname "$0")/tools/lib.sh"

e2e_start
start_extra_redis || { fail "second redis-server did not start"; e2e_done; }
jb_sql "SELECT jobbuf_create_queue('cfg', 'list')" >/dev/null

jb_sql "SELECT jobbuf_stage('cfg', '{\"n\": 1}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:cfg)" = 1 ]' 15
expect_eq "first job goes to the first Redis" "$(jb_redis LLEN jobbuf:cfg)" 1

# --- SIGHUP: a new redis_url takes effect for new jobs.
jb_psql -q -o /dev/null -c "ALTER SYSTEM SET jobbuf.redis_url = 'redis://127.0.0.1:$EXTRA_REDIS_PORT/3'" \
  -c "SELECT pg_reload_conf()"
jb_wait_until '[ "$(jb_sql "SHOW jobbuf.redis_url")" = "redis://127.0.0.1:'"$EXTRA_REDIS_PORT"'/3" ]' 15
sleep 0.5  # the worker processes the SIGHUP
jb_sql "SELECT jobbuf_stage('cfg', jsonb_build_object('n', n)) FROM generate_series(2, 4) n" >/dev/null
jb_wait_until '[ "$(redis-cli -p "$EXTRA_REDIS_PORT" -n 3 LLEN jobbuf:cfg)" = 3 ]' 15
expect_eq "after reload: new jobs in the second Redis, db 3" \
  "$(redis-cli -p "$EXTRA_REDIS_PORT" -n 3 LRANGE jobbuf:cfg 0 -1 | tr '\n' ' ')" '{"n": 2} {"n": 3} {"n": 4} '
expect_eq "after reload: the first Redis got nothing more" "$(jb_redis LLEN jobbuf:cfg)" 1
expect_eq "the worker did not restart for the reload" \
  "$(count_lines 'jobbuf drain worker.*(exited|terminated)|drain worker started' "$(cat "$JB_RUN/postgres.log")")" 1

# --- Bad values are refused with the reason.
refused() {  # refused "what" "sql" "regex of the reason"
  local out
  if out=$(jb_psql -qtAX -c "$2" 2>&1); then
    fail "$1: accepted ($2)"
  else
    expect_match "$1 refused: ${out//$'\n'/ | }" "$out" "$3"
  fi
}
refused "http:// URL" "ALTER SYSTEM SET jobbuf.redis_url = 'http://x'" \
  'invalid value for parameter "jobbuf.redis_url".*unsupported Redis URL scheme'
refused "redis+cluster:// URL with a database other than 0" "ALTER SYSTEM SET jobbuf.redis_url = 'redis+cluster://h:6379/1'" \
  'a Redis Cluster has only database 0'
refused "Sentinel URL without a master name" "ALTER SYSTEM SET jobbuf.redis_url = 'redis+sentinel://h:26379'" \
  'must name the master'
refused "port 0" "ALTER SYSTEM SET jobbuf.redis_url = 'redis://127.0.0.1:0/0'" 'invalid port'
refused "port 70000" "ALTER SYSTEM SET jobbuf.redis_url = 'redis://127.0.0.1:70000/0'" 'invalid port'
refused "empty URL" "ALTER SYSTEM SET jobbuf.redis_url = ''" 'invalid value for parameter "jobbuf.redis_url"'
refused "SET jobbuf.batch_size = -1" "SET jobbuf.batch_size = -1" 'jobbuf.batch_size'
refused "batch_size -1 (ALTER SYSTEM)" "ALTER SYSTEM SET jobbuf.batch_size = -1" \
  '-1 is outside the valid range for parameter "jobbuf.batch_size" \(1 \.\. 100000\)'
refused "batch_size 0" "ALTER SYSTEM SET jobbuf.batch_size = 0" 'outside the valid range'
refused "poll_interval 0" "ALTER SYSTEM SET jobbuf.poll_interval = 0" 'outside the valid range'
refused "poll_interval 'soon'" "ALTER SYSTEM SET jobbuf.poll_interval = 'soon'" 'invalid value for parameter "jobbuf.poll_interval"'
refused "redis_timeout -1" "ALTER SYSTEM SET jobbuf.redis_timeout = -1" 'outside the valid range'
refused "enabled 'maybe'" "ALTER SYSTEM SET jobbuf.enabled = 'maybe'" 'requires a Boolean value'
refused "jobbuf.database at run time" "ALTER SYSTEM SET jobbuf.database = ''" 'jobbuf.database'
refused "unknown jobbuf.* setting" "SET jobbuf.no_such_setting = 1" 'invalid configuration parameter name|unrecognized configuration parameter'
expect_eq "none of the refused values reached postgresql.auto.conf" \
  "$(grep -c 'http://x\|:0/0\|70000\|batch_size\|poll_interval\|soon\|maybe' "$JB_PGDATA/postgresql.auto.conf")" 0

# A bad value written straight into a configuration file is refused at reload (logged by the
# postmaster). Postgres keeps the old value, but the file no longer names it: the worker stops
# delivering (jobs stay staged, last_error says why) until a valid value is reloaded
# (docs/configuration.md). (postgresql.auto.conf is read last, so the line must go there to
# override the ALTER SYSTEM value above.)
mark=$(log_mark)
echo "jobbuf.redis_url = 'http://bad.example'" >>"$JB_PGDATA/postgresql.auto.conf"
jb_sql "SELECT pg_reload_conf()" >/dev/null
jb_wait_until '[ -n "$(log_since '"$mark"' | grep -E "jobbuf.redis_url")" ]' 15
expect_match "reload of a bad redis_url in a configuration file is logged with the reason" \
  "$(log_since "$mark" | grep -A1 -E 'jobbuf.redis_url' | head -n 2 | tr '\n' ' ')" 'invalid value for parameter "jobbuf.redis_url".*unsupported Redis URL'
expect_eq "Postgres keeps the old redis_url" "$(jb_sql "SHOW jobbuf.redis_url")" "redis://127.0.0.1:$EXTRA_REDIS_PORT/3"
check "the worker stops delivering and says why" \
  jb_wait_until "jb_sql 'SELECT last_error FROM jobbuf_worker_status()' | grep -q 'jobbuf.redis_url in the server configuration was refused (unsupported Redis URL scheme'" 15
jb_sql "SELECT jobbuf_stage('cfg', '{\"n\": 5}'::jsonb)" >/dev/null
expect_eq "the job stays staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(redis-cli -p "$EXTRA_REDIS_PORT" -n 3 LLEN jobbuf:cfg)" "1 3"
expect_eq "the worker is still running" "$(jb_sql "SELECT running FROM jobbuf_worker_status()")" t
sed -i '$d' "$JB_PGDATA/postgresql.auto.conf"
jb_sql "SELECT pg_reload_conf()" >/dev/null
jb_wait_until '[ "$(redis-cli -p "$EXTRA_REDIS_PORT" -n 3 LLEN jobbuf:cfg)" = 4 ]' 15
expect_eq "the line removed and reloaded: delivered with the old value" \
  "$(redis-cli -p "$EXTRA_REDIS_PORT" -n 3 LINDEX jobbuf:cfg -1)" '{"n": 5}'

# --- jobbuf.redis_url is superuser-only to read.
jb_psql -q -o /dev/null -c "CREATE ROLE app LOGIN"
as_app() { psql -X -qtAX -h "$JB_PGHOST" -p "$JB_PGPORT" -U app -d "$JB_DB" -c "$1" 2>&1; }
expect_match "SHOW jobbuf.redis_url as a non-superuser errors" "$(as_app "SHOW jobbuf.redis_url")" \
  'ERROR: +(must be superuser or have privileges of pg_read_all_settings to examine|permission denied to examine) "jobbuf.redis_url"'
expect_match "current_setting('jobbuf.redis_url') as a non-superuser errors" \
  "$(as_app "SELECT current_setting('jobbuf.redis_url')")" 'ERROR: +(must be superuser|permission denied to examine)'
expect_eq "pg_settings hides jobbuf.redis_url from a non-superuser" \
  "$(as_app "SELECT count(*) FROM pg_settings WHERE name = 'jobbuf.redis_url'")" 0
expect_eq "pg_settings shows the other jobbuf settings to a non-superuser" \
  "$(as_app "SELECT string_agg(name, ',' ORDER BY name) FROM pg_settings WHERE name LIKE 'jobbuf.%'")" \
  "jobbuf.batch_max_bytes,jobbuf.batch_size,jobbuf.database,jobbuf.enabled,jobbuf.max_workers,jobbuf.poll_interval,jobbuf.redis_memory_limit,jobbuf.redis_min_replicas,jobbuf.redis_require_noeviction,jobbuf.redis_timeout"
expect_eq "the superuser sees it" "$(jb_sql "SELECT count(*) FROM pg_settings WHERE name = 'jobbuf.redis_url'")" 1
expect_eq "a non-superuser cannot ALTER SYSTEM it" \
  "$(as_app "ALTER SYSTEM SET jobbuf.redis_url = 'redis://evil:6379'" | grep -c 'ERROR: +must be superuser\|permission denied')" 1

e2e_done

#!/usr/bin/env bash
# A jobbuf.redis_* value that was given but refused stops delivery; the worker never falls back to
# the built-in default redis://127.0.0.1:6379/0 (where Debian's redis-server listens), never sends
# the password there, and says why once:
#   A. postgresql.conf names a Redis with a URL Postgres refuses at server start: jobs stay staged,
#      one WARNING names jobbuf.redis_url and the reason, jobbuf_worker_status() says so, and no
#      connection reaches 127.0.0.1:6379 (a redis-server listens there when the port is free);
#      a valid value reloaded: delivered, and last_error is cleared.
#   B. the same for a value of the database (pg_db_role_setting) refused when the worker connects
#      (stored while jobbuf was not preloaded, where Postgres checks nothing).
#   C. ALTER ROLE postgres SET jobbuf.redis_url is ignored: the worker keeps postgresql.conf's
#      Redis (it used to go back to the built-in default).
source "$(dirname "$0")/tools/lib.sh"

jb_init_run_dir
trap faults_cleanup EXIT
password=refused-settings-secret
export REDISCLI_AUTH=$password   # the named Redis requires the password (so does the trap below)
printf '%s\n' "$password" >"$JB_RUN/redis_password"
chmod 644 "$JB_RUN/redis_password"

# The trap: a redis-server with the same password where the built-in default points, when that
# port is free (a fallback would deliver there and succeed).
trap_port=6379
trap_up=false
if ! redis-cli -p $trap_port PING >/dev/null 2>&1 &&
   ruby -rsocket -e "TCPServer.new('127.0.0.1', $trap_port).close" 2>/dev/null; then
  mkdir -p "$JB_RUN/trap"
  redis-server --port $trap_port --bind 127.0.0.1 --dir "$JB_RUN/trap" --save '' --appendonly no \
    --requirepass "$password" --logfile "$JB_RUN/trap/redis.log" &
  trap_pid=$!
  track_pid "$trap_pid"
  jb_wait_until "[ \"\$(redis-cli -p $trap_port INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')\" = $trap_pid ]" 5 &&
    trap_up=true
fi
trap_connections() { redis-cli -p $trap_port INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }
if $trap_up; then
  say "a redis-server listens on 127.0.0.1:$trap_port (the built-in default) with the same password"
  trap_before=$(trap_connections)
else
  say "127.0.0.1:$trap_port is taken: non-fallback is shown by the status and the log only"
fi

faults_start "--requirepass $password" "jobbuf.poll_interval = '200ms'
jobbuf.redis_password_file = '$JB_RUN/redis_password'
jobbuf.redis_url = 'redis://127.0.0.1:70000/0'"
jb_sql "SELECT jobbuf_create_queue('r', 'list')" >/dev/null
wakeups=$(worker_status_value wakeups)
jb_sql "SELECT jobbuf_stage('r', jsonb_build_object('n', n)) FROM generate_series(1, 5) n" >/dev/null
check "the worker woke up for the commit" jb_wait_until "[ \"\$(worker_status_value wakeups)\" -gt $wakeups ]" 15
error=$(worker_status_value "last_error")
expect_match "A: jobbuf_worker_status().last_error names the refused setting and why" "$error" \
  '^jobbuf\.redis_url in the server configuration was refused \(invalid port in Redis URL.*\): no delivery'
say "last_error: $error"
expect_eq "A: redis_connected is false" "$(worker_status_value redis_connected)" f
expect_eq "A: the 5 jobs stay staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 5
log=$(cat "$JB_RUN/postgres.log")
expect_eq "A: one WARNING from the worker names it" \
  "$(count_lines 'WARNING: +jobbuf: jobbuf\.redis_url in the server configuration was refused' "$log")" 1
expect_eq "A: no connection to 127.0.0.1:6379 in the log" "$(count_lines '127\.0\.0\.1:6379' "$log")" 0
if $trap_up; then
  expect_eq "A: the redis-server at 127.0.0.1:6379 saw no connection but this check's own" \
    "$(( $(trap_connections) - trap_before ))" 1
  expect_eq "A: and holds no key" "$(redis-cli -p $trap_port DBSIZE)" 0
fi

# A valid value reloaded: delivery resumes, the error is over.
mark=$(log_mark)
echo "jobbuf.redis_url = 'redis://127.0.0.1:$JB_REDIS_PORT/0'" >>"$JB_PGDATA/postgresql.conf"
jb_sql "SELECT pg_reload_conf()" >/dev/null
check "A: a valid value reloaded: the 5 jobs are delivered" jb_wait_until '[ "$(jb_redis LLEN jobbuf:r)" = 5 ]' 15
wait_staged 0
expect_eq "A: last_error is cleared, last_error_at kept, redis_connected" \
  "$(worker_status_value "coalesce(last_error, '(null)') || ' ' || (last_error_at IS NOT NULL) || ' ' || redis_connected")" "(null) true true"
expect_eq "A: one LOG line says the settings are valid again" \
  "$(count_lines 'LOG: +jobbuf: the Redis settings are valid again' "$(log_since "$mark")")" 1

# B. A database value refused when the worker connects.
db_oid=$(jb_sql "SELECT oid FROM pg_database WHERE datname = '$JB_DB'")
mark=$(log_mark)
old=$(worker_pid)
jb_psql -q -o /dev/null -c "INSERT INTO pg_db_role_setting VALUES ($db_oid, 0, '{jobbuf.redis_url=redis://127.0.0.1:70000/0}')" \
  -c "SELECT pg_reload_conf()"
check "B: the worker restarts for its database's new settings" \
  jb_wait_until "[ -n \"\$(worker_pid)\" ] && [ \"\$(worker_pid)\" != $old ]" 20
check "B: and reports the refused database value" \
  jb_wait_until "worker_status_value last_error | grep -q 'set for this database (ALTER DATABASE ... SET) was refused'" 15
jb_sql "SELECT jobbuf_stage('r', jsonb_build_object('n', n)) FROM generate_series(6, 7) n" >/dev/null
expect_eq "B: the jobs stay staged, nothing more in the named Redis" \
  "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(jb_redis LLEN jobbuf:r)" "2 5"
expect_eq "B: one WARNING names it" \
  "$(count_lines 'WARNING: +jobbuf: jobbuf\.redis_url set for this database .* was refused' "$(log_since "$mark")")" 1
jb_psql -q -o /dev/null -c "ALTER DATABASE $JB_DB RESET jobbuf.redis_url" -c "SELECT pg_reload_conf()"
check "B: the value removed: delivered" jb_wait_until '[ "$(jb_redis LLEN jobbuf:r)" = 7 ]' 20

# C. ALTER ROLE postgres SET jobbuf.redis_url: ignored by the worker.
jb_sql "ALTER ROLE postgres SET jobbuf.redis_url = 'redis://127.0.0.1:1/0'" >/dev/null
old=$(worker_pid)
jb_sql "SELECT pg_terminate_backend($old)" >/dev/null
check "C: the worker comes back" jb_wait_until "[ -n \"\$(worker_pid)\" ] && [ \"\$(worker_pid)\" != $old ]" 20
jb_sql "SELECT jobbuf_stage('r', '{\"n\": 8}')" >/dev/null
check "C: a job staged after ALTER ROLE postgres SET jobbuf.redis_url reaches postgresql.conf's Redis" \
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:r)" = 8 ]' 15
jb_sql "ALTER ROLE postgres RESET jobbuf.redis_url" >/dev/null

log=$(cat "$JB_RUN/postgres.log")
expect_eq "never a connection to 127.0.0.1:6379 in the log" "$(count_lines '127\.0\.0\.1:6379' "$log")" 0
if $trap_up; then
  expect_eq "the redis-server at 127.0.0.1:6379 holds no key" "$(redis-cli -p $trap_port DBSIZE)" 0
fi
faults_done

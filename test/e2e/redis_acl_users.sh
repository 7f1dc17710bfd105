#!/usr/bin/env bash
# One Redis ACL user per database: jobbuf.redis_url = 'redis://<user>@host:port/db' (no password
# in the URL, the form Redis Cloud gives) takes the password from jobbuf.redis_password_file, and a
# superuser sets both per database with ALTER DATABASE ... SET. Redis's default user has another
# password here, so only the ACL users can push. Each database's worker authenticates as its own
# user (CLIENT LIST), and delivers; a user without any password file is refused with the reason,
# and its jobs stay staged; a database owner cannot set either setting.
source "$(dirname "$0")/tools/lib.sh"

export REDISCLI_AUTH=admin-secret
jb_start_redis --requirepass admin-secret || exit 1
jb_start_postgres "jobbuf.database = 'jobbuf_test, tenant_b'
jobbuf.poll_interval = '200ms'" || exit 1
trap e2e_cleanup EXIT
wait_worker_running 15 || fail "the drain worker did not start"
jb_redis ACL SETUSER tenant_a on '>pw-of-a' '~*' '&*' +@all >/dev/null
jb_redis ACL SETUSER tenant_b on '>pw-of-b' '~*' '&*' +@all >/dev/null
printf 'pw-of-a\n' >"$JB_RUN/tenant_a.pass"
printf 'pw-of-b\n' >"$JB_RUN/tenant_b.pass"
chmod 644 "$JB_RUN"/tenant_*.pass
jb_psql_db postgres -q -c "CREATE DATABASE tenant_b" >/dev/null
jb_psql_db tenant_b -q -c "CREATE EXTENSION jobbuf" >/dev/null
jb_psql -q -o /dev/null <<SQL
ALTER DATABASE jobbuf_test SET jobbuf.redis_url = 'redis://tenant_a@127.0.0.1:$JB_REDIS_PORT/0';
ALTER DATABASE jobbuf_test SET jobbuf.redis_password_file = '$JB_RUN/tenant_a.pass';
ALTER DATABASE tenant_b SET jobbuf.redis_url = 'redis://tenant_b@127.0.0.1:$JB_REDIS_PORT/0';
ALTER DATABASE tenant_b SET jobbuf.redis_password_file = '$JB_RUN/tenant_b.pass';
SELECT pg_reload_conf();
SQL
jb_sql "SELECT jobbuf_create_queue('qa', 'list')" >/dev/null
jb_psql_db tenant_b -qtAX -c "SELECT jobbuf_create_queue('qb', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('qa', jsonb_build_object('n', n)) FROM generate_series(1, 3) n" >/dev/null
jb_psql_db tenant_b -qtAX -c "SELECT jobbuf_stage('qb', jsonb_build_object('n', n)) FROM generate_series(1, 4) n" >/dev/null
expect_list_reaches jobbuf:qa 3 20 "database jobbuf_test delivers as Redis user tenant_a"
expect_list_reaches jobbuf:qb 4 20 "database tenant_b delivers as Redis user tenant_b"
clients=$(jb_redis CLIENT LIST TYPE normal)
check "a connection of jobbuf_test's worker is Redis user tenant_a" grep -qE 'user=tenant_a' <<<"$clients"
check "a connection of tenant_b's worker is Redis user tenant_b" grep -qE 'user=tenant_b' <<<"$clients"
expect_eq "no worker connection as the default user" "$(grep -v 'cmd=client' <<<"$clients" | grep -c 'user=default')" 0
expect_eq "the URL shown to a superuser has no password" \
  "$(jb_psql_db tenant_b -qtAX -c "SHOW jobbuf.redis_url")" "redis://tenant_b@127.0.0.1:$JB_REDIS_PORT/0"

# A user and no password file anywhere: refused with the reason, jobs stay staged.
b_status() { jb_psql_db tenant_b -qtAX -c "SELECT $1 FROM jobbuf_worker_status()" 2>/dev/null; }
old=$(b_status pid)
say "tenant_b's worker: pid $old"
jb_psql_db tenant_b -q -o /dev/null -c "ALTER DATABASE tenant_b RESET jobbuf.redis_password_file" -c "SELECT pg_reload_conf()"
check "tenant_b's worker restarts for its new settings" \
  jb_wait_until '[ -n "$(b_status pid)" ] && [ "$(b_status pid)" != "$old" ]' 20
check "without a password file: last_error says the user needs one" \
  jb_wait_until "b_status last_error | grep -q 'names a Redis user without a password'" 15
jb_psql_db tenant_b -qtAX -c "SELECT jobbuf_stage('qb', '{\"n\": 5}')" >/dev/null
expect_eq "without a password file: the job stays staged" \
  "$(jb_psql_db tenant_b -qtAX -c "SELECT count(*) FROM jobbuf.jobs") $(jb_redis LLEN jobbuf:qb)" "1 4"
jb_psql_db tenant_b -q -o /dev/null -c "ALTER DATABASE tenant_b SET jobbuf.redis_password_file = '$JB_RUN/tenant_b.pass'" \
  -c "SELECT pg_reload_conf()"
expect_list_reaches jobbuf:qb 5 20 "the password file set again: delivered"

# Only a superuser sets them for a database, not its owner.
jb_psql_db postgres -q -c "CREATE ROLE tenant_owner LOGIN; ALTER DATABASE tenant_b OWNER TO tenant_owner" >/dev/null
for setting in "jobbuf.redis_password_file = '/tmp/x'" "jobbuf.redis_url = 'redis://tenant_a@127.0.0.1:1/0'"; do
  out=$(psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U tenant_owner -d tenant_b -qtAX \
          -c "ALTER DATABASE tenant_b SET $setting" 2>&1)
  expect_match "the database owner cannot ALTER DATABASE ... SET ${setting%% =*}" "$out" "permission denied"
done
e2e_done

#!/usr/bin/env bash
# jobbuf.database = '*': every database that has the extension gets its own drain worker, with its
# own Redis (ALTER DATABASE ... SET jobbuf.redis_url). Three databases created after the server
# started, the extension in two: each one's committed jobs arrive in its own Redis, long before
# the 30 s poll could deliver them, none in another's, none rolled back. The third gets the
# extension later and drains without a restart. DROP EXTENSION in one and DROP DATABASE of another
# succeed within seconds while the remaining one keeps draining a live stager without a loss. A
# per-database setting changed with ALTER DATABASE applies on reload; a restart brings every
# worker back.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'
jobbuf.database = '*'"
declare -A port
for db in app1 app2 app3; do
  start_extra_redis || fail "redis for $db did not start"
  port[$db]=$EXTRA_REDIS_PORT
done
sql() { jb_psql_db "$1" -qtAX -c "$2"; }
llen() { redis-cli -p "${port[$1]}" LLEN "jobbuf:${2:-work}"; }
status_of() { jb_sql "SELECT $2 FROM jobbuf_worker_status() WHERE database = '$1'"; }

for db in app1 app2 app3; do
  jb_psql_db postgres -q -c "CREATE DATABASE $db" \
    -c "ALTER DATABASE $db SET jobbuf.redis_url = 'redis://127.0.0.1:${port[$db]}/0'"
done
# A database the launcher has just seen gets a short check (a probe that looks for the extension
# and leaves): wait for that to settle before asserting.
jb_wait_until '[ "$(jb_sql "SELECT string_agg(database, '"','"' ORDER BY database) FROM jobbuf_worker_status()")" = "$JB_DB" ]' 10 || true
expect_eq "no worker for a database without the extension" \
  "$(jb_sql "SELECT string_agg(database, ',' ORDER BY database) FROM jobbuf_worker_status()")" "$JB_DB"

# CREATE EXTENSION, then the first committed job arrives without waiting for the poll.
install_and_expect_quickly() {
  local db=$1
  jb_psql_db "$db" -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('work', 'list')"
  local t0; t0=$(now_ms)
  sql "$db" "SELECT jobbuf_stage('work', '{\"db\": \"$db\", \"n\": 0}')" >/dev/null
  if jb_wait_until "[ \"\$(llen $db)\" = 1 ]" 10; then
    pass "$db: the first job committed after CREATE EXTENSION arrives in its own Redis ($(( $(now_ms) - t0 )) ms; poll 30 s)"
  else
    fail "$db: the first committed job is not in its Redis after 10 s (poll_interval 30 s)"
  fi
}
install_and_expect_quickly app1
install_and_expect_quickly app2
check "a worker each for app1 and app2" \
  jb_wait_until '[ "$(status_of app1 running) $(status_of app2 running)" = "t t" ]' 10

# Commits and rollbacks in both at once.
for db in app1 app2; do
  jb_psql_db "$db" -q -o /dev/null \
    -c "SELECT jobbuf_stage('work', jsonb_build_object('db', '$db', 'n', n)) FROM generate_series(1, 200) n" \
    -c "BEGIN" -c "SELECT jobbuf_stage('work', jsonb_build_object('db', '$db', 'rolled_back', true))" -c "ROLLBACK"
done
for db in app1 app2; do
  check "$db: its 201 jobs in its Redis" jb_wait_until "[ \"\$(llen $db)\" = 201 ]" 15
done
sleep 0.5   # a job sent to the wrong place would show here
expect_eq "app3 (no extension) got nothing" "$(llen app3)" 0
for db in app1 app2; do
  others=$(redis-cli -p "${port[$db]}" LRANGE jobbuf:work 0 -1 | grep -vc "\"db\": \"$db\"" || true)
  expect_eq "$db's Redis holds no other database's job, no rolled-back one" \
    "$others $(redis-cli -p "${port[$db]}" LRANGE jobbuf:work 0 -1 | grep -c rolled_back || true)" "0 0"
done
expect_eq "the harness's Redis got none of them" "$(jb_redis LLEN jobbuf:work)" 0
expect_eq "app1, app2: nothing left staged" \
  "$(sql app1 "SELECT count(*) FROM jobbuf.jobs") $(sql app2 "SELECT count(*) FROM jobbuf.jobs")" "0 0"

# The third database gets the extension now: no restart needed.
pids_before=$(jb_sql "SELECT string_agg(pid::text, ',' ORDER BY database) FROM jobbuf_worker_status()")
install_and_expect_quickly app3
expect_eq "the other workers kept their process" \
  "$(jb_sql "SELECT string_agg(pid::text, ',' ORDER BY database) FROM jobbuf_worker_status() WHERE database <> 'app3'")" "$pids_before"

# A live stager in app1 (one job per commit until told to stop) while app2 drops the extension
# and app3 is dropped.
app1_pid=$(status_of app1 pid)
jb_psql_db app1 -q -o /dev/null <<'SQL'
CREATE TABLE stager_control (stop boolean NOT NULL DEFAULT false, staged integer NOT NULL DEFAULT 0);
INSERT INTO stager_control DEFAULT VALUES;
CREATE PROCEDURE stage_until_stopped() LANGUAGE plpgsql AS $$
DECLARE n integer := 0;
BEGIN
    LOOP
        n := n + 1;
        PERFORM jobbuf_stage('live', jsonb_build_object('db', 'app1', 'live', n));
        UPDATE stager_control SET staged = n;
        COMMIT;
        EXIT WHEN (SELECT stop FROM stager_control);
        PERFORM pg_sleep(0.005);
    END LOOP;
END $$;
SELECT jobbuf_create_queue('live', 'list');
SQL
jb_psql_db app1 -q -c "CALL stage_until_stopped()" &
stager=$!
check "the stager runs and its jobs arrive" jb_wait_until '[ "$(llen app1 live)" -ge 20 ]' 15

# expect_succeeds_in DB "SQL" WHAT: SQL run in DB as postgres succeeds (passes WHAT with the time
# it took); fails WHAT when it fails or hangs (30 s).
expect_succeeds_in() {
  local t0; t0=$(now_ms)
  if timeout 30 psql -X -q -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$1" -c "$2"; then
    pass "$3 succeeds ($(( $(now_ms) - t0 )) ms)"
  else
    fail "$3 failed or hung"
  fi
}
expect_succeeds_in app2 "DROP EXTENSION jobbuf" "DROP EXTENSION in app2"
check "app2's worker stops" jb_wait_until '[ -z "$(status_of app2 pid)" ]' 10
expect_succeeds_in postgres "DROP DATABASE app3" "DROP DATABASE app3"
check "app3's worker is gone from jobbuf_worker_status()" jb_wait_until '[ -z "$(status_of app3 database)" ]' 15
expect_eq "the stager is still running" "$(kill -0 $stager 2>/dev/null && echo yes)" yes
sql app1 "UPDATE stager_control SET stop = true" >/dev/null
wait "$stager" || fail "the stager failed"
staged=$(sql app1 "SELECT staged FROM stager_control")
check "app1: all $staged live jobs arrive" jb_wait_until "[ \"\$(llen app1 live)\" = $staged ]" 15
expect_eq "app1: each live job once" \
  "$(redis-cli -p "${port[app1]}" LRANGE jobbuf:live 0 -1 | sort -u | wc -l) $(sql app1 "SELECT count(*) FROM jobbuf.jobs")" "$staged 0"
expect_eq "app1's worker kept its process through both" "$(status_of app1 pid)" "$app1_pid"

# A per-database setting changed with ALTER DATABASE applies on reload, to that database only.
start_extra_redis || fail "another redis did not start"
moved=$EXTRA_REDIS_PORT
jb_psql_db postgres -q -o /dev/null -c "ALTER DATABASE app1 SET jobbuf.redis_url = 'redis://127.0.0.1:$moved/2'" \
  -c "SELECT pg_reload_conf()"
check "app1's worker restarts with the new setting" \
  jb_wait_until '[ -n "$(status_of app1 pid)" ] && [ "$(status_of app1 pid)" != '"$app1_pid"' ]' 15
sql app1 "SELECT jobbuf_stage('work', '{\"db\": \"app1\", \"moved\": true}')" >/dev/null
check "app1's next job goes to the Redis its database names now" \
  jb_wait_until "[ \"\$(redis-cli -p $moved -n 2 LLEN jobbuf:work)\" = 1 ]" 15
jb_sql "SELECT jobbuf_create_queue('work', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('work', '{\"db\": \"$JB_DB\"}')" >/dev/null
check "the other database's worker still uses the server-wide Redis" jb_wait_until '[ "$(jb_redis LLEN jobbuf:work)" = 1 ]' 15

# A restart brings every worker back; each drains into its own Redis.
jb_pg_ctl restart
check "after a restart: app1's and $JB_DB's workers run" \
  jb_wait_until '[ "$(jb_sql "SELECT string_agg(database || '"'='"' || running, '"','"' ORDER BY database) FROM jobbuf_worker_status()")" = "app1=true,$JB_DB=true" ]' 20
sql app1 "SELECT jobbuf_stage('work', '{\"db\": \"app1\", \"after_restart\": true}')" >/dev/null
jb_sql "SELECT jobbuf_stage('work', '{\"after_restart\": true}')" >/dev/null
check "both deliver after the restart" \
  jb_wait_until "[ \"\$(redis-cli -p $moved -n 2 LLEN jobbuf:work) \$(jb_redis LLEN jobbuf:work)\" = '2 2' ]" 15

# Another database's last_error (it can name a Redis host or a TLS file) and delivery counters
# (another tenant's traffic) are shown only to superusers and pg_monitor; a granted role sees its
# own database's.
jb_psql_db postgres -q -o /dev/null -c "ALTER DATABASE app1 SET jobbuf.redis_url = 'redis://127.0.0.1:1/0'" \
  -c "SELECT pg_reload_conf()"
check "app1's worker reports its unreachable Redis" jb_wait_until '[ -n "$(status_of app1 last_error)" ]' 15
jb_sql "CREATE ROLE peeker LOGIN; GRANT jobbuf_producer TO peeker" >/dev/null
peek() {  # peek DB: app1's last_error and delivery counters as peeker sees them from DB
  psql -X -qtA -h "$JB_PGHOST" -p "$JB_PGPORT" -U peeker -d "$1" \
    -c "SELECT coalesce(last_error, 'hidden') || ' / ' || coalesce((wakeups + batches + delivered)::text, 'hidden')
        FROM jobbuf_worker_status() WHERE database = 'app1'"
}
expect_eq "a role granted jobbuf does not see app1's error nor its delivery counters from $JB_DB" \
  "$(peek "$JB_DB")" "hidden / hidden"
expect_match "it sees them from app1 itself" "$(peek app1)" '127\.0\.0\.1:1.* / [0-9]+$'
jb_sql "GRANT pg_monitor TO peeker" >/dev/null
expect_match "a member of pg_monitor sees them from $JB_DB" "$(peek "$JB_DB")" '127\.0\.0\.1:1.* / [0-9]+$'
e2e_done

#!/usr/bin/env bash
# One drain worker per database: killing one database's worker, while both databases stage jobs
# one commit at a time, loses nothing in either.
#   A. SIGTERM (pg_terminate_backend) of db_a's worker: the launcher restarts it; db_b's worker keeps
#      its process and keeps delivering; every committed job of both arrives once.
#   B. kill -9 of db_a's worker: a process with shared memory access that dies that way makes the
#      postmaster restart every backend (crash recovery): db_b's worker and both stagers' sessions
#      are ended too. Every worker comes back by itself, and every job committed before the crash
#      arrives once.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.database = '*'"
sql() { jb_psql_db "$1" -qtAX -c "$2"; }
pid_of() { jb_sql "SELECT pid FROM jobbuf_worker_status() WHERE database = '$1' AND running" 2>/dev/null; }
for db in db_a db_b; do
  jb_psql_db postgres -q -c "CREATE DATABASE $db"
  jb_psql_db "$db" -q -o /dev/null <<SQL
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('q_$db', 'list');
CREATE TABLE stager_control (stop boolean NOT NULL DEFAULT false, staged integer NOT NULL DEFAULT 0);
INSERT INTO stager_control DEFAULT VALUES;
-- One job per commit, numbered on from the last committed one, until told to stop.
CREATE PROCEDURE stage_until_stopped() LANGUAGE plpgsql AS \$\$
DECLARE n integer;
BEGIN
    UPDATE stager_control SET stop = false;
    COMMIT;
    LOOP
        UPDATE stager_control SET staged = staged + 1 RETURNING staged INTO n;
        PERFORM jobbuf_stage('q_$db', jsonb_build_object('n', n));
        COMMIT;
        EXIT WHEN (SELECT stop FROM stager_control);
        PERFORM pg_sleep(0.005);
    END LOOP;
END \$\$;
SQL
done
check "a worker for each database" jb_wait_until '[ -n "$(pid_of db_a)" ] && [ -n "$(pid_of db_b)" ]' 15

start_stagers() {
  for db in db_a db_b; do
    jb_psql_db "$db" -q -c "CALL stage_until_stopped()" >/dev/null 2>&1 &
    track_pid $!
  done
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:q_db_a)" -gt '"$1"' ] && [ "$(jb_redis LLEN jobbuf:q_db_b)" -gt '"$1"' ]' 15
}
stop_stagers() {
  for db in db_a db_b; do sql "$db" "UPDATE stager_control SET stop = true" >/dev/null; done
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'CALL stage_until_stopped%'"' AND state = '"'active'"'")" = 0 ]' 15
}
expect_all_once() {
  for db in db_a db_b; do
    local staged; staged=$(sql "$db" "SELECT staged FROM stager_control")
    if jb_wait_until "[ \"\$(jb_redis LLEN jobbuf:q_$db)\" = $staged ]" 20; then
      pass "$1: $db: all $staged committed jobs arrive"
    else
      fail "$1: $db: $(jb_redis LLEN jobbuf:q_$db) of $staged committed jobs in Redis"
    fi
    expect_eq "$1: $db: each once, none left staged" \
      "$(jb_redis LRANGE jobbuf:q_$db 0 -1 | sort -u | wc -l) $(sql "$db" "SELECT count(*) FROM jobbuf.jobs")" "$staged 0"
  done
}

# A. SIGTERM of one worker.
check "A: both stagers deliver" start_stagers 20
a=$(pid_of db_a); b=$(pid_of db_b)
delivered_b=$(jb_redis LLEN jobbuf:q_db_b)
jb_sql "SELECT pg_terminate_backend($a)" >/dev/null
check "A: db_a's worker comes back" jb_wait_until '[ -n "$(pid_of db_a)" ] && [ "$(pid_of db_a)" != '"$a"' ]' 15
check "A: db_b kept delivering meanwhile" jb_wait_until '[ "$(jb_redis LLEN jobbuf:q_db_b)" -gt '"$((delivered_b + 20))"' ]' 15
expect_eq "A: db_b's worker kept its process" "$(pid_of db_b)" "$b"
stop_stagers
expect_all_once A

# B. kill -9 of one worker.
check "B: both stagers deliver" start_stagers "$(jb_redis LLEN jobbuf:q_db_b)"
mark=$(log_mark)
a=$(pid_of db_a); b=$(pid_of db_b)
kill -9 "$a"
check "B: every worker comes back" \
  jb_wait_until '[ -n "$(pid_of db_a)" ] && [ -n "$(pid_of db_b)" ] && [ "$(pid_of db_a)" != '"$a"' ]' 30
if log_since "$mark" | grep -q 'terminating any other active server processes'; then
  say "B: kill -9 of one worker made the postmaster restart every backend (crash recovery): db_b's worker $b is now $(pid_of db_b)"
  check "B: the stagers' sessions ended with the crash" jb_wait_until \
    '[ "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'CALL stage_until_stopped%'"'")" = 0 ]' 15
else
  expect_eq "B: db_b's worker kept its process" "$(pid_of db_b)" "$b"
  stop_stagers
fi
expect_all_once B
# and both deliver new jobs afterwards
check "B: both stage and deliver again" start_stagers "$(jb_redis LLEN jobbuf:q_db_b)"
stop_stagers
expect_all_once "B, afterwards"
faults_done

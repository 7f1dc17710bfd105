#!/usr/bin/env bash
# A drain worker ended by pg_terminate_backend is restarted at once; only real failures back off.
# A benchmark's or a pooler's cleanup terminates every backend of a database, the drain worker
# among them, over and over. Here: one job per commit is staged all along while the database's
# drain worker is terminated twice a second for 30 s (each time a fresh worker, the one started
# after the previous terminate, so that every terminate ends one worker).
#   - the launcher logs each exit as a terminate restarted at once, and none as a failure backed
#     off (before 1.3 each one doubled the delay: 1, 2, 4, 8, 16 s, and nothing was delivered
#     meanwhile);
#   - every committed job is in Redis exactly once afterwards;
#   - the server's fast shutdown (SIGTERM to every process) restarts nothing.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "log_min_messages = log"
STORM_SECONDS=30
TERMINATED_LINE="jobbuf: the drain worker for database \"$JB_DB\" was terminated; restarted at once"
BACKOFF_LINE="jobbuf: the drain worker for database \"$JB_DB\" stopped without being asked to"

# The drain worker of the test database, once it has joined its slot (application_name is set
# after it connected and found the extension).
drain_pid() {
  jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'
            AND application_name = 'jobbuf drain worker' AND datname = current_database()" 2>/dev/null | head -n 1
}

jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('storm', 'list');
CREATE TABLE stager_control (stop boolean NOT NULL DEFAULT false, staged integer NOT NULL DEFAULT 0);
INSERT INTO stager_control DEFAULT VALUES;
-- One job per commit, numbered on from the last committed one, until told to stop.
CREATE PROCEDURE stage_until_stopped() LANGUAGE plpgsql AS $$
DECLARE n integer;
BEGIN
    LOOP
        UPDATE stager_control SET staged = staged + 1 RETURNING staged INTO n;
        PERFORM jobbuf_stage('storm', jsonb_build_object('n', n));
        COMMIT;
        EXIT WHEN (SELECT stop FROM stager_control);
        PERFORM pg_sleep(0.005);
    END LOOP;
END $$;
SQL

jb_psql -q -c "CALL stage_until_stopped()" >/dev/null 2>&1 &
track_pid $!
check "the stager's jobs are delivered before the storm" \
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:storm)" -gt 20 ]' 15
check "the drain worker shows in pg_stat_activity" jb_wait_until '[ -n "$(drain_pid)" ]' 15

# The storm: every half second, the current worker (a fresh one: not the one terminated last) is
# terminated. Waiting for the fresh worker is bounded generously; the launcher's log decides.
mark=$(log_mark)
delivered_before=$(jb_redis LLEN jobbuf:storm)
terminated=0
last=""
tick=$(now_ms)
storm_end=$((tick + STORM_SECONDS * 1000))
while [ "$(now_ms)" -lt "$storm_end" ]; do
  if ! jb_wait_until '[ -n "$(drain_pid)" ] && [ "$(drain_pid)" != "$last" ]' 60; then
    fail "no drain worker came back within 60 s of terminating $last"
    break
  fi
  pid=$(drain_pid)
  if [ "$(jb_sql "SELECT pg_terminate_backend($pid)" 2>/dev/null)" = t ]; then
    terminated=$((terminated + 1))
    last=$pid
  fi
  tick=$((tick + 500))
  wait_ms=$((tick - $(now_ms)))
  [ "$wait_ms" -gt 0 ] && sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
done
say "terminated the drain worker $terminated times in $STORM_SECONDS s"
check "the storm terminated a worker at least 10 times" [ "$terminated" -ge 10 ]
check "a drain worker runs after the storm" \
  jb_wait_until '[ -n "$(drain_pid)" ] && [ "$(drain_pid)" != "$last" ]' 15
# Each terminate ended one worker (the FATAL of its SIGTERM) and was reported by the launcher.
check "each terminate ended its worker" jb_wait_until \
  '[ "$(count_lines "terminating background worker \"jobbuf drain worker[^\"]*\" due to administrator command" "$(log_since "$mark")")" -ge "$terminated" ]' 15
jb_wait_until '[ "$(count_lines "$TERMINATED_LINE" "$(log_since "$mark")")" -ge "$terminated" ]' 15
log=$(log_since "$mark")
expect_eq "every exit logged as a terminate restarted at once" "$(count_lines "$TERMINATED_LINE" "$log")" "$terminated"
expect_eq "no exit logged as a failure with backoff" "$(count_lines "$BACKOFF_LINE" "$log")" 0
expect_eq "no crash" "$(count_lines 'terminated by signal|PANIC|exited with exit code [^01]' "$log")" 0
delivered_after=$(jb_redis LLEN jobbuf:storm)
say "delivered during the storm: $((delivered_after - delivered_before)) jobs"
check "jobs were delivered during the storm" [ "$delivered_after" -gt "$delivered_before" ]

# After the storm: every committed job in Redis once.
jb_sql "UPDATE stager_control SET stop = true" >/dev/null
check "the stager stopped" jb_wait_until \
  '[ "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'CALL stage_until_stopped%'"' AND state = '"'active'"'")" = 0 ]' 15
staged=$(jb_sql "SELECT staged FROM stager_control")
if jb_wait_until "[ \"\$(jb_redis LLEN jobbuf:storm)\" = $staged ]" 30; then
  pass "all $staged committed jobs arrive"
else
  fail "$(jb_redis LLEN jobbuf:storm) of $staged committed jobs in Redis"
fi
expect_eq "each job once (distinct ids), none left staged" \
  "$(jb_redis LRANGE jobbuf:storm 0 -1 | ruby -rjson -e 'puts STDIN.each_line.map { |l| JSON.parse(l)["n"] }.uniq.size') $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" \
  "$staged 0"

# The server's own shutdown sends SIGTERM too: the launcher leaves with its worker, restarting
# nothing and logging no terminate.
mark=$(log_mark)
check "fast shutdown" jb_pg_ctl stop -m fast
expect_eq "shutdown: no restart and no backoff logged, no worker started" \
  "$(count_lines "$TERMINATED_LINE|$BACKOFF_LINE|drain worker started" "$(log_since "$mark")")" 0
faults_done

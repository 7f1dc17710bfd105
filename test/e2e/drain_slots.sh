#!/usr/bin/env bash
# Drain slots (jobbuf.max_workers = 2, jobbuf.database = '*') are not lost to what a database's
# owner does, and a database owner can force-drop a database its drain worker is connected to.
#   A. A CREATEDB role closes its database to connections (ALTER DATABASE ... ALLOW_CONNECTIONS
#      false) while its drain worker starts: that worker fails, and its slot serves the next
#      database (before: the slot stayed taken and a new database got no worker).
#   B. A worker waiting in InitPostgres behind a lock on its database (an open ALTER DATABASE ...
#      RENAME) is stopped after the start-up timeout (10 s) with one WARNING, and its slot serves
#      the next database while the lock is still held (before: it waited forever in its slot).
#   C. A database owner (not a superuser) runs DROP DATABASE ... WITH (FORCE) on a database whose
#      drain worker is connected: it succeeds each time (before: it failed in most tries, as
#      FORCE may not terminate the worker, a superuser's process).
# Preconditions by construction: the start is held back by a transaction holding the database's
# lock (renaming it), taken while no worker is connected, and the worker is seen waiting for it.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.database = '*'
jobbuf.max_workers = 2
jobbuf.poll_interval = '200ms'"
mark=$(log_mark)
jb_psql -q -o /dev/null -c "CREATE ROLE hostile LOGIN CREATEDB" -c "CREATE ROLE owner LOGIN CREATEDB"

worker_in() { jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker' AND datname = '$1'"; }
waiting_starts() {
  jb_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'object' AND classid = 'pg_database'::regclass AND NOT granted"
}
# new_database NAME [OWNER]: a database with jobbuf and a queue named in_NAME, its worker running.
new_database() {
  jb_psql_db postgres -q -c "CREATE DATABASE $1 OWNER ${2:-postgres}" || return 1
  jb_psql_db "$1" -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('in_$1', 'list')" || return 1
}
# delivers NAME WHAT: a job staged in database NAME reaches Redis.
delivers() {
  jb_psql_db "$1" -q -o /dev/null -c "SELECT jobbuf_stage('in_$1', '{\"n\": 1}')"
  expect_list_reaches "jobbuf:in_$1" 1 30 "$2"
}
# hold_start DATABASE NEWNAME ROLE: stops the database's worker and, before the launcher starts it
# again, opens a transaction (tx_open) that renames the database as ROLE, which holds the lock every
# new connection to it waits for. The launcher is stopped (SIGSTOP) meanwhile: a terminated worker
# is restarted at once, so only a stopped launcher leaves the database without one by construction.
# Then waits until the next worker waits for that lock.
launcher_pid() {
  local pid
  pid=$(jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf launcher'")
  [ -n "$pid" ] || pid=$(ps -o pid=,args= --ppid "$(head -n 1 "$JB_PGDATA/postmaster.pid")" | awk '/jobbuf launcher/ {print $1; exit}')
  echo "$pid"
}
hold_start() {
  local try pid launcher
  for try in 1 2 3 4 5; do
    launcher=$(launcher_pid)
    [ -n "$launcher" ] && kill -STOP "$launcher"
    pid=$(worker_in "$1")
    [ -n "$pid" ] && jb_sql "SELECT pg_terminate_backend($pid)" >/dev/null
    jb_wait_until "[ -z \"\$(jb_sql \"SELECT pid FROM pg_stat_activity WHERE datname = '$1'\")\" ]" 10
    tx_open
    local renamed=1
    tx_run "BEGIN; SET ROLE $3; ALTER DATABASE $1 RENAME TO $2;" 2>/dev/null || renamed=0
    [ -n "$launcher" ] && kill -CONT "$launcher"
    if [ $renamed = 1 ]; then
      jb_wait_until '[ "$(waiting_starts)" -ge 1 ]' 20 || { fail "no worker waits for the lock on $1"; return 1; }
      return 0
    fi
    tx_close ROLLBACK >/dev/null 2>&1
  done
  fail "the lock on $1 could not be taken while no worker was connected"
  return 1
}

# --- C. DROP DATABASE ... WITH (FORCE) by the database's owner
dropped=0
for i in 1 2 3 4; do
  new_database "forced$i" owner
  jb_wait_until "[ -n \"\$(worker_in forced$i)\" ]" 30 || { fail "no drain worker in forced$i"; continue; }
  if psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U owner -d postgres -qtA -c "DROP DATABASE forced$i WITH (FORCE)" \
      >"$JB_RUN/forced$i.out" 2>&1; then
    dropped=$((dropped + 1))
  else
    say "try $i: $(tr '\n' ' ' <"$JB_RUN/forced$i.out")"
    jb_psql_db postgres -q -c "DROP DATABASE forced$i WITH (FORCE)" >/dev/null 2>&1
  fi
done
expect_eq "C: the owner's DROP DATABASE ... WITH (FORCE) against a connected drain worker" "$dropped of 4" "4 of 4"


# --- A. a slot lost to ALLOW_CONNECTIONS false
new_database h1 hostile
jb_wait_until '[ -n "$(worker_in h1)" ]' 30 || fail "no drain worker in h1"
hold_start h1 h1_closed hostile
tx_run "ALTER DATABASE h1_closed ALLOW_CONNECTIONS false;" || fail "h1 was not closed"
tx_close || fail "the hostile transaction did not commit"
new_database h2
delivers h2 "A: a database created after the closed one gets the freed slot and delivers"
jb_psql_db postgres -q -c "DROP DATABASE h1_closed" || fail "h1_closed could not be dropped"

# --- B. a worker held in InitPostgres
hold_start h2 h2_locked postgres
new_database h3
delivers h3 "B: while h2's worker waits for the lock, h3 gets its slot (start-up timeout) and delivers"
expect_eq "B: the stuck worker was stopped (nothing waits for the lock, still held)" "$(waiting_starts)" 0
expect_eq "B: one WARNING about the start" \
  "$(count_lines 'WARNING: .*did not connect within 10 s' "$(log_since "$mark")")" 1
tx_close ROLLBACK
jb_psql_db postgres -q -c "DROP DATABASE h3" -c "DROP DATABASE h2" || fail "h2 and h3 could not be dropped"

jb_sql "SELECT jobbuf_create_queue('in_main', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('in_main', '{}')" >/dev/null
expect_list_reaches jobbuf:in_main 1 30 "the first database still delivers"
e2e_done

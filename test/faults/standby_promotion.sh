#!/usr/bin/env bash
# The worker runs only on a primary: a streaming replica with the same shared_preload_libraries,
# jobbuf.database and Redis does nothing while in recovery (no drain worker process, Redis
# untouched, the replicated jobs stay visible there), and starts draining when it is promoted —
# exactly the jobs staged on the old primary, once each. A schedule ticking every second on the
# primary, replicated synchronously, goes on ticking on the promoted replica: every tick staged
# once, none lost across the failover (catch_up all).
#
#   primary: worker on, delivers job 0; replica: pg_basebackup -R, started on another port;
#   primary: jobbuf.enabled = off (ALTER SYSTEM + reload), stages jobs 1..500;
#   replica: replays them; its worker does nothing;
#   primary: pg_ctl stop -m fast; replica: pg_ctl promote -> jobs 1..500 in Redis, once each.
source "$(dirname "$0")/tools/lib.sh"

JOBS=${JB_FAULTS_STANDBY_JOBS:-500}
faults_start "" "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('promo', 'list')" >/dev/null
KEY=jobbuf:promo
jb_sql "SELECT jobbuf_create_queue('ticks', 'list'), jobbuf_pause('ticks'),
               jobbuf_schedule('every_second', '1 seconds', 'ticks', '{}', '{\"catch_up\": \"all\"}')" >/dev/null
jb_sql "SELECT jobbuf_stage('promo', '{\"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10
expect_eq "the primary's worker delivers (job 0)" "$(jb_redis LLEN "$KEY")" 1
wait_staged 0 "WHERE queue = 'promo'" || fail "the primary's worker did not commit job 0"   # before the base backup copies it

check "pg_hba.conf allows replication from 127.0.0.1" grep -qE '^host +replication +all +127.0.0.1/32' "$JB_PGDATA/pg_hba.conf"

# --- the replica
REPLICA=$JB_RUN/replica
replica_ctl() {
  jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$REPLICA" -l "$JB_RUN/replica.log" -w -t 60 "$@" >/dev/null
}
replica_sql() {
  psql -X -qtAX -v ON_ERROR_STOP=1 -h "$JB_RUN" -p "$REPLICA_PORT" -U postgres -d "$JB_DB" -c "$1"
}
replica_postmaster() { head -n 1 "$REPLICA/postmaster.pid" 2>/dev/null; }
replica_workers() {
  local pm
  pm=$(replica_postmaster)
  [ -n "$pm" ] || return 0
  ps -o args= --ppid "$pm" | grep -cE 'jobbuf (drain worker|launcher)' || true
}
on_exit "[ -f '$REPLICA/postmaster.pid' ] && jb_as_postgres '$JB_PGBIN/pg_ctl' -D '$REPLICA' -m immediate stop"

if ! jb_as_postgres "$JB_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$JB_PGPORT" -U postgres -D "$REPLICA" -R -X stream -c fast \
    >"$JB_RUN/basebackup.log" 2>&1; then
  fail "pg_basebackup -R from the primary"; cat "$JB_RUN/basebackup.log"; faults_done
fi
if ! jb_on_free_port REPLICA_PORT jb_pg_start "$REPLICA" "$JB_RUN/replica.log"; then
  fail "the replica starts"; tail -n 20 "$JB_RUN/replica.log"; faults_done
fi
expect_eq "the replica is in recovery" "$(replica_sql "SELECT pg_is_in_recovery()")" t
expect_eq "the replica streams from the primary" \
  "$(jb_sql "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" 1
jb_psql -q -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
if jb_wait_until '[ "$(jb_sql "SELECT sync_state FROM pg_stat_replication")" = sync ]' 15; then
  pass "the replica is a synchronous standby"
else
  fail "the replica did not become synchronous ($(jb_sql "SELECT sync_state FROM pg_stat_replication"))"
fi
expect_eq "the replica preloads jobbuf, same database" \
  "$(replica_sql "SHOW shared_preload_libraries") $(replica_sql "SHOW jobbuf.database")" "jobbuf $JB_DB"

# --- the primary stops delivering; jobs are staged and replicated
set_and_reload jobbuf.enabled off || fail "the primary did not reload jobbuf.enabled = off"
jb_sql "SELECT count(jobbuf_stage('promo', jsonb_build_object('n', g))) FROM generate_series(1, $JOBS) g" >/dev/null
primary_lsn=$(jb_sql "SELECT pg_current_wal_lsn()")
if jb_wait_until "[ \"\$(replica_sql \"SELECT pg_last_wal_replay_lsn() >= '$primary_lsn'\")\" = t ]" 20; then
  pass "the replica replayed the staging transaction"
else
  fail "the replica did not replay up to $primary_lsn"
fi
sleep 2  # time for a worker that should not exist to do harm
expect_eq "jobs visible on the replica" "$(replica_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'promo'")" "$JOBS"
expect_eq "no jobbuf worker process under the replica's postmaster" "$(replica_workers)" 0
expect_eq "the replica reports no running worker" "$(replica_sql "SELECT count(*) FROM jobbuf_worker_status() WHERE running")" 0
expect_eq "Redis untouched while the primary is disabled and the replica in recovery" "$(jb_redis LLEN "$KEY")" 1
expect_eq "jobs still staged on the primary" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'promo'")" "$JOBS"

# --- failover
jb_pg_ctl stop -m fast
check "the primary stopped" [ ! -f "$JB_PGDATA/postmaster.pid" ]
t0=$(now_ms)
replica_ctl promote
expect_eq "the replica is promoted" "$(replica_sql "SELECT pg_is_in_recovery()")" f
if jb_wait_until "[ \"\$(jb_redis LLEN $KEY)\" -ge $(( JOBS + 1 )) ] && [ \"\$(replica_sql \"SELECT count(*) FROM jobbuf.jobs WHERE queue = 'promo'\")\" = 0 ]" 30; then
  pass "the promoted replica drained the staged jobs ($(( $(now_ms) - t0 )) ms after pg_ctl promote)"
else
  fail "after promotion: $(jb_redis LLEN "$KEY") elements in Redis, $(replica_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'promo'") jobs staged"
fi
jb_wait_until "[ \"\$(replica_sql 'SELECT delivered FROM jobbuf_worker_status()')\" -ge $JOBS ]" 15   # counted after the commit
sleep 1   # a window for a push twice that should not happen
arrived=$(jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"]')
expect_eq "Redis holds job 0 and jobs 1..$JOBS, once each, in order" "$arrived" "$(seq 0 "$JOBS")"
expect_eq "a drain worker runs under the promoted postmaster" \
  "$(ps -o args= --ppid "$(replica_postmaster)" | grep -c 'jobbuf drain worker')" 1
expect_eq "jobbuf_worker_status on the promoted server: running, delivered" \
  "$(replica_sql "SELECT running || ' ' || delivered FROM jobbuf_worker_status()")" "true $JOBS"
# The schedule: ticks staged by the primary (replicated synchronously) and by the promoted replica,
# each second once from the first to the last.
promoted_at=$(replica_sql "SELECT extract(epoch FROM now())::bigint")
jb_wait_until "[ \"\$(replica_sql \"SELECT count(*) FROM jobbuf.jobs WHERE queue = 'ticks' AND run_at > to_timestamp($promoted_at + 2)\")\" -ge 1 ]" 15 ||
  fail "the promoted replica does not stage the schedule's ticks"
ticks=$(replica_sql "SELECT extract(epoch FROM run_at)::bigint FROM jobbuf.jobs WHERE queue = 'ticks' ORDER BY run_at")
check "ticks from before the failover ($(head -1 <<<"$ticks") < $promoted_at)" [ "$(head -1 <<<"$ticks")" -lt "$promoted_at" ]
expect_eq "every second's tick once across the failover" "$ticks" "$(seq "$(head -1 <<<"$ticks")" "$(tail -1 <<<"$ticks")")"
expect_eq "no jobbuf WARNING on the replica" "$(grep -cE 'WARNING: +jobbuf:' "$JB_RUN/replica.log" || true)" 0

replica_ctl stop -m fast
check "the promoted replica stopped" [ ! -f "$REPLICA/postmaster.pid" ]
faults_done

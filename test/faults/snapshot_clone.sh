#!/usr/bin/env bash
# A snapshot clone that keeps host, port AND data directory (a VM or disk snapshot started beside
# its original, docs/copies.md). The original runs from a data directory path that is a symbolic
# link ($JB_RUN/pgdata -> original); a pg_basebackup of it (the snapshot) is started from the same
# path once the link points at the copy (PostgreSQL keeps the path as given, and works in the
# directory it found at its start), on the original's port (on 127.0.0.2, which the original does
# not listen on), on the same host. Only the postmaster's start tells the two apart in the lease.
#   1. both stage one job per transaction at once: the original delivers its jobs once each, the
#      clone nothing, and says so in one WARNING naming both (the same host, port and directory,
#      two starts) and the two ways out;
#   2. the original stops: its lease lapses, but the clone's delivery counter is behind the one
#      in Redis (the original delivered batches after the copy was taken): the clone still
#      delivers nothing, reconciles nothing, and stays at one WARNING;
#   (a take-over request carried from another start, as a base backup taken before its original's
#   worker acted on jobbuf_take_over() would carry it, is not honoured;)
#   3. jobbuf_take_over() on the clone: it takes the lease and delivers every job it staged,
#      including those whose ids the original's last marker names (the clone never acts on that
#      marker: lost 0).
# (1.3 before the start was part of the lease: both "refreshed" one lease and delivered; Redis got
# the clone's jobs too, no warning.)
source "$(dirname "$0")/tools/lib.sh"

JOBS=${JB_FAULTS_CLONE_JOBS:-120}
faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"
jb_sql "SELECT jobbuf_create_queue('twin', 'list')" >/dev/null
KEY=jobbuf:twin
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10 || fail "the original delivers job 0"
wait_staged 0 || fail "the original's worker did not commit job 0"

# --- the original, again, from a data directory path that is a symbolic link
PATH_AS_GIVEN=$JB_PGDATA
jb_pg_ctl stop -m fast
mv "$PATH_AS_GIVEN" "$JB_RUN/original"
ln -s "$JB_RUN/original" "$PATH_AS_GIVEN"
JB_PGDATA=$JB_RUN/original   # what the harness stops on exit
jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$PATH_AS_GIVEN" -l "$JB_RUN/postgres.log" -w -t 60 start >/dev/null ||
  { fail "the original starts from the linked path"; faults_done; }
wait_worker_running 20 || fail "the original's worker runs again"
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": -1}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 2 ]' 20 || fail "the original delivers job -1 (after its earlier start's lease lapsed)"
wait_staged 0 || fail "the original's worker did not commit job -1"

# --- the snapshot, started from the same path on the same port
SNAP=$JB_RUN/snapshot
SOCK=$JB_RUN/clone_socket
mkdir -p "$SOCK" && chown postgres "$SOCK"
jb_as_postgres "$JB_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$JB_PGPORT" -U postgres -D "$SNAP" -X stream -c fast \
  >"$JB_RUN/basebackup.log" 2>&1 || { fail "pg_basebackup of the running original"; cat "$JB_RUN/basebackup.log"; faults_done; }
cat >>"$SNAP/postgresql.conf" <<CONF
listen_addresses = '127.0.0.2'
unix_socket_directories = '$SOCK'
CONF
ln -sfn "$SNAP" "$PATH_AS_GIVEN"
on_exit "jb_as_postgres '$JB_PGBIN/pg_ctl' -D '$SNAP' -m immediate stop"
jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$PATH_AS_GIVEN" -l "$JB_RUN/clone.log" -w -t 60 start >/dev/null ||
  { fail "the clone starts"; tail -n 20 "$JB_RUN/clone.log"; faults_done; }
clone_sql() { psql -X -qtAX -v ON_ERROR_STOP=1 -h "$SOCK" -p "$JB_PGPORT" -U postgres -d "$JB_DB" -c "$1"; }
expect_eq "the clone is a primary with the original's identity, port and data directory" \
  "$(clone_sql "SELECT pg_is_in_recovery() || ' ' || jobbuf.installation_id() || ' ' || current_setting('port') || ' ' || current_setting('data_directory')")" \
  "false $(jb_sql "SELECT jobbuf.installation_id() || ' ' || current_setting('port') || ' ' || current_setting('data_directory')")"

held='WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity delivers its jobs to this Redis'
check "the clone's worker finds the lease held and says so" jb_wait_until "grep -q '$held' '$JB_RUN/clone.log'" 20
warning=$(grep -m 1 "$held" "$JB_RUN/clone.log")
holder=$(sed -n 's/.*this Redis (\(host [^)]*\)); this one.*/\1/p' <<<"$warning")
me=$(sed -n 's/.*; this one (\(host [^)]*\)) does not deliver.*/\1/p' <<<"$warning")
say "holder: $holder"
say "clone:  $me"
expect_eq "the two names differ only by their start" "${holder% start *}" "${me% start *}"
check "... and the starts differ" [ "${holder##* start }" != "${me##* start }" ]
expect_match "the WARNING names both ways out" "$warning" "jobbuf_reset_identity\(\).*jobbuf_take_over\(\)"

# --- 1. one job per transaction on each side, at once
stager() {  # PSQL-FUNCTION SIDE
  "$1" "DO \$\$ BEGIN FOR i IN 1..$JOBS LOOP
          PERFORM jobbuf_stage('twin', jsonb_build_object('side', '$2', 'n', i)); COMMIT;
          PERFORM pg_sleep(0.005);
        END LOOP; END \$\$" >/dev/null
}
stager jb_sql original & s1=$!
stager clone_sql clone & s2=$!
wait $s1 || fail "the original's stager"
wait $s2 || fail "the clone's stager"
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20 || fail "the original drains its jobs"
sleep 1
count_side() { jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'side = ARGV[0]; ns = STDIN.read.lines.map { |l| JSON.parse(l) }.select { |j| j["side"] == side }.map { |j| j["n"] }; puts "#{ns.size} #{ns.uniq.size}"' "$1"; }
expect_eq "the original's jobs arrive once each (lost 0, duplicated 0)" "$(count_side original)" "$(( JOBS + 2 )) $(( JOBS + 2 ))"
expect_eq "the clone delivered nothing" "$(count_side clone)" "0 0"
expect_eq "the clone keeps its jobs staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" "$JOBS"

# --- 2. the original stops; its lease lapses after 2 s of Redis being reachable
marker=$(jb_redis GET "jobbuf:marker:$(jb_sql "SELECT jobbuf.installation_id()")")
marker_ids=$(cut -d';' -f4 <<<"$marker")
say "the original's last marker: ${marker:0:80}..."
overlap=$(clone_sql "SELECT count(*) FROM jobbuf.jobs WHERE id = ANY ('{$marker_ids}'::bigint[])")
check "the clone has jobs of its own under ids the original's last marker names ($overlap)" [ "${overlap:-0}" -gt 0 ]
jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$JB_RUN/original" -w -t 60 stop -m fast >/dev/null
check "the clone decides that it does not continue the lapsed lease's holder" \
  jb_wait_until "grep -q 'delivery lease of another start lapsed; this start does not continue it' '$JB_RUN/clone.log'" 20
sleep 3
expect_eq "the clone still delivered nothing" "$(count_side clone)" "0 0"
expect_eq "the clone still holds every job it staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" "$JOBS"
expect_eq "the clone never reconciled the original's marker" "$(grep -c 'already in Redis' "$JB_RUN/clone.log")" 0
expect_eq "one WARNING on the clone for the whole time" "$(grep -c "$held" "$JB_RUN/clone.log")" 1

# --- a take-over request the clone carries from another start (a standby or base backup taken
#     after jobbuf_take_over() committed on its original, before that worker acted on it) is not
#     honoured: only the postmaster start that asked takes the lease by request
clone_sql "UPDATE jobbuf.delivery_counter SET take_over_requested = true, take_over_start = now() - interval '1 hour'" >/dev/null
clone_sql "UPDATE jobbuf.queues SET paused = paused WHERE false" >/dev/null   # the worker reloads
sleep 3
expect_eq "the clone does not act on another start's take-over request" \
  "$(grep -c 'took the delivery lease over' "$JB_RUN/clone.log")" 0
expect_eq "... and still delivered nothing" "$(count_side clone)" "0 0"

# --- 3. jobbuf_take_over() on the clone (superusers only)
clone_sql "CREATE ROLE not_super LOGIN; GRANT jobbuf_admin TO not_super" >/dev/null
expect_match "jobbuf_take_over() is refused to a non-superuser" \
  "$(psql -X -qtAX -h "$SOCK" -p "$JB_PGPORT" -U not_super -d "$JB_DB" -c "SELECT jobbuf_take_over()" 2>&1)" "permission denied"
clone_sql "SELECT jobbuf_take_over()" >/dev/null
check "the clone takes the lease over" jb_wait_until "grep -q 'took the delivery lease over from .* as jobbuf_take_over() asked' '$JB_RUN/clone.log'" 20
check "the clone delivers every job it staged" jb_wait_until '[ "$(count_side clone)" = "'$JOBS' '$JOBS'" ]' 20
expect_eq "... once each, the original's jobs untouched (lost 0, duplicated 0)" \
  "$(count_side original) / $(count_side clone)" "$(( JOBS + 2 )) $(( JOBS + 2 )) / $JOBS $JOBS"
expect_eq "the clone's table is empty" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_match "the lease names the clone's start" "$(jb_redis GET "jobbuf:lease:$(clone_sql "SELECT jobbuf.installation_id()")")" "${me##* start }"
expect_eq "the request is cleared" "$(clone_sql "SELECT take_over_requested FROM jobbuf.delivery_counter")" f

jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$SNAP" -w -t 60 stop -m fast >/dev/null
faults_done

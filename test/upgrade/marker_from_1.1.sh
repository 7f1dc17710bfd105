#!/usr/bin/env bash
# A batch left under a 1.1 marker: the 1.1 library (commit 5b86380) pushed a batch and wrote its
# marker (the key 1.1 names "jobbuf:marker:<system id>:<database oid>:<extension oid>"), then the
# Postgres transaction that deletes the batch was lost (a crash between EXEC and COMMIT). Built
# here by letting 1.1 deliver 5 jobs for real and putting their rows back as the rolled-back
# delete leaves them (same ids, triggers off, as a restore would). Then the 1.2 library is
# installed, Postgres restarted, ALTER EXTENSION jobbuf UPDATE: the 1.2 worker reads the 1.1
# marker, removes those 5 without pushing them again (lost 0, duplicated 0), deletes the old key,
# and delivers what is staged afterwards under its own marker.
source "$(dirname "$0")/../e2e/tools/lib.sh"
source "$(dirname "$0")/tools/releases.sh"

finish() { e2e_cleanup; install_current; }
install_release 1.1 || { install_current; e2e_done; }
e2e_start "jobbuf.poll_interval = '500ms'"
trap finish EXIT
expect_eq "1.1 is installed by the 1.1 build" "$(jb_sql "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" 1.1

jb_sql "SELECT jobbuf_create_queue('work', 'list')" >/dev/null
jb_psql -q -o /dev/null -c "SELECT jobbuf_stage('work', jsonb_build_object('n', n)) FROM generate_series(1, 5) n"
expect_list_reaches jobbuf:work 5 10 "1.1 delivers the batch"
wait_staged 0
legacy_key=jobbuf:marker:$(jb_sql "SELECT system_identifier FROM pg_control_system()"):$(jb_sql "SELECT oid FROM pg_database WHERE datname = current_database()"):$(jb_sql "SELECT oid FROM pg_extension WHERE extname = 'jobbuf'")
expect_eq "1.1's marker names the batch under its key" "$(jb_redis GET "$legacy_key")" "1,2,3,4,5"

# The delete that was lost: the rows come back with their ids, no trigger (no wake-up).
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled did not turn off"
jb_psql -q -o /dev/null <<'SQL'
SET session_replication_role = replica;
INSERT INTO jobbuf.jobs (id, queue, payload) SELECT n, 'work', jsonb_build_object('n', n) FROM generate_series(1, 5) n;
SQL

install_current
mark=$(log_mark)
jb_pg_ctl restart
jb_psql -q -c "ALTER EXTENSION jobbuf UPDATE"
reset_and_reload jobbuf.enabled on || fail "jobbuf.enabled did not turn on"
jb_sql "SELECT jobbuf_stage('work', '{\"after\": true}')" >/dev/null
expect_list_reaches jobbuf:work 6 10 "the job staged after the update is delivered"
wait_staged 0
expect_eq "each of the 1.1 batch's jobs is in Redis once (lost 0, duplicated 0)" \
  "$(jb_redis LRANGE jobbuf:work 0 -1 | sort | uniq -c | awk '{print $1}' | sort -u | tr '\n' ' ')" "1 "
check "the worker says it removed them without pushing again" \
  grep -q 'jobbuf: 5 job(s) were already in Redis when the last batch was interrupted' <<<"$(log_since "$mark")"
expect_eq "the 1.1 marker key is gone" "$(jb_redis EXISTS "$legacy_key")" 0
expect_eq "1.2 marks its batches under the installation's identity" \
  "$(jb_redis EXISTS "jobbuf:marker:$(jb_sql "SELECT jobbuf.installation_id()")")" 1
e2e_done

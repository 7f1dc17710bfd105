#!/usr/bin/env bash
# jobbuf.database as a list: each listed database gets a drain worker, even before CREATE
# EXTENSION (it waits for it, as the one worker of 1.0 did), created after the server started
# included; a database not in the list gets none, extension or not.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.database = '$JB_DB, \"Listed, Too\"'"
workers() { jb_sql "SELECT string_agg(database || '=' || running, ',' ORDER BY database) FROM jobbuf_worker_status()"; }
jb_psql_db postgres -q -c 'CREATE DATABASE "Listed, Too"' -c "CREATE DATABASE unlisted"
check "a listed database created after start gets a worker before CREATE EXTENSION" \
  jb_wait_until '[ "$(workers)" = "Listed, Too=true,$JB_DB=true" ]' 10
jb_psql_db unlisted -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('u', 'list')" \
  -c "SELECT jobbuf_stage('u', '{}')"
jb_psql_db "Listed, Too" -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('l', 'list')" \
  -c "SELECT jobbuf_stage('l', '{}')"
check "the listed one drains" jb_wait_until '[ "$(jb_redis LLEN jobbuf:l)" = 1 ]' 10
sleep 1   # a worker that should not exist would deliver here
expect_eq "the unlisted one gets no worker; its job stays staged" \
  "$(workers) $(jb_redis LLEN jobbuf:u) $(jb_psql_db unlisted -qtAX -c "SELECT count(*) FROM jobbuf.jobs")" "Listed, Too=true,$JB_DB=true 0 1"
e2e_done

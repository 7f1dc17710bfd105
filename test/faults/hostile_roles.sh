#!/usr/bin/env bash
# Hostile roles: the worker's database is owned by a non-superuser, and four roles try what they
# should not be able to do. Each attempt must fail, nobody gains a right, and delivery goes on.
#   owner     (owns the database, hence schema public) plants functions and an operator in public
#             that shadow what the worker and the extension call (quote_ident(name), text = text,
#             jsonb_build_object/array, to_jsonb, cardinality, a two-argument jobbuf_claim), each
#             writing a marker row and trying ALTER ROLE ... SUPERUSER; puts public before
#             pg_catalog and makes transactions read-only with ALTER DATABASE ... SET; tries to
#             create functions in schema jobbuf, replace, alter or drop jobbuf's objects, read the
#             Redis URL and the server's files; DROP DATABASE inside a transaction block or while
#             connected to it;
#   nobody    (a login role granted nothing) holds the advisory lock keys jobbuf 1.0 used for claims;
#             DROP DATABASE of the worker's database, ten times; reads or stages jobs;
#   producer  claims, deletes, locks rows of jobbuf's tables;
#   consumer  claims the jobs of queues the worker delivers, calls the internal claim, locks
#             jobbuf.claim_locks; claims thousands of partitions of its own queue (keys chosen to
#             cover every slot of a database-wide table of 4096 claim slots keyed by
#             hashtext(queue/partition), and every slot of its queue) and 5,000 made-up partitions
#             of another, and stays idle in that transaction: delivery of a partitioned group
#             delivery queue with max_in_flight goes on, and so do claims of other queues.
# After the plants, the worker is restarted (so it plans its statements again in the hostile
# database) and jobs of a list queue, a list queue and a Sidekiq queue with group delivery are
# delivered; the marker table stays empty and no hostile role is a superuser.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'"

# This script's own sessions put pg_catalog first and override the hostile database settings
# (a database owner may even ALTER DATABASE ... SET role, which would make every superuser session
# act as the owner), so that they never call a planted function themselves: a marker row must come
# from someone else.
export PGOPTIONS="-c search_path=pg_catalog,public -c role=none -c default_transaction_read_only=off -c statement_timeout=0 -c lock_timeout=0"

as_role() {  # as_role <role> <sql> [database]: output and errors
  psql -X -v ON_ERROR_STOP=1 -h "$JB_PGHOST" -p "$JB_PGPORT" -U "$1" -d "${3:-$JB_DB}" -qtAX -c "$2" 2>&1
}
role_value() {  # role_value <role> <sql>: the output only
  psql -X -v ON_ERROR_STOP=1 -h "$JB_PGHOST" -p "$JB_PGPORT" -U "$1" -d "$JB_DB" -qtAX -c "$2" 2>/dev/null
}

# refused <what> <role> <sql> [pattern] [database]: the statement fails with an error matching pattern.
refused() {
  local what=$1 role=$2 sql=$3 pattern=${4:-permission denied|must be owner|must be superuser}
  local out rc
  out=$(as_role "$role" "$sql" "${5:-$JB_DB}")
  rc=$?
  if [ $rc -ne 0 ] && grep -qiE -- "$pattern" <<<"$out"; then
    pass "$what: refused ($(grep -m1 -E 'ERROR' <<<"$out" | sed 's/^.*ERROR: *//' | cut -c1-90))"
  else
    fail "$what: expected an error matching '$pattern', got (rc $rc): $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
  fi
}

no_marker_and_no_superuser() {
  expect_eq "$1: no planted function ran (marker rows)" \
    "$(jb_sql "SELECT count(*) FROM public.hostile_marks")" 0
  expect_eq "$1: no hostile role is a superuser" \
    "$(jb_sql "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'hostile%' AND rolsuper")" 0
  local marks
  marks=$(jb_sql "SELECT string_agg(DISTINCT what || ' by ' || who || ' (' || backend || ')', '; ') FROM public.hostile_marks")
  [ -n "$marks" ] && say "marker rows: $marks"
  return 0
}

STAGED=0
# delivered <what>: a job staged now by the producer into the list queue reaches Redis.
delivered() {
  STAGED=$((STAGED + 1))
  local tag="hostile-$STAGED"
  as_role hostile_producer "SELECT public.jobbuf_stage('hl_list', '{\"tag\": \"$tag\"}'::jsonb)" >/dev/null
  if jb_wait_until "jb_redis LRANGE jobbuf:hl_list 0 -1 | grep -qF '\"$tag\"'" 20; then
    pass "$1: a job staged afterwards reaches Redis"
  else
    fail "$1: a job staged afterwards did not reach Redis in 20 s (worker: $(jb_sql "SELECT running, last_error FROM jobbuf_worker_status()"))"
  fi
}

# --- the roles, the queues, a database owned by a non-superuser
jb_psql -q -o /dev/null <<SQL
CREATE ROLE hostile_owner LOGIN;
CREATE ROLE hostile_nobody LOGIN;
CREATE ROLE hostile_producer LOGIN IN ROLE jobbuf_producer;
CREATE ROLE hostile_consumer LOGIN IN ROLE jobbuf_consumer;
ALTER DATABASE $JB_DB OWNER TO hostile_owner;
SELECT public.jobbuf_create_queue('hl_list', 'list');
SELECT public.jobbuf_create_queue('hl_group', 'list', '{"delivery": "group"}');
SELECT public.jobbuf_create_queue('hl_skgroup', 'sidekiq', '{"delivery": "group", "group_class": "HostileGroupJob"}');
SELECT public.jobbuf_create_queue('hl_flight', 'none', '{"max_in_flight": 2}');
SELECT public.jobbuf_create_queue('hl_parts', 'none');
SELECT public.jobbuf_create_queue('hl_pgroup', 'list', '{"delivery": "group", "max_in_flight": 10}');
SELECT public.jobbuf_create_queue('hl_spray', 'none');
SQL
expect_eq "schema public belongs to the database owner" \
  "$(jb_sql "SELECT pg_has_role('hostile_owner', nspowner, 'USAGE') FROM pg_namespace WHERE nspname = 'public'")" t
delivered "before any attack"

# --- 1. the database owner plants shadowing functions and an operator in public
as_role hostile_owner "$(cat <<'SQL'
CREATE TABLE public.hostile_marks (what text, who text, backend text);
GRANT INSERT ON public.hostile_marks TO PUBLIC;
CREATE FUNCTION public.hostile_mark(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hostile_marks
    SELECT what, current_user::text, a.backend_type FROM pg_catalog.pg_stat_activity a
    WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid();
    BEGIN
        EXECUTE 'ALTER ROLE hostile_owner SUPERUSER';
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
END $$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('quote_ident(name)'); RETURN pg_catalog.quote_ident($1::text); END $$;
CREATE FUNCTION public.cardinality(bigint[]) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('cardinality(bigint[])'); RETURN pg_catalog.cardinality($1); END $$;
CREATE FUNCTION public.to_jsonb(bigint[]) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('to_jsonb(bigint[])'); RETURN pg_catalog.to_jsonb($1); END $$;
CREATE FUNCTION public.jsonb_build_array(uuid) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('jsonb_build_array(uuid)'); RETURN pg_catalog.jsonb_build_array($1); END $$;
CREATE FUNCTION public.jsonb_build_object(text, uuid, text, jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('jsonb_build_object(text, uuid, text, jsonb)');
      RETURN pg_catalog.jsonb_build_object($1, $2, $3, $4); END $$;
CREATE FUNCTION public.jsonb_build_object(text, text, text, jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('jsonb_build_object(text, text, text, jsonb)');
      RETURN pg_catalog.jsonb_build_object($1, $2, $3, $4); END $$;
CREATE FUNCTION public.jsonb_build_object(text, timestamptz, text, text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('jsonb_build_object(text, timestamptz, text, text)');
      RETURN pg_catalog.jsonb_build_object($1, $2, $3, $4); END $$;
CREATE FUNCTION public.hostile_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('text = text'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.hostile_texteq);
CREATE FUNCTION public.jobbuf_claim(text, integer) RETURNS SETOF record LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hostile_mark('jobbuf_claim(text, integer)'); END $$;
SQL
)" >/dev/null && pass "the owner planted shadowing functions and an operator in public" \
  || fail "planting the shadowing functions failed"
refused "the owner creates a function in schema jobbuf" hostile_owner \
  "CREATE FUNCTION jobbuf.known_queue(text) RETURNS int LANGUAGE sql AS 'SELECT 1'"
refused "the owner creates an operator in schema jobbuf" hostile_owner \
  "CREATE OPERATOR jobbuf.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.hostile_texteq)"

# restart_worker <what>: the worker connects again (taking the database's settings) and plans its
# statements again, in the hostile database.
restart_worker() {
  local old_pid
  old_pid=$(worker_pid)
  jb_sql "SELECT pg_terminate_backend($old_pid)" >/dev/null
  if jb_wait_until '[ -n "$(worker_pid)" ] && [ "$(worker_pid)" != '"$old_pid"' ] && [ "$(jb_sql "SELECT running FROM jobbuf_worker_status()")" = t ]' 30; then
    pass "$1: a new drain worker connected (pid $(worker_pid))"
  else
    fail "$1: no new drain worker within 30 s"
  fi
}

# groups_delivered <what>: one more group of each group delivery queue reaches Redis.
GROUPS=0
groups_delivered() {
  GROUPS=$((GROUPS + 1))
  as_role hostile_producer "SELECT public.jobbuf_stage('hl_group', '{\"n\": 1}'::jsonb);
                            SELECT public.jobbuf_stage('hl_group', '{\"n\": 2}'::jsonb);
                            SELECT public.jobbuf_stage('hl_skgroup', '{\"class\": \"X\", \"args\": [1]}'::jsonb)" >/dev/null
  if jb_wait_until '[ "$(jb_redis LLEN jobbuf:hl_group)" -ge '"$GROUPS"' ] && [ "$(jb_redis LLEN queue:hl_skgroup)" -ge '"$GROUPS"' ]' 20; then
    pass "$1: the groups of a list and of a Sidekiq queue reach Redis"
  else
    fail "$1: list $(jb_redis LLEN jobbuf:hl_group), sidekiq $(jb_redis LLEN queue:hl_skgroup) group messages after 20 s, $GROUPS expected"
  fi
  expect_match "$1: the list group message names its jobs" "$(jb_redis LINDEX jobbuf:hl_group 0)" '"ids": \[[0-9]+, [0-9]+\]'
  expect_match "$1: the Sidekiq group job names its class" "$(jb_redis LINDEX queue:hl_skgroup 0)" '"class": ?"HostileGroupJob"'
}

# 1a. public before pg_catalog: the planted functions and operator would now win everywhere.
out=$(as_role hostile_owner "ALTER DATABASE $JB_DB SET search_path = public, pg_catalog" "postgres")
check "the owner put public before pg_catalog for the database ${out}" [ -z "$out" ]
restart_worker "shadowing functions and operator, public first"
delivered "shadowing functions and operator, public first"
groups_delivered "shadowing functions and operator, public first"
no_marker_and_no_superuser "after the worker ran among the shadowing functions"

# 1b. settings that would make the worker act as the owner, or fail every batch.
out=$(as_role hostile_owner "ALTER DATABASE $JB_DB SET role = hostile_owner;
                             ALTER DATABASE $JB_DB SET default_transaction_read_only = on;
                             ALTER DATABASE $JB_DB SET statement_timeout = '1ms';
                             ALTER DATABASE $JB_DB SET lock_timeout = '1ms'" "postgres")
check "the owner set role (every session of the database acts as the owner), read-only transactions and 1 ms timeouts ${out}" [ -z "$out" ]
restart_worker "hostile database settings"
delivered "hostile database settings"
groups_delivered "hostile database settings"
no_marker_and_no_superuser "after the worker ran with the hostile settings"

# --- 2. jobbuf's objects, settings and files
refused "the owner drops a jobbuf function" hostile_owner "DROP FUNCTION public.jobbuf_stats()" \
  "cannot drop|must be owner"
refused "the owner replaces a jobbuf function" hostile_owner \
  "CREATE OR REPLACE FUNCTION public.jobbuf_purge_dead(queue text, older_than interval DEFAULT NULL) RETURNS integer LANGUAGE sql AS 'SELECT 0'"
refused "the owner makes a jobbuf function run as invoker" hostile_owner \
  "ALTER FUNCTION public.jobbuf_stats() SECURITY INVOKER"
refused "the owner drops the extension" hostile_owner "DROP EXTENSION jobbuf"
refused "the owner updates the extension" hostile_owner "ALTER EXTENSION jobbuf UPDATE"
refused "the owner drops schema jobbuf" hostile_owner "DROP SCHEMA jobbuf CASCADE"
refused "the owner empties jobbuf.jobs" hostile_owner "TRUNCATE jobbuf.jobs"
refused "the owner disables jobbuf.jobs's trigger" hostile_owner "ALTER TABLE jobbuf.jobs DISABLE TRIGGER ALL"
refused "the owner reads jobbuf.redis_url" hostile_owner "SHOW jobbuf.redis_url"
refused "the owner reads jobbuf.redis_url with current_setting" hostile_owner "SELECT current_setting('jobbuf.redis_url')"
refused "the owner reads jobbuf.redis_password_file" hostile_owner "SHOW jobbuf.redis_password_file"
refused "the owner reads the server's configuration file" hostile_owner "SELECT pg_read_file('postgresql.auto.conf')"
expect_eq "pg_settings hides jobbuf.redis_url from the owner" \
  "$(role_value hostile_owner "SELECT count(*) FROM pg_settings WHERE name = 'jobbuf.redis_url'")" 0
refused "nobody reads staged jobs" hostile_nobody "SELECT count(*) FROM jobbuf.jobs"
refused "nobody stages" hostile_nobody "SELECT public.jobbuf_stage('hl_list', '{}'::jsonb)"
refused "the producer deletes jobs" hostile_producer "DELETE FROM jobbuf.jobs"
refused "the producer claims" hostile_producer "SELECT * FROM public.jobbuf_claim('hl_parts', 10, NULL::text)"
refused "the producer locks the queue rows" hostile_producer "SELECT name FROM jobbuf.queues FOR UPDATE"
refused "the producer locks jobbuf.claim_locks" hostile_producer "SELECT slot FROM jobbuf.claim_locks FOR UPDATE"
refused "the consumer locks jobbuf.claim_locks" hostile_consumer "SELECT slot FROM jobbuf.claim_locks FOR UPDATE"
refused "the consumer calls the internal claim" hostile_consumer \
  "SELECT * FROM jobbuf.claim(jobbuf.known_queue('hl_list'), 10, NULL)"
refused "the consumer claims the jobs of a list queue" hostile_consumer \
  "SELECT * FROM public.jobbuf_claim('hl_list', 10, NULL::text)" 'delivered to Redis by the worker'
refused "the consumer claims the jobs of a group delivery queue" hostile_consumer \
  "SELECT * FROM public.jobbuf_claim('hl_group', 10, NULL::text)" 'delivered to Redis by the worker'
refused "the consumer deletes jobs directly" hostile_consumer \
  "DELETE FROM jobbuf.jobs WHERE queue = 'hl_list'"
delivered "after the refused changes"

# --- 3. advisory locks: nobody holds every key jobbuf 1.0's claims used; claims go on
jb_psql -q -o /dev/null <<'SQL'
SELECT count(public.jobbuf_stage('hl_flight', pg_catalog.jsonb_build_object('n', g))) FROM pg_catalog.generate_series(1, 3) g;
SELECT count(public.jobbuf_stage('hl_parts', pg_catalog.jsonb_build_object('n', g), partition_key => p))
FROM (VALUES (1, 'A'), (2, 'B'), (3, 'A')) v (g, p);
SQL
psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U hostile_nobody -d "$JB_DB" -qtAX -c \
  "SELECT pg_advisory_lock(1785684584, hashtext('hl_flight')), pg_advisory_lock(1785684583, hashtext('hl_parts/A')),
          pg_advisory_lock(1785684583, hashtext('hl_parts/B'))" -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
track_pid $!
if jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = '"'advisory'"' AND l.granted AND a.usename = '"'hostile_nobody'"'")" = 3 ]' 10; then
  pass "nobody holds the three advisory keys of jobbuf 1.0's claims"
else
  fail "nobody could not take the advisory keys"
fi
expect_eq "max_in_flight queue: the consumer claims while nobody holds its advisory key" \
  "$(role_value hostile_consumer "SELECT count(*) FROM public.jobbuf_claim('hl_flight', 10, NULL::text)")" 3
expect_eq "partition A: the consumer claims while nobody holds its advisory key" \
  "$(role_value hostile_consumer "SELECT string_agg(payload->>'n', ',' ORDER BY id) FROM public.jobbuf_claim('hl_parts', 10, 'A')")" "1,3"
expect_eq "any partition: the consumer gets partition B" \
  "$(role_value hostile_consumer "SELECT string_agg(partition || ':' || (payload->>'n'), ',') FROM public.jobbuf_claim('hl_parts', 10, NULL::text)")" "B:2"

# --- 3b. the consumer holds claim slots through claims of its own queue, idle in its transaction
SPRAY_KEYS="SELECT DISTINCT ON (pg_catalog.hashtext('hl_spray/' || c.k) & 4095) c.k FROM (SELECT 'k' || g AS k FROM pg_catalog.generate_series(1, 100000) g) c
            UNION SELECT DISTINCT ON (pg_catalog.hashtext(c.k) & 255) c.k FROM (SELECT 'k' || g AS k FROM pg_catalog.generate_series(1, 100000) g) c"
expect_eq "the spray keys cover every slot of 4096 (by queue/partition) and every slot of the queue" \
  "$(jb_sql "SELECT count(DISTINCT pg_catalog.hashtext('hl_spray/' || s.k) & 4095) || ' ' || count(DISTINCT pg_catalog.hashtext(s.k) & 255) FROM ($SPRAY_KEYS) s")" "4096 256"
jb_sql "SELECT count(public.jobbuf_stage('hl_spray', '{}'::jsonb, partition_key => s.k)) FROM ($SPRAY_KEYS) s" >/dev/null
psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U hostile_consumer -d "$JB_DB" -qtAX >"$JB_RUN/spray.out" 2>"$JB_RUN/spray.err" <<SQL &
BEGIN;
SELECT count(*) AS own_partitions_claimed FROM ($SPRAY_KEYS) s, LATERAL public.jobbuf_claim('hl_spray', 1, s.k) c;
SELECT count(*) AS made_up_partitions_claimed FROM pg_catalog.generate_series(1, 5000) g, LATERAL public.jobbuf_claim('hl_parts', 1, 'made-up-' || g) c;
SELECT pg_catalog.pg_sleep(300);
SQL
track_pid $!
if jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE usename = '"'hostile_consumer'"' AND query LIKE '"'SELECT pg_catalog.pg_sleep(300)%'"'")" = 1 ]' 120; then
  pass "the consumer claimed every sprayed partition and stays in its transaction ($(tr '\n' ' ' <"$JB_RUN/spray.out"))"
else
  fail "the consumer's spray did not finish in 120 s: $(cat "$JB_RUN/spray.out" "$JB_RUN/spray.err" | tr '\n' ' ' | cut -c1-300)"
fi
expect_eq "the consumer claimed a group in each sprayed partition and none in made-up ones" \
  "$(tr '\n' ' ' <"$JB_RUN/spray.out")" "$(jb_sql "SELECT count(*) FROM ($SPRAY_KEYS) s") 0 "
expect_eq "the consumer holds every partition slot of its own queue" \
  "$(jb_sql "SELECT count(*) FROM (SELECT 1 FROM jobbuf.claim_locks l WHERE l.queue = 'hl_spray' AND l.slot >= 0 FOR UPDATE SKIP LOCKED) f")" 0
as_role hostile_producer "SELECT public.jobbuf_stage('hl_pgroup', '{\"n\": 1}'::jsonb, partition_key => 'P1');
                          SELECT public.jobbuf_stage('hl_pgroup', '{\"n\": 2}'::jsonb, partition_key => 'P2');
                          SELECT public.jobbuf_stage('hl_pgroup', '{\"n\": 3}'::jsonb, partition_key => 'P1')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:hl_pgroup)" -ge 2 ]' 20; then
  pass "while the consumer holds its slots, the worker delivers the groups of a partitioned max_in_flight queue"
else
  fail "while the consumer holds its slots, $(jb_redis LLEN jobbuf:hl_pgroup) group messages of hl_pgroup after 20 s, 2 expected"
fi
expect_eq "those groups are one per partition" \
  "$(jb_sql "SELECT string_agg(partition_key || ':' || (payload->>'n'), ',' ORDER BY id) FROM jobbuf.jobs WHERE queue = 'hl_pgroup' AND group_id IS NOT NULL")" "P1:1,P2:2,P1:3"
jb_psql -q -o /dev/null <<'SQL'
SELECT public.jobbuf_stage('hl_flight', '{"n": 4}'::jsonb);
SELECT public.jobbuf_stage('hl_parts', '{"n": 5}'::jsonb, partition_key => 'C');
SELECT public.jobbuf_stage('hl_parts', '{"n": 6}'::jsonb, partition_key => 'D');
SQL
expect_eq "another consumer session claims a max_in_flight queue meanwhile" \
  "$(role_value hostile_consumer "SELECT string_agg(payload->>'n', ',') FROM public.jobbuf_claim('hl_flight', 10, NULL::text)")" "4"
expect_eq "and a partition the first session sprayed made-up keys on" \
  "$(role_value hostile_consumer "SELECT string_agg(payload->>'n', ',') FROM public.jobbuf_claim('hl_parts', 10, 'C')")" "5"
expect_eq "and the next partition of that queue" \
  "$(role_value hostile_consumer "SELECT string_agg(partition || ':' || (payload->>'n'), ',') FROM public.jobbuf_claim('hl_parts', 10, NULL::text)")" "D:6"
delivered "while the consumer holds its slots"
jb_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'hostile_consumer'" >/dev/null

# --- 4. DROP DATABASE of the worker's database, refused, must not move the worker
pid=$(worker_pid)
mark=$(log_mark)
for _ in 1 2 3 4 5 6 7 8 9 10; do
  as_role hostile_nobody "DROP DATABASE $JB_DB" postgres >"$JB_RUN/drop.out"
done
expect_match "nobody's DROP DATABASE is refused" "$(cat "$JB_RUN/drop.out")" 'must be owner'
refused "the owner drops the database inside a transaction block" hostile_owner \
  "BEGIN; DROP DATABASE $JB_DB" 'cannot run inside a transaction block' postgres
refused "the owner drops the database it is connected to" hostile_owner \
  "DROP DATABASE $JB_DB" 'currently open database'
delivered "after twelve refused DROP DATABASE"
expect_eq "the drain worker stayed (same pid)" "$(worker_pid)" "$pid"
expect_eq "the worker never left for a refused DROP DATABASE" \
  "$(count_lines 'leaves database' "$(log_since "$mark")")" 0

# An allowed DROP DATABASE that fails (another session is connected): the worker leaves, and
# comes back once the drop has failed, without backoff piling up over repeated attempts.
psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$JB_DB" -qtAX -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
blocker=$!
track_pid $blocker
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'SELECT pg_sleep(300)%'"' AND usename = '"'postgres'"'")" = 1 ]' 10
for attempt in 1 2 3; do
  out=$(PGOPTIONS="$PGOPTIONS -c statement_timeout=30s" as_role hostile_owner "DROP DATABASE $JB_DB" postgres)
  expect_match "the owner's DROP DATABASE fails while another session is connected ($attempt)" "$out" 'being accessed by other users'
  if wait_worker_running 15; then
    pass "after the failed drop the drain worker runs again ($attempt)"
  else
    fail "after the failed drop no drain worker within 15 s ($attempt)"
  fi
done
kill "$blocker" 2>/dev/null
delivered "after three failed DROP DATABASE"
expect_eq "the database is still there" "$(jb_sql "SELECT count(*) FROM pg_database WHERE datname = '$JB_DB'")" 1

no_marker_and_no_superuser "at the end"
expect_eq "no crash" "$(count_lines 'terminated by signal|PANIC' "$(cat "$JB_RUN/postgres.log")")" 0
faults_done

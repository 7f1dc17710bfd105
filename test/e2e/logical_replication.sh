#!/usr/bin/env bash
# Logical replication of a database that has jobbuf, to a subscriber that has jobbuf and its own
# running drain worker (docs/copies.md, "Logical replication"). Two private clusters: the
# publisher (wal_level = logical) delivers to the harness's Redis, the subscriber to a Redis of its
# own. For each publication
#   FOR ALL TABLES
#   FOR ALL TABLES WITH (publish = 'insert, update, delete')
#   FOR TABLES IN SCHEMA jobbuf, TABLE public.orders
# a fresh subscriber (CREATE EXTENSION jobbuf, table orders) subscribes to a publisher that already
# holds jobs, claims, dead letters and archived jobs of earlier rounds, and the publisher then
# creates queues, stages, claims (a max_in_flight queue too), fails (retry and dead letter),
# completes (archived) and delivers. Then:
#   - every table of the subscription reaches sync state r, pg_stat_subscription_stats counts no
#     apply and no sync error (before 1.3: the publisher's jobbuf.installation row broke the
#     initial sync on installation_pkey, every 5 s);
#   - the subscriber keeps its own identity (one row, unchanged), and claim slots its own claims
#     made do not collide with the publisher's;
#   - the publisher never fails for lack of a replica identity (before 1.3: the worker's census,
#     deleting from jobbuf.consumer_failures, failed about once a second) and its census empties
#     jobbuf.consumer_failures;
#   - an orders row inserted after the jobbuf work arrives, with every job, dead letter and
#     archived job of the publisher;
#   - replicated jobs are held on the subscriber: its jobbuf_claim returns none, its worker pushes
#     nothing to its Redis.
# Then the blue/green cutover: jobbuf.enabled = off on the publisher, jobs staged there, catch-up,
# DROP SUBSCRIPTION, jobbuf_release_restored() on the subscriber: it moves jobbuf.jobs_id_seq past
# every id it holds (a job staged there gets a new id) and its worker delivers the released jobs.
# Storage rotation is forced (jobbuf.rotation_min_size = 1 page on the publisher): in each round
# 1,000 more list jobs are delivered and the publisher's worker rotates jobbuf.jobs, which
# replicates as nothing (the checks above hold through it).
#
# LR_BREAK=identity (the publisher's consumer_failures without a replica identity) or
# LR_BREAK=trigger (the subscriber's triggers dropped) removes a fix, to see this test fail.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "wal_level = logical
max_worker_processes = 16
jobbuf.poll_interval = '200ms'
jobbuf.rotation_min_size = 1"
start_extra_redis || exit 1
SUB_REDIS=$EXTRA_REDIS_PORT
sub_redis() { redis-cli -p "$SUB_REDIS" "$@"; }

# --- the subscriber: a second private cluster, jobbuf preloaded, its worker on its own Redis
SUB=$JB_RUN/sub
SUB_LOG=$JB_RUN/sub.log
jb_as_postgres "$JB_PGBIN/initdb" -D "$SUB" -U postgres --auth=trust --no-sync >"$JB_RUN/sub-initdb.log" 2>&1 || {
  cat "$JB_RUN/sub-initdb.log"; exit 1; }
cat >>"$SUB/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$JB_RUN'
shared_preload_libraries = 'jobbuf'
jobbuf.database = '$JB_DB'
jobbuf.redis_url = 'redis://127.0.0.1:$SUB_REDIS/0'
jobbuf.poll_interval = '200ms'
max_worker_processes = 16
fsync = off
log_min_messages = warning
CONF
sub_stop() {
  [ -f "$SUB/postmaster.pid" ] && jb_as_postgres "$JB_PGBIN/pg_ctl" -D "$SUB" -m immediate stop >/dev/null 2>&1
  e2e_cleanup
}
trap sub_stop EXIT
if ! jb_on_free_port SUB_PORT jb_pg_start "$SUB" "$SUB_LOG"; then
  fail "the subscriber starts"; tail -n 20 "$SUB_LOG"; e2e_done
fi
sub_psql() { psql -X -v ON_ERROR_STOP=1 -h "$JB_RUN" -p "$SUB_PORT" -U postgres -d "$JB_DB" "$@"; }
sub_sql() { sub_psql -qtAX -c "$1"; }
psql -X -q -h "$JB_RUN" -p "$SUB_PORT" -U postgres -d postgres -c "CREATE DATABASE $JB_DB" >/dev/null

jb_sql "CREATE TABLE public.orders (id bigserial PRIMARY KEY, note text NOT NULL)" >/dev/null
[ "${LR_BREAK:-}" = identity ] && jb_sql "ALTER TABLE jobbuf.consumer_failures REPLICA IDENTITY DEFAULT" >/dev/null
PUB_ID=$(jb_sql "SELECT jobbuf.installation_id()")

# A fresh jobbuf and orders table on the subscriber; prints the subscriber's identity.
sub_fresh() {
  sub_psql -q -o /dev/null <<'SQL'
SET client_min_messages = error;  -- DROP EXTENSION warns about the held jobs it discards
DROP EXTENSION IF EXISTS jobbuf CASCADE;
DROP TABLE IF EXISTS public.orders;
CREATE TABLE public.orders (id bigint PRIMARY KEY, note text NOT NULL);
CREATE EXTENSION jobbuf;
SQL
  if [ "${LR_BREAK:-}" = trigger ]; then
    sub_sql "DROP TRIGGER installation_not_replicated ON jobbuf.installation;
             DROP TRIGGER claim_locks_not_replicated ON jobbuf.claim_locks" >/dev/null
  fi
  sub_sql "SELECT jobbuf.installation_id()"
}

# Publisher's work on queue prefix P: queues of every kind, staged jobs, a claim completed
# (archived), a claim failed (retried later), a claim failed at max_attempts (dead letter, a
# consumer_failures row for the census), a claim of a max_in_flight queue (claim slots), list jobs
# for the worker to deliver.
pub_work() {
  local p=$1
  jb_psql -q -o /dev/null <<SQL
SELECT jobbuf_create_queue('${p}_list', 'list');
SELECT jobbuf_create_queue('${p}_claim', 'none', '{"archive": true, "backoff_base": 3600, "visibility": 3600}');
SELECT jobbuf_create_queue('${p}_fragile', 'none', '{"max_attempts": 1}');
SELECT jobbuf_create_queue('${p}_flight', 'none', '{"max_in_flight": 1, "visibility": 3600}');
SELECT jobbuf_stage('${p}_list', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SELECT jobbuf_stage('${p}_claim', jsonb_build_object('n', n)) FROM generate_series(1, 6) n;
SELECT jobbuf_stage('${p}_fragile', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SELECT jobbuf_stage('${p}_flight', jsonb_build_object('n', n), partition_key => 'p' || (n % 2)) FROM generate_series(1, 4) n;
SELECT jobbuf_complete(c.group_id) FROM (SELECT DISTINCT group_id FROM jobbuf_claim('${p}_claim', 2)) c;
SELECT jobbuf_fail(c.group_id, 'try again') FROM (SELECT DISTINCT group_id FROM jobbuf_claim('${p}_claim', 2)) c;
SELECT count(*) FROM jobbuf_claim('${p}_claim', 1);
SELECT jobbuf_fail(c.group_id, 'gave up') FROM (SELECT DISTINCT group_id FROM jobbuf_claim('${p}_fragile', 2)) c;
SELECT count(*) FROM jobbuf_claim('${p}_flight', 1);
SQL
}

same_rows() {  # WHAT QUERY: the subscriber's answer equals the publisher's
  expect_eq "$1" "$(sub_sql "$2")" "$(jb_sql "$2")"
}

round=0
run_round() {  # PUBLICATION-CLAUSE
  round=$((round + 1))
  local p=r$round pub=pub$round sub=sub$round clause=$1 sub_id marker states pub_log_from sub_log_from
  say "round $round: CREATE PUBLICATION $pub $clause"
  sub_id=$(sub_fresh)
  pub_log_from=$(log_mark)
  sub_log_from=$(wc -l <"$SUB_LOG")
  jb_sql "CREATE PUBLICATION $pub $clause" >/dev/null
  sub_sql "CREATE SUBSCRIPTION $sub CONNECTION 'host=127.0.0.1 port=$JB_PGPORT dbname=$JB_DB user=postgres' PUBLICATION $pub" >/dev/null 2>&1 \
    || fail "round $round: CREATE SUBSCRIPTION"

  # While the initial sync runs, the publisher works (a schedule too: it arrives held).
  pub_work "$p"
  jb_sql "SELECT jobbuf_schedule('${p}_daily', '@daily', '${p}_list', '{\"daily\": true}')" >/dev/null
  # The subscriber claims a max_in_flight queue first (its own claim slots), then the publisher does.
  jb_psql -q -o /dev/null <<SQL
SELECT jobbuf_create_queue('${p}_late', 'none', '{"max_in_flight": 2, "visibility": 3600}');
SELECT jobbuf_stage('${p}_late', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SQL
  jb_wait_until "[ \"\$(sub_sql \"SELECT count(*) FROM jobbuf.queues WHERE name = '${p}_late'\" 2>/dev/null)\" = 1 ]" 60 \
    || fail "round $round: the queue ${p}_late did not reach the subscriber"
  expect_eq "round $round: the subscriber's claim of ${p}_late takes none of the held jobs" \
    "$(sub_sql "SELECT count(*) FROM jobbuf_claim('${p}_late', 10)")" 0
  expect_eq "round $round: ... and made the subscriber's own claim slots" \
    "$(sub_sql "SELECT count(*) FROM jobbuf.claim_locks WHERE queue = '${p}_late'")" 257
  jb_sql "SELECT count(*) FROM jobbuf_claim('${p}_late', 1)" >/dev/null

  expect_list_reaches "jobbuf:${p}_list" 20 20 "round $round: the publisher's worker delivers its 20 list jobs"
  if jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.consumer_failures')\" = 0 ]" 20; then
    pass "round $round: the publisher's census folds jobbuf.consumer_failures"
  else
    fail "round $round: jobbuf.consumer_failures still holds $(jb_sql 'SELECT count(*) FROM jobbuf.consumer_failures') rows on the publisher"
  fi
  # A rotation: 1,000 list jobs delivered leave a heap of dead rows, the live ones a few.
  local filenode
  filenode=$(jb_sql "SELECT pg_relation_filenode('jobbuf.jobs')")
  jb_sql "SELECT count(jobbuf_stage('${p}_list', jsonb_build_object('bulk', n))) FROM generate_series(1, 1000) n" >/dev/null
  expect_list_reaches "jobbuf:${p}_list" 1020 30 "round $round: ... and 1,000 more"
  check "round $round: the publisher's worker rotates jobbuf.jobs (a new file)" \
    jb_wait_until "[ \"\$(jb_sql \"SELECT pg_relation_filenode('jobbuf.jobs')\")\" != $filenode ]" 30
  wait_staged_quiet=$(jb_sql "SELECT count(*) FROM jobbuf.jobs")

  marker=$(jb_sql "INSERT INTO public.orders (note) VALUES ('after round $round') RETURNING id")
  if jb_wait_until "[ \"\$(sub_sql \"SELECT count(*) FROM public.orders WHERE id = $marker\" 2>/dev/null)\" = 1 ]" 60; then
    pass "round $round: an orders row inserted after the jobbuf work arrives"
  else
    fail "round $round: the orders row $marker did not arrive in 60 s"
  fi
  if jb_wait_until "[ \"\$(sub_sql \"SELECT count(*) FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = '$sub' AND r.srsubstate <> 'r'\")\" = 0 ]" 60; then
    pass "round $round: every table of the subscription is in sync state r ($(sub_sql "SELECT count(*) FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = '$sub'") tables)"
  else
    fail "round $round: sync states $(sub_sql "SELECT string_agg(r.srrelid::regclass::text || '=' || r.srsubstate, ' ') FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = '$sub' AND r.srsubstate <> 'r'")"
  fi
  expect_eq "round $round: every jobbuf table is in the subscription" \
    "$(sub_sql "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid JOIN pg_class c ON c.oid = r.srrelid WHERE s.subname = '$sub' AND c.relnamespace = 'jobbuf'::regnamespace")" \
    "archive,claim_locks,consumer_failures,dead,delivery_counter,held_discards,installation,jobs,queue_flow,queue_stats,queues,redis_memory,schedules"
  # (sync_error_count; 19 counts tables and sequences apart: sync_table_error_count, sync_seq_error_count)
  expect_eq "round $round: pg_stat_subscription_stats: no apply error, no sync error" \
    "$(sub_sql "SELECT s->>'apply_error_count' || ' ' || (SELECT sum(e.value::bigint) FROM jsonb_each_text(s) e WHERE e.key LIKE 'sync%error_count')
                FROM (SELECT to_jsonb(t) AS s FROM pg_stat_subscription_stats t WHERE t.subname = '$sub') x")" "0 0"

  # Caught up (the orders row came after the jobbuf work): the subscriber holds what the publisher holds.
  same_rows "round $round: the subscriber has the publisher's jobs (every column)" \
    "SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) FROM jobbuf.jobs j"
  same_rows "round $round: ... dead letters" "SELECT md5(string_agg(d::text, ',' ORDER BY d.id)) FROM jobbuf.dead d"
  same_rows "round $round: ... archived jobs" "SELECT md5(string_agg(a::text, ',' ORDER BY a.id)) FROM jobbuf.archive a"
  same_rows "round $round: ... queues" "SELECT string_agg(name, ',' ORDER BY name) FROM jobbuf.queues"
  same_rows "round $round: ... schedules" "SELECT string_agg(name || ' ' || next_run_at, ',' ORDER BY name) FROM jobbuf.schedules"
  expect_eq "round $round: the replicated schedule is held on the subscriber" \
    "$(sub_sql "SELECT held FROM jobbuf_schedules() WHERE name = '${p}_daily'")" t
  expect_eq "round $round: the subscriber keeps its own identity (one row)" \
    "$(sub_sql "SELECT count(*) || ' ' || max(id::text) FROM jobbuf.installation") $(sub_sql "SELECT jobbuf.installation_id()")" \
    "1 $sub_id $sub_id"
  expect_eq "round $round: the publisher keeps its identity" "$(jb_sql "SELECT jobbuf.installation_id()")" "$PUB_ID"
  expect_eq "round $round: every replicated job is held on the subscriber ($wait_staged_quiet jobs)" \
    "$(sub_sql "SELECT count(*) FILTER (WHERE owner = '$PUB_ID') || ' ' || count(*) FILTER (WHERE owner = jobbuf.installation_id()) FROM jobbuf.jobs")" \
    "$wait_staged_quiet 0"
  expect_eq "round $round: the subscriber's jobbuf_claim returns none of them" \
    "$(sub_sql "SELECT (SELECT count(*) FROM jobbuf_claim('${p}_claim', 100)) + (SELECT count(*) FROM jobbuf_claim('${p}_flight', 100)) + (SELECT count(*) FROM jobbuf_claim('${p}_fragile', 100))")" 0
  expect_eq "round $round: the subscriber's worker runs" "$(sub_sql "SELECT running FROM jobbuf_worker_status()")" t
  expect_eq "round $round: ... and pushed nothing to its Redis" "$(sub_redis --scan --pattern "jobbuf:r*" | wc -l)" 0
  expect_eq "round $round: the publisher's log has no replica identity error" \
    "$(log_since "$pub_log_from" | grep -c 'does not have a replica identity')" 0
  expect_eq "round $round: the subscriber's log has no replication error" \
    "$(tail -n +"$((sub_log_from + 1))" "$SUB_LOG" | grep -cE 'ERROR|duplicate key')" 0
  if [ "$round" -lt 3 ]; then
    sub_psql -qtAX -c "SET client_min_messages = warning" -c "DROP SUBSCRIPTION $sub" >/dev/null || fail "DROP SUBSCRIPTION $sub"
    jb_sql "DROP PUBLICATION $pub" >/dev/null
  fi
}

run_round "FOR ALL TABLES"
run_round "FOR ALL TABLES WITH (publish = 'insert, update, delete')"
run_round "FOR TABLES IN SCHEMA jobbuf, TABLE public.orders"

# --- blue/green cutover (docs/copies.md): the old primary stops delivering, the new one adopts
say "cutover"
set_and_reload jobbuf.enabled off || fail "the publisher did not reload jobbuf.enabled = off"
sleep 1
jb_sql "SELECT count(jobbuf_stage('r3_list', jsonb_build_object('cutover', n))) FROM generate_series(1, 10) n" >/dev/null
marker=$(jb_sql "INSERT INTO public.orders (note) VALUES ('cutover') RETURNING id")
jb_wait_until "[ \"\$(sub_sql \"SELECT count(*) FROM public.orders WHERE id = $marker\")\" = 1 ]" 60 \
  || fail "cutover: the subscriber did not catch up"
expect_eq "cutover: the old primary delivered none of the 10 jobs staged after jobbuf.enabled = off" \
  "$(jb_redis LLEN jobbuf:r3_list)" 1020
sub_psql -qtAX -c "SET client_min_messages = warning" -c "DROP SUBSCRIPTION sub3" >/dev/null || fail "DROP SUBSCRIPTION sub3"
top=$(sub_sql "SELECT greatest((SELECT max(id) FROM jobbuf.jobs), (SELECT max(id) FROM jobbuf.dead), (SELECT max(id) FROM jobbuf.archive))")
held=$(sub_sql "SELECT count(*) FROM jobbuf.jobs")
dead=$(sub_sql "SELECT count(*) FROM jobbuf.dead")
expect_eq "cutover: before release the subscriber's sequence is where it started" \
  "$(sub_sql "SELECT is_called FROM jobbuf.jobs_id_seq")" f
expect_eq "cutover: jobbuf_release_restored() adopts every held job and dead letter" \
  "$(sub_sql "SELECT jobbuf_release_restored()")" "$((held + dead))"
expect_eq "cutover: ... and moved jobbuf.jobs_id_seq past every id it holds ($top)" \
  "$(sub_sql "SELECT last_value || ' ' || is_called FROM jobbuf.jobs_id_seq")" "$top true"
expect_eq "cutover: ... and adopts the held schedules" "$(sub_sql "SELECT count(*) FILTER (WHERE held) FROM jobbuf_schedules()")" 0
own=$(sub_sql "SELECT jobbuf_stage('r3_list', '{\"staged\": \"on the new primary\"}')")
expect_eq "cutover: a job staged on the new primary gets a new id" "$(( own > top ))" 1
sub_sql "SELECT jobbuf_release_restored()" >/dev/null
expect_eq "cutover: a second release never moves the sequence back" \
  "$(sub_sql "SELECT last_value FROM jobbuf.jobs_id_seq")" "$own"
if jb_wait_until "[ \"\$(sub_redis LLEN jobbuf:r3_list)\" = 11 ]" 20; then
  pass "cutover: the new primary delivers the 10 released jobs and its own"
else
  fail "cutover: the new primary's Redis holds $(sub_redis LLEN jobbuf:r3_list) of 11 jobs in jobbuf:r3_list"
fi
expect_eq "cutover: nothing of earlier rounds' list queues came out twice" \
  "$(sub_redis --scan --pattern 'jobbuf:r[12]_list' | wc -l)" 0

e2e_done

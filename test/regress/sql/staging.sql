-- Staging: the single, array and text forms; ids; run_at and staged_at defaults; unique_key;
-- partition_key; transactions; jobbuf_stats() counts; jobbuf_worker_status() columns.
-- Queues are paused or have target 'none', so no worker takes jobs away while this runs.
\set SHOW_CONTEXT never
-- Each file starts from a fresh installation, so that the files do not depend on each other.
SET client_min_messages = error;  -- DROP EXTENSION warns about the jobs it discards
DROP EXTENSION IF EXISTS jobbuf;
CREATE EXTENSION jobbuf;
RESET client_min_messages;

SELECT jobbuf_create_queue('s_list', 'list');
SELECT jobbuf_pause('s_list');
SELECT jobbuf_create_queue('s_none', 'none');

-- The single form returns the new job's id; ids increase.
SELECT jobbuf_stage('s_list', '{"n": 1}'::jsonb) AS first_id \gset
SELECT jobbuf_stage('s_list', '{"n": 2}'::jsonb) - :first_id AS next_id_offset;
-- An untyped literal resolves to the text form.
SELECT jobbuf_stage('s_list', '{"n": 3, "form": "text"}') - :first_id AS text_form_offset;
-- The array form: one id per payload, in order; an empty array stages nothing.
SELECT id - :first_id AS offset FROM jobbuf_stage('s_list', ARRAY['{"n": 4}', '{"n": 5}', '{"n": 6}']::jsonb[]) AS id;
SELECT count(*) FROM jobbuf_stage('s_list', ARRAY[]::jsonb[]);
SELECT count(*) FROM jobbuf_stage('s_list', NULL::jsonb[]);
SELECT id - :first_id AS offset, queue, payload, unique_key, partition_key, attempts, last_error, group_id, lease_until
FROM jobbuf.jobs ORDER BY id;

-- Defaults: run_at and staged_at are the transaction's now(), also for an explicit NULL run_at
-- (jobbuf_stage) or NULL run_at / staged_at (a plain INSERT that names every column).
BEGIN;
SELECT jobbuf_stage('s_list', '{"d": 1}'::jsonb) AS d1 \gset
SELECT jobbuf_stage('s_list', '{"d": 2}'::jsonb, run_at => NULL) AS d2 \gset
INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key, staged_at)
VALUES ('s_list', '{"d": 3}', NULL, NULL, NULL, NULL) RETURNING id AS d3 \gset
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('s_list', '{"d": 4}') RETURNING id AS d4 \gset
SELECT payload, run_at = now() AS run_at_now, staged_at = now() AS staged_at_now
FROM jobbuf.jobs WHERE id IN (:d1, :d2, :d3, :d4) ORDER BY id;
COMMIT;

-- run_at in the future or the past is kept as given.
SELECT jobbuf_stage('s_list', '{"later": true}'::jsonb, run_at => now() + interval '1 hour') AS later \gset
SELECT jobbuf_stage('s_list', '{"earlier": true}'::jsonb, run_at => now() - interval '1 hour') AS earlier \gset
SELECT payload, extract(epoch FROM run_at - staged_at) AS run_at_minus_staged_at_s FROM jobbuf.jobs WHERE id IN (:later, :earlier) ORDER BY id;

-- A rolled-back transaction leaves nothing staged.
BEGIN;
SELECT count(*) FROM jobbuf_stage('s_list', ARRAY['{"rolled": "back"}', '{"rolled": "back"}']::jsonb[]);
ROLLBACK;
SELECT count(*) FROM jobbuf.jobs WHERE payload ? 'rolled';

-- unique_key: while a job with the same (queue, unique_key) waits, staging another returns NULL
-- and stages nothing; other keys, other queues and NULL keys are independent.
SELECT jobbuf_stage('s_none', '{"u": 1}'::jsonb, unique_key => 'order-42') IS NOT NULL AS staged;
SELECT jobbuf_stage('s_none', '{"u": 2}'::jsonb, unique_key => 'order-42') AS duplicate_id;
SELECT jobbuf_stage('s_none', '{"u": 3}'::jsonb, unique_key => 'order-43') IS NOT NULL AS staged;
SELECT jobbuf_stage('s_list', '{"u": 4}'::jsonb, unique_key => 'order-42') IS NOT NULL AS staged_other_queue;
SELECT jobbuf_stage('s_none', '{"u": 5}'::jsonb, unique_key => NULL) IS NOT NULL AS staged;
SELECT jobbuf_stage('s_none', '{"u": 6}'::jsonb, unique_key => NULL) IS NOT NULL AS staged;
-- Within one transaction too.
BEGIN;
SELECT jobbuf_stage('s_none', '{"u": 7}'::jsonb, unique_key => 'tx-key') IS NOT NULL AS staged;
SELECT jobbuf_stage('s_none', '{"u": 8}'::jsonb, unique_key => 'tx-key') AS duplicate_id;
COMMIT;
SELECT payload, unique_key FROM jobbuf.jobs WHERE queue = 's_none' ORDER BY id;
-- A plain INSERT of a duplicate waiting key is a unique violation (jobbuf_stage is the
-- function that turns it into NULL).
INSERT INTO jobbuf.jobs (queue, payload, unique_key) VALUES ('s_none', '{"u": 9}', 'order-42');
-- An ORM's INSERT ... ON CONFLICT DO NOTHING names the waiting-key index (jobs_unique_waiting)
-- by its columns and predicate: the duplicate is skipped. Storage rotation (docs/storage.md)
-- keeps this one table and its index, so the form holds across rotations.
INSERT INTO jobbuf.jobs (queue, payload, unique_key) VALUES ('s_none', '{"u": 9}', 'order-42')
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND group_id IS NULL DO NOTHING
    RETURNING id;
-- Once the waiting job is gone (delivered, or claimed by a consumer), the key is free again.
DELETE FROM jobbuf.jobs WHERE queue = 's_none' AND unique_key = 'order-42';
SELECT jobbuf_stage('s_none', '{"u": 10}'::jsonb, unique_key => 'order-42') IS NOT NULL AS staged_again;
SELECT count(*) FROM jobbuf_claim('s_none', 100) WHERE payload->>'u' = '3';
SELECT jobbuf_stage('s_none', '{"u": 11}'::jsonb, unique_key => 'order-43') IS NOT NULL AS staged_while_claimed;

-- partition_key is stored as given.
SELECT jobbuf_stage('s_list', '{"p": 1}'::jsonb, partition_key => 'account-7') AS p1 \gset
SELECT payload, partition_key FROM jobbuf.jobs WHERE id = :p1;

-- jobbuf_stats(): ready (due), scheduled (run_at later), claimed; totals start at 0. They are
-- as of the last census: taken here by hand. With jobbuf.database '*' this database has a worker,
-- whose census may have counted the jobs before the statements above and publish after this one:
-- holding every queue's row of jobbuf.queue_stats until COMMIT keeps it out (it skips rows another
-- transaction holds), and taking them first waits for a census it is publishing.
SELECT jobbuf_create_queue('s_empty', 'stream');
BEGIN;
SELECT count(*) AS queues_held FROM (SELECT queue FROM jobbuf.queue_stats FOR UPDATE) held;
SELECT jobbuf.take_census() AS queues_counted;
SELECT queue, target, paused, ready, scheduled, claimed, dead, delivered_total, failed_total,
       last_error, last_delivery_at, oldest_ready_age IS NOT NULL AS has_ready_age
FROM jobbuf_stats();
SELECT count(*) AS stats_rows, sum(ready + scheduled + claimed) AS jobs_counted,
       (SELECT count(*) FROM jobbuf.jobs) AS jobs_in_table
FROM jobbuf_stats();

-- jobbuf_queue_metrics(): the same counts, held apart; no delivery in the last minute.
SELECT queue, ready, scheduled, claimed, held, dead, oldest_ready_age IS NOT NULL AS has_ready_age,
       delivered_total, rejected_total, consumer_failed_total, delivered_per_second,
       queue_time_p50, queue_time_p99
FROM jobbuf_queue_metrics();
COMMIT;
-- A consumer failure counts at once in failed_total and consumer_failed_total, and the census
-- moves it into the queue's counters (it counts once). This database's worker takes censuses
-- too, so whether it already did is not asserted before the census taken here (the rows held
-- again, as above).
SELECT jobbuf_fail(group_id, 'consumer says no') AS failed
FROM (SELECT DISTINCT group_id FROM jobbuf.jobs WHERE queue = 's_none' AND group_id IS NOT NULL) g;
SELECT s.failed_total, m.consumer_failed_total, m.rejected_total
FROM jobbuf_stats() s JOIN jobbuf_queue_metrics() m USING (queue) WHERE queue = 's_none';
BEGIN;
SELECT count(*) AS queues_held FROM (SELECT queue FROM jobbuf.queue_stats FOR UPDATE) held;
SELECT jobbuf.take_census() AS queues_counted;
SELECT s.failed_total, m.consumer_failed_total, m.ready, m.claimed,
       (SELECT count(*) FROM jobbuf.consumer_failures) AS uncounted_rows
FROM jobbuf_stats() s JOIN jobbuf_queue_metrics() m USING (queue) WHERE queue = 's_none';
-- The exporter's view: seconds, the database's name, NaN for no time in queue.
SELECT datname = current_database() AS datname_ok, queue, ready, failed_total, oldest_ready_seconds > 0 AS waiting,
       queue_time_p99_seconds
FROM jobbuf_prometheus_queues() WHERE queue = 's_list';
COMMIT;

-- jobbuf_worker_status(): these columns; a row per drain worker (how many depends on the server's
-- jobbuf.database), each naming its database.
SELECT * FROM jobbuf_worker_status() WHERE false;
SELECT count(*) > 0 AS rows, bool_and(database IS NOT NULL) AS database_named,
       bool_and(running IS NOT NULL AND redis_connected IS NOT NULL) AS flags_not_null,
       bool_and(wakeups >= 0 AND batches >= 0 AND delivered >= 0) AS counters_not_negative,
       bool_and(running = (pid IS NOT NULL)) AS pid_iff_running
FROM jobbuf_worker_status();
SELECT pg_typeof(pid) AS pid, pg_typeof(database) AS database, pg_typeof(running) AS running,
       pg_typeof(redis_connected) AS redis_connected, pg_typeof(last_error) AS last_error,
       pg_typeof(last_error_at) AS last_error_at, pg_typeof(wakeups) AS wakeups,
       pg_typeof(batches) AS batches, pg_typeof(delivered) AS delivered
FROM jobbuf_worker_status() LIMIT 1;

-- A jobs table changed by its owner: jobbuf_stage still validates, and what the owner added
-- applies to it as to an INSERT: a CHECK constraint, and a trigger of their own (which fires).
ALTER TABLE jobbuf.jobs ADD CONSTRAINT small_payload CHECK (octet_length(payload::text) < 40);
SELECT jobbuf_stage('s_list', '{"short": true}'::jsonb) IS NOT NULL AS short_staged;
\set VERBOSITY terse
SELECT jobbuf_stage('s_list', jsonb_build_object('long', repeat('x', 50)));
SELECT count(*) FROM jobbuf_stage('s_list', ARRAY['{"a": 1}', jsonb_build_object('long', repeat('x', 50))]);
\set VERBOSITY default
ALTER TABLE jobbuf.jobs DROP CONSTRAINT small_payload;
CREATE TABLE staged_audit (job_id bigint, queue text);
CREATE FUNCTION audit_staged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO staged_audit VALUES (NEW.id, NEW.queue); RETURN NULL; END $$;
CREATE TRIGGER audit_staged AFTER INSERT ON jobbuf.jobs FOR EACH ROW EXECUTE FUNCTION audit_staged();
SELECT jobbuf_stage('s_list', '{"audited": 1}'::jsonb) AS audited_id \gset
SELECT count(*) AS audited FROM jobbuf_stage('s_list', ARRAY['{"audited": 2}', '{"audited": 3}']::jsonb[]);
SELECT count(*) AS audit_rows, bool_or(job_id = :audited_id) AS has_first FROM staged_audit;
SELECT jobbuf_stage('nope', '{}'::jsonb);
DROP TRIGGER audit_staged ON jobbuf.jobs;
DROP TABLE staged_audit;
DROP FUNCTION audit_staged();

-- A read-only transaction refuses staging, as it refuses the INSERT.
BEGIN READ ONLY;
SELECT jobbuf_stage('s_list', '{"ro": true}'::jsonb);
ROLLBACK;

-- jobbuf.jobs is vacuumed after a fixed number of deletes, without the cost-based delay.
SELECT unnest(reloptions) AS jobs_reloption FROM pg_class WHERE oid = 'jobbuf.jobs'::regclass ORDER BY 1;

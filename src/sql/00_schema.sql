-- jobbuf: internal schema and tables. Users read these; ORMs may INSERT into jobbuf.jobs.
\echo Use "CREATE EXTENSION jobbuf" to load this file. \quit

CREATE SCHEMA jobbuf;
COMMENT ON SCHEMA jobbuf IS 'jobbuf internal tables: queues, staged jobs, dead letters, archive';

CREATE TABLE jobbuf.queues (
    name       text PRIMARY KEY,
    target     text NOT NULL,
    options    jsonb NOT NULL DEFAULT '{}',
    paused     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_name_format CHECK (name ~ '^[A-Za-z0-9_.:-]{1,63}$'),
    CONSTRAINT queues_target_known CHECK (target IN ('list', 'stream', 'sidekiq', 'bullmq', 'celery', 'none')),
    CONSTRAINT queues_options_object CHECK (jsonb_typeof(options) = 'object')
);
COMMENT ON TABLE jobbuf.queues IS 'one row per queue; change it only through jobbuf_create_queue / jobbuf_alter_queue / jobbuf_drop_queue';

-- Per-queue delivery counters, written by the worker in the same transaction as its deletes so
-- they are exact. Kept apart from jobbuf.queues so that counter updates do not invalidate the
-- queue metadata that every staging backend caches. failed_total counts the jobs Redis rejected
-- (dead letters of the worker); consumer_failed_total the jobs jobbuf_fail handled, folded in
-- from jobbuf.consumer_failures by the worker's census. The census columns (ready ... census_at)
-- are the worker's count of the queue's jobs and its last minute of deliveries, refreshed at
-- most every jobbuf.poll_interval (src/census/queue_census.cpp; NULL before the first census)
-- by the installation census_by: jobbuf_stats() and jobbuf_queue_metrics() read them instead of
-- counting jobs, and ignore those a restored dump or a copy carried from its original.
CREATE TABLE jobbuf.queue_stats (
    queue            text PRIMARY KEY REFERENCES jobbuf.queues (name) ON DELETE CASCADE,
    delivered_total  bigint NOT NULL DEFAULT 0,
    failed_total     bigint NOT NULL DEFAULT 0,
    last_error       text,
    last_error_at    timestamptz,
    last_delivery_at timestamptz,
    consumer_failed_total bigint NOT NULL DEFAULT 0,
    ready            bigint,
    scheduled        bigint,
    claimed          bigint,
    held             bigint,
    dead             bigint,
    oldest_ready_at  timestamptz,
    delivered_last_minute bigint,
    queue_time_p50   interval,
    queue_time_p99   interval,
    census_at        timestamptz,
    census_by        uuid
);

-- Consumer failures not yet counted: jobbuf_fail appends one row per call (a row of its own, so
-- failing consumers never wait for each other or for the worker on a shared counter), and the
-- worker's census moves them into jobbuf.queue_stats.consumer_failed_total.
CREATE TABLE jobbuf.consumer_failures (
    queue  text NOT NULL,
    failed bigint NOT NULL
);
-- No key (rows are appended and folded, never looked up one by one): the whole row identifies
-- it to logical replication, so the census's DELETE is not refused under a publication that
-- publishes deletes and includes this table (FOR ALL TABLES, FOR TABLES IN SCHEMA jobbuf).
-- Two rows with the same values are interchangeable; a subscriber deletes either one.
ALTER TABLE jobbuf.consumer_failures REPLICA IDENTITY FULL;

-- The installation's identity: made by CREATE EXTENSION, one row, never dumped (not a
-- configuration table), so a database restored from a dump gets an identity of its own. Jobs
-- record the identity they were staged under (jobbuf.jobs.origin: the ids consumers see derive
-- from it) and the identity allowed to deliver or claim them (owner). A job whose owner is not
-- the installation's own identity is held: restored from a dump, copied by CREATE DATABASE ...
-- TEMPLATE, or applied by logical replication; the worker and claims skip it until
-- jobbuf_release_restored adopts it. A database copied by CREATE DATABASE ... TEMPLATE carries
-- this row too: jobbuf.installation_id() tells by database_oid and answers with an identity
-- derived from this one and the copy's own oid, so the copy's jobs are held there as well.
CREATE TABLE jobbuf.installation (
    id           uuid NOT NULL,
    database_oid oid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    one_row      boolean PRIMARY KEY DEFAULT true CONSTRAINT installation_one_row CHECK (one_row)
);
COMMENT ON TABLE jobbuf.installation IS 'this installation''s identity (one row, not dumped): jobs staged here record it; change it only with jobbuf_reset_identity()';
INSERT INTO jobbuf.installation (id, database_oid)
SELECT pg_catalog.gen_random_uuid(), d.oid FROM pg_catalog.pg_database d
WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();

-- The identity jobs staged now record (cached per backend; see src/metadata/installation_identity.cpp),
-- and the trigger that makes every backend read it again after a change.
CREATE FUNCTION jobbuf.installation_id()
RETURNS uuid LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'jobbuf_installation_id';
CREATE FUNCTION jobbuf.installation_changed_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_installation_changed_trigger';
CREATE TRIGGER installation_invalidate AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobbuf.installation
    FOR EACH STATEMENT EXECUTE FUNCTION jobbuf.installation_changed_trigger();

-- Staged jobs. The queue is validated by the staging trigger (20_staging.sql, cached per
-- backend). The foreign key is what backups need: pg_dump orders the data of an extension's
-- configuration tables by the foreign keys between them, so jobs are restored after the queues
-- they name, and the validation trigger accepts them (in name order, jobs came first and every
-- job was rejected). Its check on INSERT is disabled below: it would run a query per staged job
-- and take FOR KEY SHARE on the queue row in every staging transaction (a multixact hot spot on
-- a busy queue; 25% of the INSERT path's throughput with 8 producers), and the staging trigger
-- already refuses an unknown queue, reading it after its lock on jobbuf.jobs, which
-- jobbuf_drop_queue waits for before it deletes a queue. The key's other checks stay: a queue
-- that still has jobs cannot be deleted, and an UPDATE cannot point a job at a missing queue.
CREATE TABLE jobbuf.jobs (
    id            bigserial PRIMARY KEY,
    queue         text NOT NULL REFERENCES jobbuf.queues (name),
    payload       jsonb NOT NULL,
    run_at        timestamptz NOT NULL DEFAULT now(),
    unique_key    text,
    partition_key text,
    staged_at     timestamptz NOT NULL DEFAULT now(),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    group_id      uuid,
    lease_until   timestamptz,
    origin        uuid NOT NULL DEFAULT jobbuf.installation_id(),
    owner         uuid NOT NULL DEFAULT jobbuf.installation_id(),
    -- A periodic job's tick (70_schedules.sql): the number the ids consumers see derive from
    -- instead of the id, so that a tick staged twice (a failover that lost the first staging)
    -- shows the same ids. NULL for every other job; producers cannot set it.
    tick_id       bigint
);
DO $$
BEGIN
    EXECUTE (SELECT pg_catalog.format('ALTER TABLE jobbuf.jobs DISABLE TRIGGER %I', t.tgname)
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_constraint k ON k.oid OPERATOR(pg_catalog.=) t.tgconstraint
             WHERE t.tgrelid OPERATOR(pg_catalog.=) 'jobbuf.jobs'::pg_catalog.regclass
               AND k.conname OPERATOR(pg_catalog.=) 'jobs_queue_fkey'
               AND t.tgfoid OPERATOR(pg_catalog.=) 'pg_catalog."RI_FKey_check_ins"'::pg_catalog.regproc);
END $$;
-- A queue table is small and churns: vacuum it after a fixed number of deletes rather than a
-- fraction of its (tiny) size, so dead tuples never pile up behind a backlog, and without the
-- cost-based delay: at tens of thousands of jobs a second a throttled vacuum of this table
-- cannot keep up with the deletes, and the table grows from one visit to the next.
ALTER TABLE jobbuf.jobs SET (autovacuum_vacuum_cost_delay = 0,
                             autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                             autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000,
                             autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000);
-- The worker's batch statement is planned once, generically (queue unknown). With real
-- statistics a backlog of one queue makes "queue = $1" look like it matches every row, and the
-- planner would then scan jobs_pkey and filter by queue — which, for every other (empty) queue,
-- reads the whole backlog. A fixed n_distinct keeps the estimate for an unknown queue selective,
-- so the generic plan always walks jobs_waiting (queue, owner, id).
ALTER TABLE jobbuf.jobs ALTER COLUMN queue SET (n_distinct = 100);
COMMENT ON TABLE jobbuf.jobs IS 'jobs waiting for delivery or claimed by a consumer; INSERT (queue, payload[, run_at, unique_key, partition_key]) is the same as jobbuf_stage';

-- Indexes: the table is write-heavy (every job is inserted once and deleted once), so it carries
-- only what the hot queries need, and partial indexes keep each one small: a waiting job is in
-- jobs_waiting (plus the two partial ones below if it has a unique or partition key); a claimed
-- job is only in jobs_group and jobs_leased (and jobs_partition_leased). Claiming moves a row from the first set to the
-- second, and completing deletes it.
--  * jobs_pkey (id): deletes and updates by id (the worker, jobbuf_complete, jobbuf_fail).
--  * jobs_waiting (queue, owner, id) WHERE group_id IS NULL: the worker's drain and jobbuf_claim
--    take the oldest unclaimed jobs of one queue in id order (LIMIT n FOR UPDATE SKIP LOCKED
--    reads only the head of the index); claimed jobs leave this index, and held jobs (owner not
--    this installation) sit apart from the installation's own, so no take ever walks over them.
--  * jobs_unique_waiting: at most one waiting job per (queue, unique_key); the arbiter of
--    jobbuf_stage's ON CONFLICT DO NOTHING, which makes the check race-free.
--  * jobs_partition_waiting (queue, partition_key, id), waiting jobs that have a partition key:
--    a claim for one partition reads that partition's oldest jobs directly, and a claim without
--    a partition key that found nothing among the oldest ready jobs tries a few more partitions
--    by a bounded skip scan (one probe per partition, not one row per job). Jobs without a
--    partition key (most queues) are not in it and cost nothing.
--  * jobs_partition_leased (queue, partition_key, lease_until), claimed jobs that have a
--    partition key: whether a partition has a group in flight, or expired leases to re-claim, is
--    one probe, whatever the number of groups in flight in the queue.
--  * jobs_group (group_id), claimed jobs: jobbuf_complete / fail / extend / group find a group.
--  * jobs_leased (queue, lease_until), claimed jobs: jobbuf_claim finds expired leases
--    (lease_until <= now()) to re-claim, and the groups in flight (lease_until > now()) for
--    max_in_flight. Only claimed jobs are in it.
-- Not indexed on purpose: run_at. Jobs due later stay in jobs_waiting and are filtered on the heap;
-- queues with option order = run_at sort their waiting jobs per claim (fine for backlogs of
-- thousands, not millions; an index on (queue, run_at) WHERE group_id IS NULL would serve them
-- at the cost of one more index write per staged job for every queue).
CREATE INDEX jobs_waiting ON jobbuf.jobs (queue, owner, id) WHERE group_id IS NULL;
CREATE UNIQUE INDEX jobs_unique_waiting ON jobbuf.jobs (queue, unique_key)
    WHERE unique_key IS NOT NULL AND group_id IS NULL;
CREATE INDEX jobs_partition_waiting ON jobbuf.jobs (queue, partition_key, id)
    WHERE partition_key IS NOT NULL AND group_id IS NULL;
CREATE INDEX jobs_group ON jobbuf.jobs (group_id) WHERE group_id IS NOT NULL;
CREATE INDEX jobs_leased ON jobbuf.jobs (queue, lease_until) WHERE group_id IS NOT NULL;
CREATE INDEX jobs_partition_leased ON jobbuf.jobs (queue, partition_key, lease_until)
    WHERE group_id IS NOT NULL AND partition_key IS NOT NULL;

CREATE TABLE jobbuf.dead (
    id            bigint PRIMARY KEY,
    queue         text NOT NULL,
    payload       jsonb NOT NULL,
    partition_key text,
    unique_key    text,
    staged_at     timestamptz NOT NULL,
    attempts      integer NOT NULL,
    last_error    text,
    errors        jsonb NOT NULL DEFAULT '[]',
    died_at       timestamptz NOT NULL DEFAULT now(),
    -- The job's own (jobbuf.jobs): jobbuf_retry_dead puts it back with both, so a dead letter
    -- restored from a dump comes back held, and every job keeps the ids consumers saw.
    origin        uuid NOT NULL DEFAULT jobbuf.installation_id(),
    owner         uuid NOT NULL DEFAULT jobbuf.installation_id()
);
COMMENT ON TABLE jobbuf.dead IS 'dead letters: jobs that exhausted max_attempts or that Redis rejected';
CREATE INDEX dead_queue_died_at ON jobbuf.dead (queue, died_at);

CREATE TABLE jobbuf.archive (
    id            bigint PRIMARY KEY,
    queue         text NOT NULL,
    payload       jsonb NOT NULL,
    partition_key text,
    unique_key    text,
    staged_at     timestamptz NOT NULL,
    attempts      integer NOT NULL,
    completed_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobbuf.archive IS 'completed jobs of queues with option archive = true';
CREATE INDEX archive_queue_completed_at ON jobbuf.archive (queue, completed_at);

SELECT pg_catalog.pg_extension_config_dump('jobbuf.queues', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.queue_stats', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.consumer_failures', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.jobs', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.jobs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.dead', '');
SELECT pg_catalog.pg_extension_config_dump('jobbuf.archive', '');

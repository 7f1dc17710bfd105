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
-- most every jobbuf.poll_interval (src/worker/queue_census.cpp; NULL before the first census)
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

-- The identity jobs staged now record (cached per backend; see src/installation_identity.cpp),
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
    owner         uuid NOT NULL DEFAULT jobbuf.installation_id()
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
-- jobbuf: queue management (create, alter, drop, pause, resume) and option validation.

-- Raises a clear error unless (target, options) describe a valid queue. Returns the options.
CREATE FUNCTION jobbuf.checked_options(target text, options jsonb)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k text;
    v jsonb;
    kind text;
    known constant text[] := ARRAY['key', 'maxlen', 'batch_size', 'max_attempts', 'backoff_base',
        'backoff_max', 'visibility', 'min_batch', 'max_wait', 'max_in_flight', 'order', 'archive',
        'delivery', 'sidekiq_queue', 'group_class', 'namespace', 'sidekiq_version', 'prefix',
        'bullmq_queue', 'celery_queue'];
    sidekiq_only constant text[] := ARRAY['sidekiq_queue', 'namespace', 'sidekiq_version'];
BEGIN
    IF target IS NULL OR target NOT IN ('list', 'stream', 'sidekiq', 'bullmq', 'celery', 'none') THEN
        RAISE EXCEPTION 'jobbuf: unknown target "%"', target
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'target is one of list, stream, sidekiq, bullmq, celery, none';
    END IF;
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'jobbuf: queue options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(options) LOOP
        kind := jsonb_typeof(v);
        IF NOT k = ANY (known) THEN
            RAISE EXCEPTION 'jobbuf: unknown queue option "%"', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'known options: ' || array_to_string(known, ', ');
        END IF;
        IF k = ANY (sidekiq_only) AND target <> 'sidekiq' THEN
            RAISE EXCEPTION 'jobbuf: option "%" applies only to target sidekiq', k
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF k = 'key' AND target NOT IN ('list', 'stream') THEN
            RAISE EXCEPTION 'jobbuf: option "key" applies only to targets list and stream'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a sidekiq queue writes Sidekiq''s own keys (see sidekiq_queue and namespace); a none queue writes nothing';
        END IF;
        IF k = 'group_class' AND target NOT IN ('sidekiq', 'bullmq', 'celery') THEN
            RAISE EXCEPTION 'jobbuf: option "group_class" applies only to targets sidekiq, bullmq and celery'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF k IN ('prefix', 'bullmq_queue') AND target <> 'bullmq' THEN
            RAISE EXCEPTION 'jobbuf: option "%" applies only to target bullmq', k
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF k = 'celery_queue' AND target <> 'celery' THEN
            RAISE EXCEPTION 'jobbuf: option "celery_queue" applies only to target celery'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF k = 'maxlen' AND target <> 'stream' THEN
            RAISE EXCEPTION 'jobbuf: option "maxlen" applies only to target stream'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF k IN ('maxlen', 'batch_size', 'max_attempts', 'min_batch', 'max_in_flight', 'visibility') THEN
            IF kind <> 'number' OR v::text !~ '^[0-9]+$' OR v::numeric < 1 OR v::numeric > 2147483647 THEN
                RAISE EXCEPTION 'jobbuf: option "%" must be a positive integer, not %', k, v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF k = 'batch_size' AND v::numeric > 100000 THEN
                RAISE EXCEPTION 'jobbuf: option "batch_size" must be at most 100000, not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k IN ('backoff_base', 'backoff_max', 'max_wait') THEN
            IF kind <> 'number' OR v::numeric < 0 OR v::numeric > 31536000 THEN
                RAISE EXCEPTION 'jobbuf: option "%" must be a number of seconds between 0 and 31536000, not %', k, v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'archive' THEN
            IF kind <> 'boolean' THEN
                RAISE EXCEPTION 'jobbuf: option "archive" must be true or false, not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'order' THEN
            IF kind <> 'string' OR v #>> '{}' NOT IN ('id', 'run_at') THEN
                RAISE EXCEPTION 'jobbuf: option "order" must be "id" or "run_at", not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'delivery' THEN
            IF kind <> 'string' OR v #>> '{}' NOT IN ('each', 'group') THEN
                RAISE EXCEPTION 'jobbuf: option "delivery" must be "each" or "group", not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'sidekiq_version' THEN
            IF v::text NOT IN ('6', '7', '8') THEN
                RAISE EXCEPTION 'jobbuf: option "sidekiq_version" must be 6, 7 or 8, not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'sidekiq_queue' THEN
            IF kind <> 'string' OR v #>> '{}' !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
                RAISE EXCEPTION 'jobbuf: option "sidekiq_queue" must be 1-63 characters of [A-Za-z0-9_.:-], not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'bullmq_queue' THEN
            IF kind <> 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 512 OR strpos(v #>> '{}', ':') > 0 THEN
                RAISE EXCEPTION 'jobbuf: option "bullmq_queue" must be a string of 1 to 512 characters without ":", not %', v
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'BullMQ queue names cannot contain ":"';
            END IF;
        ELSE  -- key, group_class, namespace, prefix, celery_queue: free-form strings, passed to Redis as single arguments
            IF kind <> 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 512 THEN
                RAISE EXCEPTION 'jobbuf: option "%" must be a string of 1 to 512 characters, not %', k, v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
    END LOOP;
    IF options->>'delivery' = 'group' AND target = 'none' THEN
        RAISE EXCEPTION 'jobbuf: delivery "group" needs a target that the worker pushes to'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a queue with target none is consumed with jobbuf_claim directly';
    END IF;
    IF options->>'delivery' = 'group' AND target = 'sidekiq' AND NOT options ? 'group_class' THEN
        RAISE EXCEPTION 'jobbuf: a sidekiq queue with delivery "group" needs the option group_class'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'group_class names the Sidekiq job class whose perform(group_id) reads the group';
    END IF;
    IF options->>'delivery' = 'group' AND target = 'celery' AND NOT options ? 'group_class' THEN
        RAISE EXCEPTION 'jobbuf: a celery queue with delivery "group" needs the option group_class'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'group_class names the Celery task that is called with the group id';
    END IF;
    IF (options->>'min_batch') IS NOT NULL AND (options->>'batch_size') IS NOT NULL
       AND (options->>'min_batch')::int > (options->>'batch_size')::int THEN
        RAISE EXCEPTION 'jobbuf: min_batch (%) cannot exceed batch_size (%)',
            options->>'min_batch', options->>'batch_size'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN options;
END $$;

-- Raises a clear error unless name is a valid queue name.
CREATE FUNCTION jobbuf.checked_queue_name(queue text)
RETURNS text LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF queue IS NULL OR queue !~ '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION 'jobbuf: invalid queue name %', coalesce(quote_literal(queue), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a queue name is 1 to 63 characters of A-Z a-z 0-9 _ . : -';
    END IF;
    RETURN queue;
END $$;

-- The queue's row, without locking it (claimers must not queue up on it), or a clear error.
CREATE FUNCTION jobbuf.known_queue(queue text)
RETURNS jobbuf.queues LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues;
BEGIN
    PERFORM jobbuf.checked_queue_name(queue);
    SELECT * INTO q FROM jobbuf.queues WHERE name = queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobbuf: unknown queue %', quote_literal(queue)
            USING ERRCODE = 'undefined_object',
                  HINT = 'create it with jobbuf_create_queue(name, target, options)';
    END IF;
    RETURN q;
END $$;

-- The same, locked for an administrative change. FOR NO KEY UPDATE: it does not wait for the
-- transactions that hold the row FOR KEY SHARE through a foreign key (jobbuf.jobs's, when its
-- owner enabled its check on INSERT; jobbuf.queue_stats's).
CREATE FUNCTION jobbuf.locked_queue(queue text)
RETURNS jobbuf.queues LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM jobbuf.queues q WHERE q.name = queue FOR NO KEY UPDATE;
    RETURN jobbuf.known_queue(queue);
END $$;

CREATE FUNCTION jobbuf_create_queue(queue text, target text DEFAULT 'list', options jsonb DEFAULT '{}')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jobbuf.checked_queue_name(queue);
    INSERT INTO jobbuf.queues (name, target, options)
    VALUES (queue, target, jobbuf.checked_options(target, coalesce(options, '{}')))
    ON CONFLICT (name) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobbuf: queue % already exists', quote_literal(queue)
            USING ERRCODE = 'duplicate_object',
                  HINT = 'change its options with jobbuf_alter_queue';
    END IF;
    INSERT INTO jobbuf.queue_stats (queue) VALUES (queue);
END $$;

-- Checks one job of a queue that switches from delivery 'group' to 'each' against its target, as
-- staging would have: jobs staged under 'group' were not (src/staging/delivery_switch_check.cpp).
CREATE FUNCTION jobbuf.check_each_payload(queue text, target text, id bigint, payload jsonb)
RETURNS void LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'jobbuf_check_each_payload';

-- A change of delivery mode leaves the groups in flight leased, and says so: their consumers
-- may be working on them, and can still read them (jobbuf_group) and finish them
-- (jobbuf_complete, jobbuf_fail). Releasing them at once would deliver their jobs a second time
-- while that work goes on; refusing the change would make it wait for every lease, which a
-- consumer's heartbeat (jobbuf_extend) can prolong forever, and a switch away from group
-- delivery is often made because its consumers fail. A lease that expires is handled the new way:
-- its jobs are claimed again as a group, or released by the worker and delivered one by one.
CREATE FUNCTION jobbuf_alter_queue(queue text, options jsonb)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues := jobbuf.locked_queue(queue);
    merged jsonb;
    delivery text;
    leased bigint;
    waited_lock text;
BEGIN
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'jobbuf: queue options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A JSON null removes an option; anything else replaces it.
    merged := jsonb_strip_nulls(q.options || options);
    UPDATE jobbuf.queues SET options = jobbuf.checked_options(q.target, merged) WHERE name = q.name;
    delivery := coalesce(merged->>'delivery', 'each');
    -- From 'group' to 'each': every job the queue holds (waiting, or in a group whose lease may
    -- expire) becomes a message of its own, so it must suit the target as a staged job does.
    -- Stagers still in progress are waited for (they may have staged under 'group'), at most
    -- 2 s: while this lock waits, every new staging transaction of every queue queues behind it.
    IF q.target OPERATOR(pg_catalog.<>) 'none' AND delivery OPERATOR(pg_catalog.=) 'each'
       AND coalesce(q.options OPERATOR(pg_catalog.->>) 'delivery', 'each') OPERATOR(pg_catalog.=) 'group' THEN
        waited_lock := pg_catalog.current_setting('lock_timeout');
        PERFORM pg_catalog.set_config('lock_timeout', '2s', true);
        BEGIN
            LOCK TABLE jobbuf.jobs IN SHARE ROW EXCLUSIVE MODE;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'jobbuf: queue %: transactions that stage jobs are still open; the switch to delivery each waited 2 s for them', pg_catalog.quote_literal(q.name)
                USING ERRCODE = 'lock_not_available',
                      HINT = 'retry; a session idle in transaction after staging (pg_stat_activity) holds it up';
        END;
        PERFORM pg_catalog.set_config('lock_timeout', waited_lock, true);
        PERFORM jobbuf.check_each_payload(q.name, q.target, j.id, j.payload)
        FROM jobbuf.jobs j WHERE j.queue OPERATOR(pg_catalog.=) q.name ORDER BY j.id;
    END IF;
    IF q.target <> 'none' AND delivery <> coalesce(q.options->>'delivery', 'each') THEN
        SELECT pg_catalog.count(DISTINCT j.group_id) INTO leased FROM jobbuf.jobs j
        WHERE j.queue = q.name AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now();
        IF leased > 0 THEN
            RAISE NOTICE 'jobbuf: queue %: % groups in flight keep their lease', pg_catalog.quote_literal(q.name), leased
                USING DETAIL = 'their consumers can still read them with jobbuf_group and finish them with jobbuf_complete or jobbuf_fail',
                      HINT = CASE WHEN delivery = 'each'
                                  THEN 'the jobs of a group whose lease expires are delivered one by one'
                                  ELSE 'a group whose lease expires is claimed and delivered again as a group' END;
        END IF;
    END IF;
END $$;

CREATE FUNCTION jobbuf_drop_queue(queue text, force boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues := jobbuf.locked_queue(queue);
BEGIN
    -- Wait for transactions that are staging right now, so that none of their jobs outlives
    -- the queue; later stagers see the queue gone (their cached metadata is invalidated).
    LOCK TABLE jobbuf.jobs IN SHARE ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT 1 FROM jobbuf.jobs j WHERE j.queue = q.name) THEN
        IF NOT coalesce(force, false) THEN
            RAISE EXCEPTION 'jobbuf: queue % still has jobs', quote_literal(q.name)
                USING ERRCODE = 'object_in_use',
                      HINT = 'wait for them to drain, or call jobbuf_drop_queue(queue, force => true) to discard them';
        END IF;
        DELETE FROM jobbuf.jobs j WHERE j.queue = q.name;
    END IF;
    DELETE FROM jobbuf.queues WHERE name = q.name;
END $$;

CREATE FUNCTION jobbuf_pause(queue text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues := jobbuf.locked_queue(queue);
BEGIN
    UPDATE jobbuf.queues SET paused = true WHERE name = q.name AND NOT paused;
END $$;

CREATE FUNCTION jobbuf_resume(queue text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues := jobbuf.locked_queue(queue);
BEGIN
    UPDATE jobbuf.queues SET paused = false WHERE name = q.name AND paused;
END $$;
-- jobbuf: Redis Cluster placement. When the drain worker of this database delivers to a Redis
-- Cluster (jobbuf.redis_url redis+cluster:// or rediss+cluster://), a queue is refused at
-- jobbuf_create_queue / jobbuf_alter_queue unless the cluster can take its units: sidekiq and
-- celery never (their consumers cannot read a cluster), bullmq only when its keys share one slot
-- (a {hash tag} in prefix or bullmq_queue). See docs/cluster.md.

-- Raises a clear error when the row's queue cannot live on the Redis Cluster this database's
-- worker uses: the database's own jobbuf.redis_url (ALTER DATABASE ... SET), else the server's
-- (postgresql.conf, ALTER SYSTEM), else the default.
CREATE FUNCTION jobbuf.cluster_placement_check()
RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    url text;
    base text;
BEGIN
    SELECT pg_catalog.substr(s.setting, 18) INTO url
      FROM pg_catalog.pg_db_role_setting d
      JOIN pg_catalog.pg_database db ON db.oid OPERATOR(pg_catalog.=) d.setdatabase,
           pg_catalog.unnest(d.setconfig) AS s(setting)
     WHERE db.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
       AND d.setrole OPERATOR(pg_catalog.=) 0::pg_catalog.oid
       AND pg_catalog.starts_with(s.setting, 'jobbuf.redis_url=');
    IF url IS NULL THEN
        SELECT f.setting INTO url FROM pg_catalog.pg_file_settings f
         WHERE f.name OPERATOR(pg_catalog.=) 'jobbuf.redis_url' AND f.error IS NULL
         ORDER BY f.seqno DESC LIMIT 1;
    END IF;
    url := pg_catalog.lower(coalesce(url, ''));
    IF NOT (pg_catalog.starts_with(url, 'redis+cluster://') OR pg_catalog.starts_with(url, 'rediss+cluster://')) THEN
        RETURN NEW;
    END IF;
    IF NEW.target OPERATOR(pg_catalog.=) ANY (ARRAY['sidekiq', 'celery']) THEN
        RAISE EXCEPTION 'jobbuf: queue %: the % target cannot be delivered to a Redis Cluster',
                        pg_catalog.quote_literal(NEW.name), NEW.target
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = CASE NEW.target WHEN 'sidekiq' THEN 'Sidekiq does not support Redis Cluster.'
                                           ELSE 'Celery''s Redis transport (kombu) has no Redis Cluster support.' END,
                  HINT = 'this database''s jobbuf.redis_url is a Redis Cluster: use the list, stream or bullmq target, or a single Redis (or Sentinel) for this database';
    END IF;
    IF NEW.target OPERATOR(pg_catalog.=) 'bullmq' THEN
        base := coalesce(NEW.options OPERATOR(pg_catalog.->>) 'prefix', 'bull') OPERATOR(pg_catalog.||) ':'
                OPERATOR(pg_catalog.||) coalesce(NEW.options OPERATOR(pg_catalog.->>) 'bullmq_queue', NEW.name);
        IF NOT base OPERATOR(pg_catalog.~) '^[^{]*\{[^}]+\}' THEN
            RAISE EXCEPTION 'jobbuf: queue %: a bullmq queue on a Redis Cluster needs a {hash tag} in its prefix or bullmq_queue option',
                            pg_catalog.quote_literal(NEW.name)
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'BullMQ''s keys of one queue are used together in one script: they must share one slot.',
                      HINT = 'for example options {"prefix": "{bull}"} (then give BullMQ''s Queue and Worker the same prefix)';
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER queues_cluster_placement BEFORE INSERT OR UPDATE OF target, options ON jobbuf.queues
    FOR EACH ROW EXECUTE FUNCTION jobbuf.cluster_placement_check();
-- jobbuf: staging jobs (jobbuf_stage and plain INSERT), validation and the commit wake-up.

-- Validates every row inserted into jobbuf.jobs (queue exists, payload fits the queue's target),
-- fills defaults, and marks the transaction so that its commit wakes the worker.
CREATE FUNCTION jobbuf.staged_job_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_staged_job_trigger';
CREATE TRIGGER jobs_validate_and_wake BEFORE INSERT ON jobbuf.jobs
    FOR EACH ROW EXECUTE FUNCTION jobbuf.staged_job_trigger();

-- Invalidates the queue metadata that backends cache for the trigger above, and wakes the
-- worker at commit (a resumed or re-configured queue may have work).
CREATE FUNCTION jobbuf.queues_changed_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_queues_changed_trigger';
CREATE TRIGGER queues_invalidate AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobbuf.queues
    FOR EACH STATEMENT EXECUTE FUNCTION jobbuf.queues_changed_trigger();

-- Stages one job in the caller's transaction and returns its id. With a unique_key that is
-- already waiting in the queue it stages nothing and returns NULL (ON CONFLICT DO NOTHING on
-- jobs_unique_waiting: a concurrent stager of the same key waits for the first one's outcome).
-- In C (src/staging/stage_function.cpp, src/staging/job_inserter.cpp): the row is validated and inserted without
-- a SQL statement; with a unique_key, or when jobbuf.jobs was altered, through a kept INSERT.
CREATE FUNCTION jobbuf_stage(queue text, payload jsonb, run_at timestamptz DEFAULT NULL,
                             unique_key text DEFAULT NULL, partition_key text DEFAULT NULL)
RETURNS bigint LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_stage_jsonb';

-- Many jobs in one call, ids in payload order (the same C path, the table opened once).
CREATE FUNCTION jobbuf_stage(queue text, payloads jsonb[])
RETURNS SETOF bigint LANGUAGE c VOLATILE ROWS 100 AS 'MODULE_PATHNAME', 'jobbuf_stage_many';

-- jobbuf_stage('q', '{"a": 1}') with an untyped literal would be ambiguous between the jsonb and
-- jsonb[] forms; this text form wins that resolution (and serves drivers that bind text).
CREATE FUNCTION jobbuf_stage(queue text, payload text)
RETURNS bigint LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_stage_text';
-- jobbuf: inspection (per-queue statistics, worker status).

-- The census: the worker's count of each queue's jobs, kept in jobbuf.queue_stats so that
-- jobbuf_stats() and jobbuf_queue_metrics() read one row per queue instead of counting jobs.
-- The drain worker walks jobbuf.jobs in steps of jobbuf.census_step between its delivery
-- batches, adds the steps' counts up in its memory and publishes them with
-- jobbuf.publish_census when the walk reaches the end (src/worker/queue_census.cpp);
-- jobbuf.take_census() does the same in one statement. Every job of jobbuf.jobs is counted in
-- exactly one state: 3 held (its owner is not this installation, 60_copies.sql), 2 claimed (its
-- group holds a lease), 0 ready (due and not claimed, or its lease expired: a claim takes it),
-- 1 scheduled (due later). since: when the oldest job of the row became ready,
-- greatest(staged_at, run_at). last_id: its largest id.

-- A job's state for the census, as the installation own sees it at now. Inlined into the
-- queries that call it (no SET clause: it names only pg_catalog's operators, schema-qualified).
CREATE FUNCTION jobbuf.job_state(owner uuid, group_id uuid, lease_until timestamptz, run_at timestamptz,
                                 own uuid, now timestamptz)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN owner OPERATOR(pg_catalog.<>) own THEN 3
                WHEN group_id IS NOT NULL AND lease_until OPERATOR(pg_catalog.>) now THEN 2
                WHEN run_at OPERATOR(pg_catalog.<=) now THEN 0
                ELSE 1 END;
$$;

-- One step: the jobs after id "after" (ids start at 1) in id order (jobs_pkey), at most
-- step_rows of them (all when NULL), counted per queue and state, the identity and now() read
-- once.
CREATE FUNCTION jobbuf.census_step(after bigint, step_rows integer)
RETURNS TABLE (queue text, state integer, jobs bigint, since timestamptz, last_id bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH own AS (
        SELECT jobbuf.installation_id() AS id, pg_catalog.now() AS now
    ), walked AS (
        SELECT j.id, j.queue, j.owner, j.group_id, j.lease_until, j.run_at, j.staged_at
        FROM jobbuf.jobs j WHERE j.id OPERATOR(pg_catalog.>) after ORDER BY j.id LIMIT step_rows
    )
    SELECT j.queue, t.state, pg_catalog.count(*), pg_catalog.min(greatest(j.staged_at, j.run_at)),
           pg_catalog.max(j.id)
    FROM walked j CROSS JOIN own o
    CROSS JOIN LATERAL (SELECT jobbuf.job_state(j.owner, j.group_id, j.lease_until, j.run_at, o.id, o.now)) t(state)
    GROUP BY j.queue, t.state;
$$;

-- Publishes a census: per queue (queues[i]) its ready, scheduled, claimed and held jobs and
-- when its oldest ready job became ready (a queue the arrays do not name has none), with the
-- dead letters of jobbuf.dead counted now; and the worker's last minute of deliveries per queue
-- (minute_queues, deliveries, queue time p50 and p99 in seconds; NULL arrays leave those
-- columns as they are). Consumer failures that jobbuf_fail appended to jobbuf.consumer_failures
-- are moved into consumer_failed_total. census_at: started_at, when the census began (every job
-- committed before then and still there at its end is counted). Returns the number of queues
-- counted. Superusers only (the worker).
CREATE FUNCTION jobbuf.publish_census(queues text[], ready bigint[], scheduled bigint[], claimed bigint[],
                                      held bigint[], oldest_ready timestamptz[], minute_queues text[],
                                      delivered bigint[], p50_seconds float8[], p99_seconds float8[],
                                      started_at timestamptz)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH waiting AS (
        SELECT w.queue, w.ready, w.scheduled, w.claimed, w.held, w.oldest_ready
        FROM ROWS FROM (pg_catalog.unnest(queues), pg_catalog.unnest(ready), pg_catalog.unnest(scheduled),
                        pg_catalog.unnest(claimed), pg_catalog.unnest(held), pg_catalog.unnest(oldest_ready))
             AS w(queue, ready, scheduled, claimed, held, oldest_ready)
    ), dead AS (
        SELECT d.queue, pg_catalog.count(*) AS dead FROM jobbuf.dead d GROUP BY d.queue
    ), counted_queues AS (
        -- A row another transaction holds (a manual census in a long transaction) is counted
        -- next time: the worker never waits for it.
        SELECT l.queue FROM jobbuf.queue_stats l FOR UPDATE SKIP LOCKED
    ), folded AS (
        -- The failures of the queues counted now, and those of dropped queues.
        DELETE FROM jobbuf.consumer_failures f
        WHERE f.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT cq.queue FROM counted_queues cq))
           OR NOT EXISTS (SELECT 1 FROM jobbuf.queue_stats e WHERE e.queue OPERATOR(pg_catalog.=) f.queue)
        RETURNING f.queue, f.failed
    ), failures AS (
        SELECT f.queue, pg_catalog.sum(f.failed)::bigint AS failed FROM folded f GROUP BY f.queue
    ), minute AS (
        SELECT m.queue, m.delivered, m.p50, m.p99
        FROM ROWS FROM (pg_catalog.unnest(minute_queues), pg_catalog.unnest(delivered),
                        pg_catalog.unnest(p50_seconds), pg_catalog.unnest(p99_seconds)) AS m(queue, delivered, p50, p99)
    ), counted AS (
        UPDATE jobbuf.queue_stats s
        SET ready = coalesce(w.ready, 0), scheduled = coalesce(w.scheduled, 0),
            claimed = coalesce(w.claimed, 0), held = coalesce(w.held, 0), dead = coalesce(d.dead, 0),
            oldest_ready_at = w.oldest_ready,
            consumer_failed_total = s.consumer_failed_total OPERATOR(pg_catalog.+) coalesce(f.failed, 0),
            delivered_last_minute = CASE WHEN minute_queues IS NULL THEN s.delivered_last_minute ELSE coalesce(m.delivered, 0) END,
            queue_time_p50 = CASE WHEN minute_queues IS NULL THEN s.queue_time_p50 ELSE pg_catalog.make_interval(secs => m.p50) END,
            queue_time_p99 = CASE WHEN minute_queues IS NULL THEN s.queue_time_p99 ELSE pg_catalog.make_interval(secs => m.p99) END,
            census_at = started_at, census_by = jobbuf.installation_id()
        FROM counted_queues s0
        LEFT JOIN waiting w ON w.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN dead d ON d.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN failures f ON f.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN minute m ON m.queue OPERATOR(pg_catalog.=) s0.queue
        WHERE s.queue OPERATOR(pg_catalog.=) s0.queue
        RETURNING s.queue
    )
    SELECT pg_catalog.count(*)::integer FROM counted;
$$;

-- A census in one statement (by hand): every job counted in one pass, published with the
-- last minute of deliveries given (queue names, deliveries, queue time p50 and p99 in seconds;
-- NULL arrays leave those columns as they are). Returns the number of queues counted.
-- Superusers only.
CREATE FUNCTION jobbuf.take_census(queues text[] DEFAULT NULL, delivered bigint[] DEFAULT NULL,
                                   p50_seconds float8[] DEFAULT NULL, p99_seconds float8[] DEFAULT NULL)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH waiting AS (
        SELECT c.queue,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 0), 0)::bigint AS ready,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 1), 0)::bigint AS scheduled,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 2), 0)::bigint AS claimed,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 3), 0)::bigint AS held,
               pg_catalog.min(c.since) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 0) AS oldest_ready
        FROM (SELECT j.queue, t.state, pg_catalog.count(*) AS jobs,
                     pg_catalog.min(greatest(j.staged_at, j.run_at)) AS since
              FROM jobbuf.jobs j
              CROSS JOIN (SELECT jobbuf.installation_id() AS id, pg_catalog.now() AS now) o
              CROSS JOIN LATERAL (SELECT jobbuf.job_state(j.owner, j.group_id, j.lease_until, j.run_at, o.id, o.now)) t(state)
              GROUP BY j.queue, t.state) c
        GROUP BY c.queue
    )
    SELECT jobbuf.publish_census(pg_catalog.array_agg(w.queue), pg_catalog.array_agg(w.ready),
                                 pg_catalog.array_agg(w.scheduled), pg_catalog.array_agg(w.claimed),
                                 pg_catalog.array_agg(w.held), pg_catalog.array_agg(w.oldest_ready),
                                 queues, delivered, p50_seconds, p99_seconds, pg_catalog.now())
    FROM waiting w;
$$;
-- counts only when this installation took them (a restored dump or a copy carries its original's
-- until its own worker counts again), consumer failures appended since the last census added.
CREATE FUNCTION jobbuf.queue_counters()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint, claimed bigint,
               held bigint, dead bigint, oldest_ready_at timestamptz, delivered_total bigint,
               rejected_total bigint, consumer_failed_total bigint, last_error text,
               last_delivery_at timestamptz, delivered_last_minute bigint, queue_time_p50 interval,
               queue_time_p99 interval, census_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT q.name, q.target, q.paused,
           coalesce(c.ready, 0), coalesce(c.scheduled, 0), coalesce(c.claimed, 0),
           coalesce(c.held, 0), coalesce(c.dead, 0), c.oldest_ready_at,
           coalesce(s.delivered_total, 0), coalesce(s.failed_total, 0),
           coalesce(s.consumer_failed_total, 0) OPERATOR(pg_catalog.+) coalesce(f.failed, 0),
           s.last_error, s.last_delivery_at,
           c.delivered_last_minute, c.queue_time_p50, c.queue_time_p99, c.census_at
    FROM jobbuf.queues q
    LEFT JOIN jobbuf.queue_stats s ON s.queue OPERATOR(pg_catalog.=) q.name
    LEFT JOIN jobbuf.queue_stats c ON c.queue OPERATOR(pg_catalog.=) q.name
                                  AND c.census_by OPERATOR(pg_catalog.=) jobbuf.installation_id()
    LEFT JOIN (SELECT u.queue, pg_catalog.sum(u.failed)::bigint AS failed
               FROM jobbuf.consumer_failures u GROUP BY u.queue) f ON f.queue OPERATOR(pg_catalog.=) q.name;
$$;

-- One row per queue, from jobbuf.queue_stats: O(queues), whatever the backlog. ready, scheduled,
-- claimed, dead and oldest_ready_age are as of the worker's last census (at most
-- jobbuf.poll_interval old while the worker runs; 0 before the first one), paused and 'none'
-- queues included, held jobs in none of them. failed_total: the jobs Redis rejected plus those
-- consumers failed (jobbuf_fail), these counted at once.
CREATE FUNCTION jobbuf_stats()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint,
               claimed bigint, dead bigint, oldest_ready_age interval, delivered_total bigint,
               failed_total bigint, last_error text, last_delivery_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.queue, c.target, c.paused, c.ready, c.scheduled, c.claimed, c.dead,
           pg_catalog.now() OPERATOR(pg_catalog.-) c.oldest_ready_at, c.delivered_total,
           c.rejected_total OPERATOR(pg_catalog.+) c.consumer_failed_total, c.last_error, c.last_delivery_at
    FROM jobbuf.queue_counters() c
    ORDER BY c.queue;
$$;

-- Per queue, what an operator alerts on (docs/operations.md): the census counts as in
-- jobbuf_stats() plus held; the totals, Redis rejections and consumer failures apart; and the
-- worker's last minute of deliveries: delivered_per_second (deliveries of the last 60 s / 60)
-- and the time in queue, from greatest(staged_at, run_at) to delivery, p50 and p99 (NULL when
-- nothing was delivered in that minute). The minute is the one before the last census; a
-- census older than a minute (no worker) shows 0 and NULL.
CREATE FUNCTION jobbuf_queue_metrics()
RETURNS TABLE (queue text, ready bigint, scheduled bigint, claimed bigint, held bigint, dead bigint,
               oldest_ready_age interval, delivered_total bigint, rejected_total bigint,
               consumer_failed_total bigint, delivered_per_second float8,
               queue_time_p50 interval, queue_time_p99 interval)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.queue, c.ready, c.scheduled, c.claimed, c.held, c.dead,
           pg_catalog.now() OPERATOR(pg_catalog.-) c.oldest_ready_at,
           c.delivered_total, c.rejected_total, c.consumer_failed_total,
           CASE WHEN recent THEN coalesce(c.delivered_last_minute, 0)::float8 OPERATOR(pg_catalog./) 60 ELSE 0 END,
           CASE WHEN recent THEN c.queue_time_p50 END,
           CASE WHEN recent THEN c.queue_time_p99 END
    FROM jobbuf.queue_counters() c,
         LATERAL (SELECT c.census_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) r(recent)
    ORDER BY c.queue;
$$;

-- What the Prometheus exporter reads (contrib/prometheus/queries.yaml): the metrics above in
-- seconds and with the database's name, so that the exporter's file holds no SQL of its own.
CREATE FUNCTION jobbuf_prometheus_queues()
RETURNS TABLE (datname text, queue text, ready bigint, scheduled bigint, claimed bigint, held bigint,
               dead bigint, oldest_ready_seconds float8, delivered_total bigint, failed_total bigint,
               rejected_total bigint, consumer_failed_total bigint, delivered_per_second float8,
               queue_time_p50_seconds float8, queue_time_p99_seconds float8)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text, m.queue, m.ready, m.scheduled, m.claimed, m.held, m.dead,
           coalesce(pg_catalog.date_part('epoch', m.oldest_ready_age), 0),
           m.delivered_total, m.rejected_total OPERATOR(pg_catalog.+) m.consumer_failed_total,
           m.rejected_total, m.consumer_failed_total, m.delivered_per_second,
           coalesce(pg_catalog.date_part('epoch', m.queue_time_p50), 'NaN'),
           coalesce(pg_catalog.date_part('epoch', m.queue_time_p99), 'NaN')
    FROM @extschema@.jobbuf_queue_metrics() m;
$$;

-- This database's drain worker for the exporter: running 0/1 and redis_connected 0/1 (0 when no
-- worker runs), one row whatever jobbuf_worker_status() says about other databases.
CREATE FUNCTION jobbuf_prometheus_worker()
RETURNS TABLE (datname text, running integer, redis_connected integer)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text,
           coalesce(pg_catalog.bool_or(w.running), false)::integer,
           coalesce(pg_catalog.bool_or(w.running AND w.redis_connected), false)::integer
    FROM @extschema@.jobbuf_worker_status() w
    WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database();
$$;

-- One row per drain worker of the server (one per database; counters since its worker slot was
-- given to that database), and one per database left without a worker by jobbuf.max_workers
-- (pid NULL, running false, last_error says why). The same rows from every database.
CREATE FUNCTION jobbuf_worker_status(
    OUT pid integer, OUT database text, OUT running boolean, OUT redis_connected boolean,
    OUT last_error text, OUT last_error_at timestamptz, OUT wakeups bigint, OUT batches bigint,
    OUT delivered bigint)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 8 AS 'MODULE_PATHNAME', 'jobbuf_worker_status_all';

-- The SQL version the loaded library implements (superusers only): after installing a new build,
-- it shows whether Postgres was restarted to load it.
CREATE FUNCTION jobbuf.library_version()
RETURNS text LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'jobbuf_library_version';
-- jobbuf: the claim slots, row locks in jobbuf.claim_locks through which the claims of one
-- partition, or of one max_in_flight queue, take turns without waiting (the claim: 41_claim.sql).
--
-- Serialization without waiting: the two rules that span several claims (one group in flight
-- per partition, at most max_in_flight groups per queue) need claimers of the same partition or
-- queue to take turns. They do so with row try-locks (FOR UPDATE SKIP LOCKED) on jobbuf.claim_locks:
-- a claimer that finds the row taken treats the partition (or the queue) as busy — exactly what
-- it is — and moves on (or returns nothing), as SKIP LOCKED does for rows. Each rule is re-checked
-- in a statement that starts after the lock is held, so it sees every claim committed before.
-- The rows belong to one queue each (made by the first claim that needs one, deleted with the
-- queue): the queue's own row (max_in_flight) and 256 partition slots (hashtext(partition_key) &
-- 255; a collision only makes a claimer skip a partition for one claim transaction). While the
-- claim that makes them has not ended, the other claims of the queue that need a slot find it
-- taken (once per queue: see jobbuf.make_claim_locks). Only the extension's owner can
-- lock them (row locks need UPDATE on the table, which nobody is granted), and a consumer takes
-- them only through claims of a queue it may claim, so whatever it holds (an open transaction
-- that claimed many partitions) blocks claims of that queue alone: never another queue, never
-- the worker's group delivery (jobbuf_claim refuses the queues the worker delivers). A claim of
-- one partition locks its slot only once it saw a ready job there and no group in flight, so
-- claims of partitions that are empty or made up hold nothing. The common claim (no
-- max_in_flight, jobs without partition key) locks no slot at all.

-- The claim slots of each queue: slot -1 is the queue's own (max_in_flight), slots 0-255 its
-- partitions'. Part of the extension, not dumped. A queue's slots are made by the first claim
-- that needs one (jobbuf.try_claim_lock): a queue that is never claimed, or claimed without
-- max_in_flight and partitions, has none, and a database restored in any order (pg_restore -j)
-- makes them again when its claims need them.
CREATE TABLE jobbuf.claim_locks (
    queue text NOT NULL REFERENCES jobbuf.queues (name) ON DELETE CASCADE,
    slot  integer NOT NULL,
    PRIMARY KEY (queue, slot),
    CONSTRAINT claim_locks_slot_range CHECK (slot >= -1 AND slot < 256)
);
COMMENT ON TABLE jobbuf.claim_locks IS 'row locks that serialize the claims of one partition or of one max_in_flight queue: slot -1 is the queue''s own, 0-255 its partitions''; made by the first claim of the queue that needs one';

-- Makes the claim slots of a queue, all 257 at once, when a claim first needs one. Never waits:
-- it holds the queue's row (FOR NO KEY UPDATE, as an administrative change does) until its
-- transaction ends, and finding that row held means another claim is making the slots now (or an
-- administrative change or a drop of the queue is under way): false, the slot is taken. Holding
-- the queue's row, no other transaction can be inserting slots of the queue, so the insert never
-- waits either. True when the slots exist (nobody else sees them before this transaction ends).
CREATE FUNCTION jobbuf.make_claim_locks(queue_name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM jobbuf.queues q WHERE q.name = queue_name FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO jobbuf.claim_locks (queue, slot)
    SELECT queue_name, s.slot FROM pg_catalog.generate_series(-1, 255) s (slot)
    ON CONFLICT DO NOTHING;
    RETURN true;
END $$;

-- Takes a claim slot of the queue without waiting: the queue's own slot when part is NULL, else
-- the partition's. False when another transaction holds it (or the queue was dropped meanwhile).
-- A queue without slots yet gets them (jobbuf.make_claim_locks).
CREATE FUNCTION jobbuf.try_claim_lock(queue_name text, part text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wanted constant integer := CASE WHEN part IS NULL THEN -1 ELSE pg_catalog.hashtext(part) & 255 END;
BEGIN
    PERFORM 1 FROM jobbuf.claim_locks l
    WHERE l.queue = queue_name AND l.slot = wanted
    FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT 1 FROM jobbuf.claim_locks l WHERE l.queue = queue_name AND l.slot = wanted)
       OR NOT jobbuf.make_claim_locks(queue_name) THEN
        RETURN false;  -- held by another claim, or its slots are being made
    END IF;
    -- Made now by this transaction, or by one that ended since: free unless another claim took it.
    PERFORM 1 FROM jobbuf.claim_locks l
    WHERE l.queue = queue_name AND l.slot = wanted
    FOR UPDATE SKIP LOCKED;
    RETURN FOUND;
END $$;
-- jobbuf: batch consumers. jobbuf_claim hands out groups of ready jobs under a lease;
-- jobbuf_complete / jobbuf_fail / jobbuf_extend / jobbuf_group act on a group by its id
-- (42_claim_settle.sql). The claim slots that serialize claims: 40_claim_slots.sql.
--
-- The contract in short (see README.md, "Claiming"):
--  * A job is ready when run_at <= now() and it is not claimed, or its group's lease expired
--    (group_id IS NULL OR lease_until <= now()). A claim takes up to batch_size ready jobs in id
--    order (or run_at, id with option order = run_at) with FOR UPDATE SKIP LOCKED, gives them one
--    new group_id and leases them for `visibility` seconds (default 300). batch_size NULL means
--    the queue's option batch_size, else 100. Concurrent claimers never get the same job and
--    never wait for each other.
--  * The group_id is a fencing token. A group holds its jobs until they carry another group_id:
--    jobbuf_complete and jobbuf_fail act on the jobs that still carry it (also after the lease
--    ran out, as long as no claim took them), and return 0 for a group whose jobs were re-claimed.
--    jobbuf_extend and jobbuf_group are stricter: they need the lease itself (lease_until >
--    now()); an expired lease cannot be revived, because a revived lease could break the
--    one-group-per-partition and max_in_flight rules that the claims in between relied on.
--  * A lease that expires counts as a failed attempt (last_error 'lease expired'): a job that
--    kills every consumer before it can call jobbuf_fail (a poison job) still reaches
--    max_attempts and goes to jobbuf.dead, instead of being handed out forever. The count is
--    taken when the job is claimed again (or buried, at the limit).
--  * A claim on a paused queue returns nothing (pause stops consumers as it stops the worker).
--
-- Bounded claims: a claim without partition key does not look at every partition. It reads the
-- first 1,000 ready jobs of the queue in queue order (and up to 1,000 expired leases) and tries
-- the partitions they belong to, oldest first, at most 64; when none of them can be claimed (all
-- have a group in flight, or their slot is taken), it tries up to 64 more partitions, in key
-- order from the partition of a job picked at random. Its work is bounded by these numbers, not
-- by the number of partitions. The price: the best candidate is only searched for among them, so
-- a claim can return nothing while a partition it did not look at has a ready job (a later claim
-- looks elsewhere); see docs/claims.md.

-- Who claims: jobbuf_claim serves consumers of queues with target none. The jobs of list,
-- stream and sidekiq queues belong to the worker, which pushes them to Redis; a consumer that
-- claimed (and completed) them would take them from their Redis consumers, so jobbuf_claim
-- refuses those queues. Group delivery queues are claimed by the worker itself through
-- jobbuf.claim (the claim without that check, in schema jobbuf, executable by its owner only);
-- their consumers read the group they were sent with jobbuf_group and finish it with
-- jobbuf_complete / jobbuf_fail.


CREATE FUNCTION jobbuf.checked_group_id(group_id uuid)
RETURNS uuid LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF group_id IS NULL THEN
        RAISE EXCEPTION 'jobbuf: group_id must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'pass the group_id that jobbuf_claim returned with the jobs';
    END IF;
    RETURN group_id;
END $$;

-- The error text jobbuf keeps for a failed job: at most 8,192 characters; a longer text keeps
-- its first 8,192 characters followed by a marker with its length. It bounds what a consumer can
-- store per job (jobbuf_fail: last_error, and the dead letter's errors), so that no stored text
-- can make a later statement fail (a jsonb string holds less than 256 MB: one error as long
-- made every claim of its queue fail when the job was buried).
CREATE FUNCTION jobbuf.bounded_error(error text)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN pg_catalog.length(error) <= 8192 THEN error
                ELSE pg_catalog.left(error, 8192)
                     || pg_catalog.format(' [jobbuf: error truncated, %s characters]', pg_catalog.length(error)) END;
$$;

-- ORDER BY list of a claim for the queue's order option, on the relation alias `rel`.
CREATE FUNCTION jobbuf.claim_order(rel text, by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN by_run_at THEN pg_catalog.format('%1$s.run_at, %1$s.id', rel) ELSE pg_catalog.format('%s.id', rel) END;
$$;

-- The statement that claims one group: parameters $1 queue, $2 batch size, $3 partition key
-- (unused for the unpartitioned jobs), $4 the new group_id, $5 the lease, $6 min_batch,
-- $7 max_wait. It locks up to $2 unclaimed ready jobs (index jobs_waiting, or
-- jobs_partition_waiting for one partition) and up to $2 jobs with an expired lease (index
-- jobs_leased; few), keeps the first $2 of both in queue order, and leases them only if the
-- min_batch / max_wait gate opens: at least $6 jobs, or the oldest of them ready for $7.
-- A job's wait for max_wait starts when it became ready: greatest(staged_at, run_at).
-- Jobs locked but not kept (at most $2) stay locked until the claim's transaction ends; another
-- claimer skips them meanwhile, which costs it nothing but their place in the order.
CREATE FUNCTION jobbuf.claim_statement(partitioned boolean, by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.format($sql$
        WITH waiting AS MATERIALIZED (
            SELECT j.id, j.run_at, j.staged_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL AND j.run_at <= pg_catalog.now() AND %1$s
            ORDER BY %2$s LIMIT $2 FOR UPDATE OF j SKIP LOCKED
        ), expired AS MATERIALIZED (
            SELECT j.id, j.run_at, j.staged_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
              AND j.run_at <= pg_catalog.now() AND %1$s
            ORDER BY %2$s LIMIT $2 FOR UPDATE OF j SKIP LOCKED
        ), picked AS MATERIALIZED (
            SELECT c.id, c.run_at, c.staged_at
            FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) c
            ORDER BY %3$s LIMIT $2
        ), gate AS (
            SELECT coalesce(pg_catalog.count(*) >= $6 OR pg_catalog.min(greatest(p.staged_at, p.run_at)) <= pg_catalog.now() - $7, false) AS open
            FROM picked p
        ), claimed AS (
            UPDATE jobbuf.jobs j SET group_id = $4, lease_until = pg_catalog.now() + $5,
                attempts = j.attempts + CASE WHEN j.group_id IS NULL THEN 0 ELSE 1 END,
                last_error = CASE WHEN j.group_id IS NULL THEN j.last_error ELSE 'lease expired' END
            FROM picked p
            WHERE j.id = p.id AND (SELECT g.open FROM gate g)
            RETURNING j.group_id, j.id, j.payload, j.attempts, j.partition_key, j.staged_at, j.run_at
        )
        SELECT c.group_id, c.id, c.payload, c.attempts, c.partition_key, c.staged_at
        FROM claimed c ORDER BY %3$s
        $sql$,
        CASE WHEN partitioned THEN 'j.partition_key = $3' ELSE 'j.partition_key IS NULL' END,
        jobbuf.claim_order('j', by_run_at),
        jobbuf.claim_order('c', by_run_at));
$$;

-- The candidates of a claim without partition key, best first (see "Bounded claims" above): the
-- partitions of the first $2 ready jobs of the queue in queue order (index jobs_waiting) and of
-- the first $2 expired leases (index jobs_leased), each ranked by its first job among them, at
-- most $3 of them. NULL stands for the jobs without partition key (they form no partition, have
-- no in-flight limit, and compete by their own first ready job). $1 is the queue, compared as
-- (SELECT $1) so that the plan does not depend on the queue: planned for a queue that holds
-- most rows of the table, the probe would walk jobs_pkey in id order past every claimed job
-- (as the worker's generic plan, see jobbuf.jobs's n_distinct in 00_schema.sql).
CREATE FUNCTION jobbuf.claim_candidates_statement(by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.format($sql$
        WITH ready (part, id, run_at) AS (
            (SELECT j.partition_key, j.id, j.run_at FROM jobbuf.jobs j
             WHERE j.queue = (SELECT $1) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
               AND j.run_at <= pg_catalog.now()
             ORDER BY %1$s LIMIT $2)
          UNION ALL
            (SELECT j.partition_key, j.id, j.run_at FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL
               AND j.lease_until <= pg_catalog.now() AND j.run_at <= pg_catalog.now()
             ORDER BY j.lease_until LIMIT $2)
        ), firsts AS (
            SELECT DISTINCT ON (r.part) r.part, r.id, r.run_at FROM ready r
            ORDER BY r.part, %2$s
        )
        SELECT f.part FROM firsts f ORDER BY %3$s LIMIT $3
        $sql$,
        jobbuf.claim_order('j', by_run_at),
        jobbuf.claim_order('r', by_run_at),
        jobbuf.claim_order('f', by_run_at));
$$;

-- Up to $3 partitions of queue $1 that have waiting jobs, in key order from key $2 on (''
-- for the first), by a skip scan over jobs_partition_waiting: one index probe per partition.
CREATE FUNCTION jobbuf.partitions_from_statement()
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT $sql$
        WITH RECURSIVE parts (part, n) AS (
            (SELECT j.partition_key, 1 FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
               AND j.partition_key IS NOT NULL AND j.partition_key >= $2
             ORDER BY j.partition_key LIMIT 1)
          UNION ALL
            SELECT (SELECT j.partition_key FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
                      AND j.partition_key IS NOT NULL AND j.partition_key > p.part
                    ORDER BY j.partition_key LIMIT 1), p.n + 1
            FROM parts p WHERE p.part IS NOT NULL AND p.n < $3
        )
        SELECT p.part FROM parts p WHERE p.part IS NOT NULL
    $sql$;
$$;

-- The partition key of a waiting job of the queue picked at random (an id drawn between the
-- queue's first and last waiting job, then the first of at most 1,000 waiting jobs from there
-- that has a partition key); NULL when there is none. Where the second round of a bounded claim
-- starts, so that successive claims look at different partitions. (SELECT queue): as in
-- jobbuf.claim_candidates_statement, a plan that walks jobs_waiting whatever the queue.
CREATE FUNCTION jobbuf.random_partition(queue text)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first_id bigint;
    last_id bigint;
    picked text;
BEGIN
    SELECT j.id INTO first_id FROM jobbuf.jobs j
    WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
    ORDER BY j.id LIMIT 1;
    SELECT j.id INTO last_id FROM jobbuf.jobs j
    WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
    ORDER BY j.id DESC LIMIT 1;
    IF first_id IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT w.partition_key INTO picked FROM (
        SELECT j.partition_key FROM jobbuf.jobs j
        WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
          AND j.id >= first_id + pg_catalog.floor(pg_catalog.random() * (last_id - first_id + 1))::bigint
        ORDER BY j.id LIMIT 1000) w
    WHERE w.partition_key IS NOT NULL LIMIT 1;
    RETURN picked;
END $$;

-- True when the partition has a group in flight (a lease that has not expired).
CREATE FUNCTION jobbuf.partition_in_flight(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM jobbuf.jobs j
                   WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()
                     AND j.partition_key = $2);
$$;

-- True when a claim of the partition could take something: it has a ready job (waiting and
-- due, or with an expired lease) and no group in flight. Checked before its slot is locked.
CREATE FUNCTION jobbuf.partition_claimable(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (EXISTS (SELECT 1 FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL AND j.partition_key = $2
                      AND j.run_at <= pg_catalog.now())
            OR EXISTS (SELECT 1 FROM jobbuf.jobs j
                       WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
                         AND j.partition_key = $2 AND j.run_at <= pg_catalog.now()))
       AND NOT jobbuf.partition_in_flight($1, $2);
$$;

-- Claims a group of one partition with the statement of jobbuf.claim_statement (the same
-- parameters, $3 the partition): nothing when the partition has nothing ready or a group in
-- flight (its slot is then not locked), or when another claim holds its slot.
CREATE FUNCTION jobbuf.claim_partition(queue text, part text, by_run_at boolean, batch integer,
                                       new_group uuid, lease interval, min_jobs integer,
                                       max_wait_for interval)
RETURNS TABLE (group_id uuid, id bigint, payload jsonb, attempts integer, partition text,
               staged_at timestamptz)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT jobbuf.partition_claimable(queue, part) THEN
        RETURN;  -- nothing to take: no slot is locked for it
    END IF;
    IF NOT jobbuf.try_claim_lock(queue, part) THEN
        RETURN;  -- another claim of this partition (or of one sharing its slot) is deciding
    END IF;
    -- A statement of its own, so that its snapshot is taken after the lock is held: it sees
    -- the group of a claim that committed just before (the rule re-checked, as above).
    IF jobbuf.partition_in_flight(queue, part) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE jobbuf.claim_statement(true, by_run_at)
        USING queue, batch, part, new_group, lease, min_jobs, max_wait_for;
END $$;

-- Moves to jobbuf.dead the jobs of the queue whose lease expired for the last allowed time
-- (attempts + 1 >= max_attempts), so that no claim hands them out again. Skips locked rows.
CREATE FUNCTION jobbuf.bury_abandoned(q jobbuf.queues)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH abandoned AS (
        SELECT j.id FROM jobbuf.jobs j
        WHERE j.queue = q.name AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
          AND j.attempts + 1 >= coalesce((q.options->>'max_attempts')::integer, 25)
        FOR UPDATE SKIP LOCKED
    ), buried AS (
        DELETE FROM jobbuf.jobs j USING abandoned a WHERE j.id = a.id
        RETURNING j.*
    )
    INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at, attempts,
                             last_error, errors, origin, owner)
    SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at, b.attempts + 1,
           'lease expired',
           CASE WHEN b.last_error IS NULL THEN '[]'::jsonb
                ELSE pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', NULL, 'attempt', b.attempts, 'error', jobbuf.bounded_error(b.last_error))) END
           || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', pg_catalog.now(), 'attempt', b.attempts + 1, 'error', 'lease expired')),
           b.origin, b.owner
    FROM buried b
    ON CONFLICT (id) DO NOTHING;
$$;

-- The claim itself, for any queue (see "Who claims" above): jobbuf_claim for consumers, and the
-- worker for group delivery. q is the queue's row (jobbuf.known_queue).
CREATE FUNCTION jobbuf.claim(q jobbuf.queues, batch_size integer, partition_key text)
RETURNS TABLE (group_id uuid, id bigint, payload jsonb, attempts integer, partition text,
               staged_at timestamptz)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wanted_partition constant text := partition_key;
    batch integer := batch_size;
    by_run_at boolean;
    lease interval;
    min_jobs integer;
    max_wait_for interval;
    max_groups integer;
    new_group uuid;
    candidate record;
    -- The bounds of a claim without partition key (see "Bounded claims" above).
    probe_jobs constant integer := 1000;
    probe_partitions constant integer := 64;
    start_key text;
    from_key text;
    tried integer := 0;
BEGIN
    IF batch IS NULL THEN
        batch := coalesce((q.options->>'batch_size')::integer, 100);
    ELSIF batch < 1 OR batch > 100000 THEN
        RAISE EXCEPTION 'jobbuf: batch_size must be between 1 and 100000, not %', batch
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL to use the queue''s option batch_size (default 100)';
    END IF;
    IF q.paused THEN
        RETURN;
    END IF;
    by_run_at := coalesce(q.options->>'order', 'id') = 'run_at';
    lease := pg_catalog.make_interval(secs => coalesce((q.options->>'visibility')::integer, 300));
    min_jobs := least(coalesce((q.options->>'min_batch')::integer, 1), batch);
    max_wait_for := pg_catalog.make_interval(secs => (q.options->>'max_wait')::float8);
    max_groups := (q.options->>'max_in_flight')::integer;
    new_group := pg_catalog.gen_random_uuid();
    PERFORM jobbuf.bury_abandoned(q);

    IF max_groups IS NOT NULL THEN
        IF NOT jobbuf.try_claim_lock(q.name, NULL) THEN
            RETURN;  -- another claim of this queue is deciding right now
        END IF;
        IF (SELECT pg_catalog.count(DISTINCT j.group_id) FROM jobbuf.jobs j
            WHERE j.queue = q.name AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()) >= max_groups THEN
            RETURN;
        END IF;
    END IF;

    IF wanted_partition IS NOT NULL THEN
        RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, wanted_partition, by_run_at, batch,
                                                          new_group, lease, min_jobs, max_wait_for);
        RETURN;
    END IF;

    -- Bounded (see "Bounded claims" above): the partitions of the oldest ready jobs first.
    FOR candidate IN EXECUTE jobbuf.claim_candidates_statement(by_run_at)
                     USING q.name, probe_jobs, probe_partitions LOOP
        IF candidate.part IS NULL THEN
            RETURN QUERY EXECUTE jobbuf.claim_statement(false, by_run_at)
                USING q.name, batch, NULL::text, new_group, lease, min_jobs, max_wait_for;
        ELSE
            RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, candidate.part, by_run_at, batch,
                                                              new_group, lease, min_jobs, max_wait_for);
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
    -- Then partitions in key order from a random one's, wrapping around to the first.
    start_key := jobbuf.random_partition(q.name);
    IF start_key IS NULL THEN
        RETURN;
    END IF;
    FOREACH from_key IN ARRAY ARRAY[start_key, ''] LOOP
        EXIT WHEN tried >= probe_partitions;
        FOR candidate IN EXECUTE jobbuf.partitions_from_statement()
                         USING q.name, from_key, probe_partitions - tried LOOP
            EXIT WHEN from_key = '' AND candidate.part >= start_key;  -- wrapped around
            tried := tried + 1;
            RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, candidate.part, by_run_at, batch,
                                                              new_group, lease, min_jobs, max_wait_for);
            IF FOUND THEN
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END $$;

-- Claims a group of a queue with target none (see the header of this file).
CREATE FUNCTION jobbuf_claim(queue text, batch_size integer DEFAULT NULL, partition_key text DEFAULT NULL)
RETURNS TABLE (group_id uuid, id bigint, payload jsonb, attempts integer, partition text,
               staged_at timestamptz)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q constant jobbuf.queues := jobbuf.known_queue(queue);
BEGIN
    IF q.target <> 'none' THEN
        RAISE EXCEPTION 'jobbuf: queue % is delivered to Redis by the worker (target %); it cannot be claimed',
                        pg_catalog.quote_literal(q.name), q.target
            USING ERRCODE = 'wrong_object_type',
                  HINT = CASE WHEN q.options->>'delivery' = 'group'
                              THEN 'the worker claims its groups and pushes their ids to Redis; read a group with jobbuf_group(group_id) and finish it with jobbuf_complete or jobbuf_fail'
                              ELSE 'its consumers read Redis; jobbuf_claim serves queues created with target none' END;
    END IF;
    RETURN QUERY SELECT * FROM jobbuf.claim(q, batch_size, partition_key);
END $$;
-- jobbuf: what a batch consumer does with the group it claimed (41_claim.sql): complete it,
-- fail it, extend its lease, read its jobs.

-- Deletes the group's jobs (all, or those in ids), or moves them to jobbuf.archive when the
-- queue has archive = true, in one statement. Counts only jobs that still carry group_id.
CREATE FUNCTION jobbuf_complete(group_id uuid, ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gid constant uuid := jobbuf.checked_group_id(group_id);
    only_ids constant bigint[] := ids;
    done integer;
BEGIN
    WITH gone AS (
        DELETE FROM jobbuf.jobs j
        WHERE j.group_id = gid AND (only_ids IS NULL OR j.id = ANY (only_ids))
        RETURNING j.id, j.queue, j.payload, j.partition_key, j.unique_key, j.staged_at, j.attempts
    ), archived AS (
        INSERT INTO jobbuf.archive (id, queue, payload, partition_key, unique_key, staged_at, attempts)
        SELECT g.id, g.queue, g.payload, g.partition_key, g.unique_key, g.staged_at, g.attempts
        FROM gone g JOIN jobbuf.queues q ON q.name = g.queue
        WHERE coalesce((q.options->>'archive')::boolean, false)
    )
    SELECT count(*) INTO done FROM gone;
    RETURN done;
END $$;

-- Fails the group's jobs (all, or those in ids) that still carry group_id, in one statement:
--  * attempts + 1 and last_error = error (at most 8,192 characters, see jobbuf.bounded_error);
--  * at max_attempts (default 25) the job moves to jobbuf.dead. Its `errors` holds what is known
--    without a history column on jobbuf.jobs: the previous error (last_error, its attempt number,
--    "at" null: its time was not kept) and the final one with its time: [{at, attempt, error}...];
--  * otherwise the job is released (group_id and lease_until NULL) to run again at
--    now() + backoff, backoff = least(backoff_max, backoff_base * 2^(attempts - 1)) seconds
--    (attempts counting this failure; defaults 1 and 3600), times a jitter factor drawn
--    uniformly from [0.75, 1]: retries of a failed batch spread out, and backoff_max stays
--    a true maximum;
--  * unique_key: a released job re-enters jobs_unique_waiting. If another job with the same
--    (queue, unique_key) is waiting by then (staged after this one was claimed), the waiting job
--    wins and the failed one is dropped: the waiting job does the same work, which is what a
--    unique key promises. Of several failed jobs with one key the one with the highest id stays.
--    A concurrent stager of the key is caught by the index (unique_violation), and the
--    statement is retried, then seeing the new job.
-- Returns how many jobs it handled (released, dead-lettered or dropped).
CREATE FUNCTION jobbuf_fail(group_id uuid, error text, ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gid constant uuid := jobbuf.checked_group_id(group_id);
    message constant text := jobbuf.bounded_error(error);
    only_ids constant bigint[] := ids;
    handled integer;
    retries integer := 0;
    violated text;
BEGIN
    IF message IS NULL THEN
        RAISE EXCEPTION 'jobbuf: the error of a failed group must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'pass a message saying why the jobs failed; it is kept in last_error';
    END IF;
    LOOP
        BEGIN
            WITH failing AS MATERIALIZED (
                SELECT j.id, j.queue, j.unique_key, j.attempts + 1 AS attempt,
                       j.attempts + 1 >= coalesce((q.options->>'max_attempts')::integer, 25) AS dies,
                       least(coalesce((q.options->>'backoff_max')::float8, 3600),
                             coalesce((q.options->>'backoff_base')::float8, 1)
                             * power(2::float8, least(j.attempts, 60))) AS delay
                FROM jobbuf.jobs j JOIN jobbuf.queues q ON q.name = j.queue
                WHERE j.group_id = gid AND (only_ids IS NULL OR j.id = ANY (only_ids))
                FOR UPDATE OF j
            ), counted AS (
                -- consumer_failed_total (30_inspection.sql): a row of this call's own, no shared counter
                INSERT INTO jobbuf.consumer_failures (queue, failed)
                SELECT f.queue, count(*) FROM failing f GROUP BY f.queue
            ), buried AS (
                DELETE FROM jobbuf.jobs j USING failing f
                WHERE j.id = f.id AND f.dies
                RETURNING j.id, j.queue, j.payload, j.partition_key, j.unique_key, j.staged_at,
                          f.attempt, j.last_error AS previous_error, j.origin, j.owner
            ), dead_letters AS (
                INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at,
                                         attempts, last_error, errors, origin, owner)
                SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at,
                       b.attempt, message,
                       CASE WHEN b.previous_error IS NULL THEN '[]'::jsonb
                            ELSE jsonb_build_array(jsonb_build_object(
                                'at', NULL, 'attempt', b.attempt - 1, 'error', jobbuf.bounded_error(b.previous_error))) END
                       || jsonb_build_array(jsonb_build_object(
                                'at', now(), 'attempt', b.attempt, 'error', message)),
                       b.origin, b.owner
                FROM buried b
            ), superseded AS MATERIALIZED (
                SELECT f.id FROM failing f
                WHERE NOT f.dies AND f.unique_key IS NOT NULL
                  AND (EXISTS (SELECT 1 FROM jobbuf.jobs w
                               WHERE w.queue = f.queue AND w.unique_key = f.unique_key
                                 AND w.group_id IS NULL)
                       OR EXISTS (SELECT 1 FROM failing o
                                  WHERE NOT o.dies AND o.queue = f.queue
                                    AND o.unique_key = f.unique_key AND o.id > f.id))
            ), dropped AS (
                DELETE FROM jobbuf.jobs j USING superseded s WHERE j.id = s.id
                RETURNING j.id
            ), released AS (
                UPDATE jobbuf.jobs j
                SET attempts = f.attempt, last_error = message, group_id = NULL, lease_until = NULL,
                    run_at = now() + make_interval(secs => f.delay * (0.75 + 0.25 * random()))
                FROM failing f
                WHERE j.id = f.id AND NOT f.dies AND f.id NOT IN (SELECT s.id FROM superseded s)
                RETURNING j.id
            )
            SELECT (SELECT count(*) FROM buried) + (SELECT count(*) FROM dropped)
                   + (SELECT count(*) FROM released)
            INTO handled;
            RETURN handled;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
            retries := retries + 1;
            IF violated IS DISTINCT FROM 'jobs_unique_waiting' OR retries > 5 THEN
                RAISE;
            END IF;
            -- A job with the same unique_key was staged concurrently and has committed; the
            -- next attempt sees it and drops the failed duplicate.
        END;
    END LOOP;
END $$;

-- Heartbeat: extends the group's lease to at least now() + seconds (default: the queue's
-- visibility). False when the group no longer holds a lease (expired, re-claimed, completed).
CREATE FUNCTION jobbuf_extend(group_id uuid, seconds integer DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gid constant uuid := jobbuf.checked_group_id(group_id);
    secs constant integer := seconds;
BEGIN
    IF secs IS NOT NULL AND secs < 1 THEN
        RAISE EXCEPTION 'jobbuf: a lease must be extended by at least 1 second, not %', secs
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL to extend by the queue''s option visibility (default 300)';
    END IF;
    UPDATE jobbuf.jobs j
    SET lease_until = greatest(j.lease_until,
        now() + make_interval(secs => coalesce(secs, (q.options->>'visibility')::integer, 300)))
    FROM jobbuf.queues q
    WHERE q.name = j.queue AND j.group_id = gid AND j.lease_until > now();
    RETURN FOUND;
END $$;

-- The jobs of a group that still holds its lease, in id order (empty for an unknown, expired,
-- re-claimed or finished group).
CREATE FUNCTION jobbuf_group(group_id uuid)
RETURNS TABLE (id bigint, payload jsonb, attempts integer)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gid constant uuid := jobbuf.checked_group_id(group_id);
BEGIN
    RETURN QUERY
        SELECT j.id, j.payload, j.attempts FROM jobbuf.jobs j
        WHERE j.group_id = gid AND j.lease_until > now()
        ORDER BY j.id;
END $$;
-- jobbuf: dead letters and the archive: retry or purge dead jobs, purge completed ones.

-- Deletes the rows of `tbl` (jobbuf.dead or jobbuf.archive) of the queue whose `stamp` column
-- is more than older_than ago (NULL: all of them); returns how many. Raises "unknown queue"
-- unless the queue exists or still has rows there (dead letters and archived jobs outlive a
-- dropped queue and must stay purgeable).
CREATE FUNCTION jobbuf.purge_rows(queue text, tbl regclass, stamp text, older_than interval)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    leftovers boolean;
    purged integer;
BEGIN
    PERFORM jobbuf.checked_queue_name(queue);
    IF older_than < interval '0' THEN
        RAISE EXCEPTION 'jobbuf: older_than must not be negative, not %', older_than
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL to purge every row of the queue';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM jobbuf.queues q WHERE q.name = queue) THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s t WHERE t.queue = $1)', tbl) INTO leftovers USING queue;
        IF NOT leftovers THEN
            RAISE EXCEPTION 'jobbuf: unknown queue %', quote_literal(queue)
                USING ERRCODE = 'undefined_object',
                      HINT = 'no such queue, and no rows of it are left in ' || tbl::text;
        END IF;
    END IF;
    EXECUTE format('DELETE FROM %s t WHERE t.queue = $1 AND ($2::interval IS NULL OR t.%I < now() - $2)',
                   tbl, stamp)
        USING queue, older_than;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END $$;

-- Moves dead jobs of the queue (all, or those in ids) back to jobbuf.jobs with the same id,
-- origin and owner (a dead letter restored from a dump comes back held: docs/copies.md),
-- attempts 0, run_at now() and their last error; returns how many moved. The move goes through
-- the staging trigger (validation, worker wake-up) and through jobs_unique_waiting: a dead job
-- whose unique_key is held by a waiting job stays dead (the waiting job does the same work), and
-- of several dead jobs with one key only the one with the highest id moves.
CREATE FUNCTION jobbuf_retry_dead(queue text, ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q constant jobbuf.queues := jobbuf.known_queue(queue);
    only_ids constant bigint[] := ids;
    moved integer;
BEGIN
    WITH picked AS MATERIALIZED (
        SELECT d.* FROM jobbuf.dead d
        WHERE d.queue = q.name AND (only_ids IS NULL OR d.id = ANY (only_ids))
        ORDER BY d.id DESC
        FOR UPDATE
    ), revived AS (
        INSERT INTO jobbuf.jobs AS j (id, queue, payload, run_at, unique_key, partition_key,
                                      staged_at, attempts, last_error, origin, owner)
        SELECT p.id, p.queue, p.payload, now(), p.unique_key, p.partition_key, p.staged_at, 0,
               p.last_error, p.origin, p.owner
        FROM picked p ORDER BY p.id DESC
        ON CONFLICT DO NOTHING
        RETURNING j.id
    ), removed AS (
        DELETE FROM jobbuf.dead d USING revived r WHERE d.id = r.id RETURNING d.id
    )
    SELECT count(*) INTO moved FROM removed;
    RETURN moved;
END $$;

-- Deletes dead jobs of the queue that died more than older_than ago (NULL: all of them).
CREATE FUNCTION jobbuf_purge_dead(queue text, older_than interval DEFAULT NULL)
RETURNS integer LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT jobbuf.purge_rows(queue, 'jobbuf.dead', 'died_at', older_than);
$$;

-- Deletes archived jobs of the queue completed more than older_than ago (NULL: all of them).
CREATE FUNCTION jobbuf_purge_archive(queue text, older_than interval)
RETURNS integer LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT jobbuf.purge_rows(queue, 'jobbuf.archive', 'completed_at', older_than);
$$;
-- jobbuf: copies of a database (docs/copies.md). Jobs whose owner is not this installation's
-- identity are held: restored from a dump, copied by CREATE DATABASE ... TEMPLATE, applied by
-- logical replication. The worker and claims skip them; an administrator adopts or deletes them.

-- The queue named, or every queue when NULL (an unknown name is an error, as everywhere).
CREATE FUNCTION jobbuf.held_jobs_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT j.id FROM jobbuf.jobs j
    WHERE j.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR j.queue OPERATOR(pg_catalog.=) (jobbuf.known_queue($1)).name);
$$;

-- The held dead letters (jobbuf.dead) of the queue named, or of every queue when NULL.
CREATE FUNCTION jobbuf.held_dead_letters_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT d.id FROM jobbuf.dead d
    WHERE d.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR d.queue OPERATOR(pg_catalog.=) $1);
$$;

-- Adopts the held jobs of the queue (all queues when NULL): they are delivered or claimed like
-- jobs staged here, keeping their ids, their origin (so consumers see the ids the original
-- installation gave them, and can tell a job they already ran) and every other column. The
-- queue's held dead letters are adopted with them (jobbuf_retry_dead then stages them as this
-- installation's). Returns the number of jobs and dead letters adopted.
CREATE FUNCTION jobbuf_release_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    released bigint;
    dead_letters bigint;
BEGIN
    UPDATE jobbuf.jobs j SET owner = jobbuf.installation_id()
    FROM jobbuf.held_jobs_of(jobbuf_release_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS released = ROW_COUNT;
    IF released OPERATOR(pg_catalog.>) 0 THEN
        -- A statement on jobbuf.queues wakes the worker when this transaction commits.
        UPDATE jobbuf.queues SET paused = paused WHERE false;
    END IF;
    UPDATE jobbuf.dead d SET owner = jobbuf.installation_id()
    FROM jobbuf.held_dead_letters_of(jobbuf_release_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    RETURN released OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Deletes the held jobs and held dead letters of the queue (all queues when NULL); returns how many.
CREATE FUNCTION jobbuf_discard_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    discarded bigint;
    dead_letters bigint;
BEGIN
    DELETE FROM jobbuf.jobs j USING jobbuf.held_jobs_of(jobbuf_discard_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS discarded = ROW_COUNT;
    DELETE FROM jobbuf.dead d USING jobbuf.held_dead_letters_of(jobbuf_discard_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    RETURN discarded OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Gives this installation a new identity (superusers only): for a clone of a cluster
-- (pg_basebackup, a disk snapshot, a standby promoted while its primary still runs) that is meant
-- to live beside its original. Every job staged before becomes held (it is a copy of one the
-- original delivers); jobs staged afterwards carry the new identity, and the worker uses a
-- delivery marker of its own. Returns the new identity.
CREATE FUNCTION jobbuf_reset_identity()
RETURNS uuid LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    -- A statement on jobbuf.queues makes the worker reload when this commits, reading the new
    -- identity (its lease, marker and connection name follow it).
    UPDATE jobbuf.queues SET paused = paused WHERE false;
    UPDATE jobbuf.installation
    SET id = pg_catalog.gen_random_uuid(), created_at = pg_catalog.now(),
        database_oid = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
    RETURNING id;
$$;
-- jobbuf: the privilege model. Four group roles (cluster-wide, NOLOGIN; created if missing,
-- left in place by DROP EXTENSION); grant them to your login roles:
--   jobbuf_producer  stage jobs: jobbuf_stage, or INSERT INTO jobbuf.jobs (the staging columns only)
--   jobbuf_consumer  batch consumers: jobbuf_claim / complete / fail / extend / group
--   jobbuf_admin     queues and dead letters: create / alter / drop / pause / resume queues,
--                    retry / purge dead letters, purge the archive; reads every jobbuf table
--   jobbuf_monitor   monitoring (a Prometheus exporter, docs/operations.md): the inspection
--                    functions only; no table, no job payload
-- All four may call the inspection functions: jobbuf_stats(), jobbuf_queue_metrics(),
-- jobbuf_worker_status() and the exporter's jobbuf_prometheus_queues() / _worker(). They show
-- this database's queues (the tables of the database they run in); jobbuf_worker_status()
-- shows other databases' errors and counters only to superusers and pg_monitor.
-- Nothing is executable by PUBLIC.
-- Consumer, admin and inspection functions are SECURITY DEFINER with a pinned search_path, so
-- those roles need no privilege on the tables themselves.
-- This script runs as a superuser with the extension's schema (normally public, where the
-- database owner may create functions) first in search_path: every call below is qualified,
-- so that no function a database owner planted there can run with the installer's rights.

DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['jobbuf_producer', 'jobbuf_consumer', 'jobbuf_admin', 'jobbuf_monitor'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) role_name) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', role_name);
        END IF;
    END LOOP;
END $$;

DO $$
DECLARE
    fn regprocedure;
    name text;
    consumer_functions constant text[] := ARRAY['jobbuf_claim', 'jobbuf_complete', 'jobbuf_fail',
        'jobbuf_extend', 'jobbuf_group'];
    admin_functions constant text[] := ARRAY['jobbuf_create_queue', 'jobbuf_alter_queue',
        'jobbuf_drop_queue', 'jobbuf_pause', 'jobbuf_resume', 'jobbuf_retry_dead',
        'jobbuf_purge_dead', 'jobbuf_purge_archive', 'jobbuf_release_restored', 'jobbuf_discard_restored'];
    inspection_functions constant text[] := ARRAY['jobbuf_stats', 'jobbuf_worker_status',
        'jobbuf_queue_metrics', 'jobbuf_prometheus_queues', 'jobbuf_prometheus_worker'];
BEGIN
    FOR fn, name IN
        SELECT p.oid::regprocedure, p.proname
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d
          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
         AND d.objid OPERATOR(pg_catalog.=) p.oid
        JOIN pg_catalog.pg_extension e
          ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
         AND d.refobjid OPERATOR(pg_catalog.=) e.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'
        WHERE e.extname OPERATOR(pg_catalog.=) 'jobbuf'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        IF name OPERATOR(pg_catalog.=) 'jobbuf_stage' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_producer', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (consumer_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_consumer', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (admin_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_admin', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (inspection_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor', fn);
        END IF;
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA jobbuf TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- The default of jobbuf.jobs.origin and owner runs as whoever inserts (producers; consumers
-- see the identity in every job id anyway).
GRANT EXECUTE ON FUNCTION jobbuf.installation_id() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- Producers stage through jobbuf_stage (invoker's rights) or a plain INSERT: both need INSERT on
-- the staging columns, the sequence, SELECT of the id (RETURNING) and of the queue metadata that
-- the validation trigger reads. They cannot read or change other jobs.
GRANT INSERT (queue, payload, run_at, unique_key, partition_key) ON jobbuf.jobs TO jobbuf_producer;
GRANT SELECT (id) ON jobbuf.jobs TO jobbuf_producer;
GRANT USAGE ON SEQUENCE jobbuf.jobs_id_seq TO jobbuf_producer;
GRANT SELECT ON jobbuf.queues TO jobbuf_producer;

GRANT SELECT ON ALL TABLES IN SCHEMA jobbuf TO jobbuf_admin;
-- jobbuf: the framework queue lookup the clients (clients/node, clients/python, clients/ruby) call
-- to turn a job framework's queue name into the jobbuf queue that delivers into it. It comes after
-- 90_privileges.sql because it grants to the roles that file creates.

-- jobbuf_queue_for(target, framework_queue): the jobbuf queue whose target is `target` and whose
-- framework queue equals `framework_queue`: the sidekiq_queue / bullmq_queue option (default the
-- jobbuf queue's name) or the celery_queue option (default "celery", where the worker delivers a
-- celery queue without that option). When several jobbuf queues deliver into it, the one named
-- like the framework queue wins; otherwise that is an error, as is no queue at all (naming the
-- jobbuf_create_queue call to make). Invoker's rights: it reads jobbuf.queues, which producers may.
CREATE FUNCTION jobbuf_queue_for(target text, framework_queue text)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    option_name text;
    found text[];
    create_call text;
BEGIN
    option_name := CASE target WHEN 'sidekiq' THEN 'sidekiq_queue' WHEN 'bullmq' THEN 'bullmq_queue'
                               WHEN 'celery' THEN 'celery_queue' END;
    IF option_name IS NULL THEN
        RAISE EXCEPTION 'jobbuf: jobbuf_queue_for knows the targets sidekiq, bullmq and celery, not %',
            coalesce(pg_catalog.quote_literal(target), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF framework_queue IS NULL OR framework_queue OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'jobbuf: a % queue name must not be empty', target
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT pg_catalog.array_agg(q.name ORDER BY q.name) INTO found
      FROM jobbuf.queues q
     WHERE q.target OPERATOR(pg_catalog.=) target
       AND COALESCE(q.options OPERATOR(pg_catalog.->>) option_name,
                               CASE WHEN target OPERATOR(pg_catalog.=) 'celery' THEN 'celery' ELSE q.name END)
           OPERATOR(pg_catalog.=) framework_queue;
    IF found IS NULL THEN
        create_call := pg_catalog.format('SELECT jobbuf_create_queue(%L, %L%s);', framework_queue, target,
            CASE WHEN target OPERATOR(pg_catalog.=) 'celery' AND framework_queue OPERATOR(pg_catalog.<>) 'celery'
                 THEN pg_catalog.format(', %L', pg_catalog.jsonb_build_object('celery_queue', framework_queue)::text)
                 ELSE '' END);
        RAISE EXCEPTION 'jobbuf: no jobbuf queue delivers into the % queue "%": create one (in a migration) with %',
            target, framework_queue, create_call
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('a %s queue delivers into the %s queue named by its %s option (default %s)',
                      target, target, option_name,
                      CASE WHEN target OPERATOR(pg_catalog.=) 'celery' THEN '"celery"' ELSE 'the jobbuf queue''s name' END);
    END IF;
    IF pg_catalog.cardinality(found) OPERATOR(pg_catalog.=) 1 THEN
        RETURN found[1];
    END IF;
    IF framework_queue OPERATOR(pg_catalog.=) ANY (found) THEN
        RETURN framework_queue;
    END IF;
    RAISE EXCEPTION 'jobbuf: % jobbuf queues deliver into the % queue "%": %', pg_catalog.cardinality(found),
        target, framework_queue, pg_catalog.array_to_string(found, ', ')
        USING ERRCODE = 'ambiguous_parameter',
              HINT = 'stage with jobbuf_stage and the jobbuf queue''s name, or rename one jobbuf queue like the framework queue';
END $$;

REVOKE ALL ON FUNCTION jobbuf_queue_for(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_queue_for(text, text) TO jobbuf_producer, jobbuf_admin;
-- jobbuf: jobbuf_cluster_nodes(), the nodes of the Redis Cluster this database's jobbuf.redis_url
-- names, asked of the cluster at the call: one row per node and slot range (a replica shows its
-- master's ranges; a node without slots one row with NULL slots). For jobbuf_admin (node
-- addresses are not for every role). See docs/cluster.md.
CREATE FUNCTION jobbuf_cluster_nodes(
    OUT node text, OUT node_id text, OUT role text, OUT health text,
    OUT slot_first integer, OUT slot_last integer)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 12 AS 'MODULE_PATHNAME', 'jobbuf_cluster_nodes';
REVOKE ALL ON FUNCTION jobbuf_cluster_nodes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_cluster_nodes() TO jobbuf_admin;

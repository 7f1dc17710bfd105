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
-- queue metadata that every staging backend caches.
CREATE TABLE jobbuf.queue_stats (
    queue            text PRIMARY KEY REFERENCES jobbuf.queues (name) ON DELETE CASCADE,
    delivered_total  bigint NOT NULL DEFAULT 0,
    failed_total     bigint NOT NULL DEFAULT 0,
    last_error       text,
    last_error_at    timestamptz,
    last_delivery_at timestamptz
);

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
    lease_until   timestamptz
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
-- so the generic plan always walks jobs_waiting (queue, id).
ALTER TABLE jobbuf.jobs ALTER COLUMN queue SET (n_distinct = 100);
COMMENT ON TABLE jobbuf.jobs IS 'jobs waiting for delivery or claimed by a consumer; INSERT (queue, payload[, run_at, unique_key, partition_key]) is the same as jobbuf_stage';

-- Indexes: the table is write-heavy (every job is inserted once and deleted once), so it carries
-- only what the hot queries need, and partial indexes keep each one small: a waiting job is in
-- jobs_waiting (plus the two partial ones below if it has a unique or partition key); a claimed
-- job is only in jobs_group and jobs_leased. Claiming moves a row from the first set to the
-- second, and completing deletes it.
--  * jobs_pkey (id): deletes and updates by id (the worker, jobbuf_complete, jobbuf_fail).
--  * jobs_waiting (queue, id) WHERE group_id IS NULL: the worker's drain and jobbuf_claim take the
--    oldest unclaimed jobs of one queue in id order (LIMIT n FOR UPDATE SKIP LOCKED reads only
--    the head of the index); claimed jobs leave this index.
--  * jobs_unique_waiting: at most one waiting job per (queue, unique_key); the arbiter of
--    jobbuf_stage's ON CONFLICT DO NOTHING, which makes the check race-free.
--  * jobs_partition_waiting (queue, partition_key, id), waiting jobs that have a partition key:
--    a claim for one partition reads that partition's oldest jobs directly, and a claim without
--    a partition key finds the distinct partitions by a skip scan (one probe per partition, not
--    one row per job). Jobs without a partition key (most queues) are not in it and cost nothing.
--  * jobs_group (group_id), claimed jobs: jobbuf_complete / fail / extend / group find a group.
--  * jobs_leased (queue, lease_until), claimed jobs: jobbuf_claim finds expired leases
--    (lease_until <= now()) to re-claim, and the groups in flight (lease_until > now()) for
--    max_in_flight and for the one-group-per-partition rule. Only claimed jobs are in it.
-- Not indexed on purpose: run_at. Jobs due later stay in jobs_waiting and are filtered on the heap;
-- queues with option order = run_at sort their waiting jobs per claim (fine for backlogs of
-- thousands, not millions; an index on (queue, run_at) WHERE group_id IS NULL would serve them
-- at the cost of one more index write per staged job for every queue).
CREATE INDEX jobs_waiting ON jobbuf.jobs (queue, id) WHERE group_id IS NULL;
CREATE UNIQUE INDEX jobs_unique_waiting ON jobbuf.jobs (queue, unique_key)
    WHERE unique_key IS NOT NULL AND group_id IS NULL;
CREATE INDEX jobs_partition_waiting ON jobbuf.jobs (queue, partition_key, id)
    WHERE partition_key IS NOT NULL AND group_id IS NULL;
CREATE INDEX jobs_group ON jobbuf.jobs (group_id) WHERE group_id IS NOT NULL;
CREATE INDEX jobs_leased ON jobbuf.jobs (queue, lease_until) WHERE group_id IS NOT NULL;

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
    died_at       timestamptz NOT NULL DEFAULT now()
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
BEGIN
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'jobbuf: queue options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A JSON null removes an option; anything else replaces it.
    merged := jsonb_strip_nulls(q.options || options);
    UPDATE jobbuf.queues SET options = jobbuf.checked_options(q.target, merged) WHERE name = q.name;
    delivery := coalesce(merged->>'delivery', 'each');
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

-- Every job of jobbuf.jobs is in exactly one of: claimed (its group holds a lease), ready (due and
-- not claimed, or its lease expired: a claim takes it), scheduled (due later). oldest_ready_age
-- counts from when the oldest ready job became ready: greatest(staged_at, run_at).
CREATE FUNCTION jobbuf_stats()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint,
               claimed bigint, dead bigint, oldest_ready_age interval, delivered_total bigint,
               failed_total bigint, last_error text, last_delivery_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH classified AS (
        SELECT j.queue, greatest(j.staged_at, j.run_at) AS ready_since,
               CASE WHEN j.group_id IS NOT NULL AND j.lease_until > now() THEN 'claimed'
                    WHEN j.run_at <= now() THEN 'ready'
                    ELSE 'scheduled' END AS state
        FROM jobbuf.jobs j
    ), waiting AS (
        SELECT c.queue,
               count(*) FILTER (WHERE c.state = 'ready') AS ready,
               count(*) FILTER (WHERE c.state = 'scheduled') AS scheduled,
               count(*) FILTER (WHERE c.state = 'claimed') AS claimed,
               min(c.ready_since) FILTER (WHERE c.state = 'ready') AS oldest_ready
        FROM classified c GROUP BY c.queue
    ), dead AS (
        SELECT d.queue, count(*) AS dead FROM jobbuf.dead d GROUP BY d.queue
    )
    SELECT q.name, q.target, q.paused,
           coalesce(w.ready, 0), coalesce(w.scheduled, 0), coalesce(w.claimed, 0),
           coalesce(d.dead, 0),
           CASE WHEN w.oldest_ready IS NOT NULL THEN now() - w.oldest_ready END,
           coalesce(s.delivered_total, 0), coalesce(s.failed_total, 0),
           s.last_error, s.last_delivery_at
    FROM jobbuf.queues q
    LEFT JOIN waiting w ON w.queue = q.name
    LEFT JOIN dead d ON d.queue = q.name
    LEFT JOIN jobbuf.queue_stats s ON s.queue = q.name
    ORDER BY q.name;
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
-- jobbuf: batch consumers. jobbuf_claim hands out groups of ready jobs under a lease;
-- jobbuf_complete / jobbuf_fail / jobbuf_extend / jobbuf_group act on a group by its id.
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
-- Serialization without waiting: the two rules that span several claims (one group in flight
-- per partition, at most max_in_flight groups per queue) need claimers of the same partition or
-- queue to take turns. They do so with row try-locks (FOR UPDATE SKIP LOCKED) on jobbuf.claim_locks:
-- a claimer that finds the row taken treats the partition (or the queue) as busy — exactly what
-- it is — and moves on (or returns nothing), as SKIP LOCKED does for rows. Each rule is re-checked
-- in a statement that starts after the lock is held, so it sees every claim committed before.
-- The rows belong to one queue each (created with the queue, deleted with it): the queue's own
-- row (max_in_flight) and 256 partition slots (hashtext(partition_key) & 255; a collision only
-- makes a claimer skip a partition for one claim transaction). Only the extension's owner can
-- lock them (row locks need UPDATE on the table, which nobody is granted), and a consumer takes
-- them only through claims of a queue it may claim, so whatever it holds (an open transaction
-- that claimed many partitions) blocks claims of that queue alone: never another queue, never
-- the worker's group delivery (jobbuf_claim refuses the queues the worker delivers). A claim of
-- one partition locks its slot only once it saw a ready job there and no group in flight, so
-- claims of partitions that are empty or made up hold nothing. The common claim (no
-- max_in_flight, jobs without partition key) locks no slot at all.

-- Who claims: jobbuf_claim serves consumers of queues with target none. The jobs of list,
-- stream and sidekiq queues belong to the worker, which pushes them to Redis; a consumer that
-- claimed (and completed) them would take them from their Redis consumers, so jobbuf_claim
-- refuses those queues. Group delivery queues are claimed by the worker itself through
-- jobbuf.claim (the claim without that check, in schema jobbuf, executable by its owner only);
-- their consumers read the group they were sent with jobbuf_group and finish it with
-- jobbuf_complete / jobbuf_fail.

-- The claim slots of each queue: slot -1 is the queue's own (max_in_flight), slots 0-255 its
-- partitions'. Part of the extension, not dumped: the trigger below fills them whenever a queue
-- row is inserted (jobbuf_create_queue, or a backup restoring jobbuf.queues).
CREATE TABLE jobbuf.claim_locks (
    queue text NOT NULL REFERENCES jobbuf.queues (name) ON DELETE CASCADE,
    slot  integer NOT NULL,
    PRIMARY KEY (queue, slot),
    CONSTRAINT claim_locks_slot_range CHECK (slot >= -1 AND slot < 256)
);
COMMENT ON TABLE jobbuf.claim_locks IS 'row locks that serialize the claims of one partition or of one max_in_flight queue: slot -1 is the queue''s own, 0-255 its partitions''; one set per queue, never written but by queue creation';

-- Creates the claim slots of a queue (those it lacks). Run by the trigger below; the extension's
-- owner runs it by hand only to repair a jobbuf.claim_locks that lost rows.
CREATE FUNCTION jobbuf.add_claim_locks(queue_name text)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO jobbuf.claim_locks (queue, slot)
    SELECT queue_name, s.slot FROM pg_catalog.generate_series(-1, 255) s (slot)
    ON CONFLICT DO NOTHING;
$$;

CREATE FUNCTION jobbuf.queue_claim_locks_trigger()
RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM jobbuf.add_claim_locks(NEW.name);
    RETURN NULL;
END $$;
CREATE TRIGGER queues_claim_locks AFTER INSERT ON jobbuf.queues
    FOR EACH ROW EXECUTE FUNCTION jobbuf.queue_claim_locks_trigger();

-- Takes a claim slot of the queue without waiting: the queue's own slot when part is NULL, else
-- the partition's. False when another transaction holds it (or the queue was dropped meanwhile).
-- A slot that does not exist is an error: claims would otherwise stop without a word.
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
       OR NOT EXISTS (SELECT 1 FROM jobbuf.queues q WHERE q.name = queue_name) THEN
        RETURN false;  -- held by another claim, or the queue was dropped meanwhile
    END IF;
    RAISE EXCEPTION 'jobbuf: claim lock % of queue % is missing', wanted, pg_catalog.quote_literal(queue_name)
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'jobbuf.claim_locks lost rows (emptied or edited by hand); claims that need them cannot take turns',
              HINT = 'as the extension''s owner, run: SELECT jobbuf.add_claim_locks(name) FROM jobbuf.queues';
END $$;

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
            WHERE j.queue = $1 AND j.group_id IS NULL AND j.run_at <= pg_catalog.now() AND %1$s
            ORDER BY %2$s LIMIT $2 FOR UPDATE OF j SKIP LOCKED
        ), expired AS MATERIALIZED (
            SELECT j.id, j.run_at, j.staged_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
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

-- The candidates of a claim without partition key, best first: every partition that has a
-- ready job and no group in flight, ranked by its first ready job in queue order, and the
-- unpartitioned jobs (partition_key NULL: they form no partition, have no in-flight limit, and
-- compete by their own first ready job). Partitions are found with a skip scan over
-- jobs_partition_waiting (one index probe per partition), plus those whose only ready jobs are
-- expired leases. $1 is the queue.
CREATE FUNCTION jobbuf.claim_candidates_statement(by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.format($sql$
        WITH RECURSIVE parts (part) AS (
            (SELECT j.partition_key FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.group_id IS NULL AND j.partition_key IS NOT NULL
             ORDER BY j.partition_key LIMIT 1)
          UNION ALL
            SELECT (SELECT j.partition_key FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.group_id IS NULL AND j.partition_key IS NOT NULL
                      AND j.partition_key > p.part
                    ORDER BY j.partition_key LIMIT 1)
            FROM parts p WHERE p.part IS NOT NULL
        ), heads (part, id, run_at) AS (
            SELECT p.part, h.id, h.run_at FROM parts p
            CROSS JOIN LATERAL (
                SELECT j.id, j.run_at FROM jobbuf.jobs j
                WHERE j.queue = $1 AND j.group_id IS NULL AND j.partition_key = p.part
                  AND j.run_at <= pg_catalog.now()
                ORDER BY %1$s LIMIT 1) h
            WHERE p.part IS NOT NULL
          UNION ALL
            SELECT j.partition_key, j.id, j.run_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
              AND j.run_at <= pg_catalog.now()
          UNION ALL
            (SELECT NULL::text, j.id, j.run_at FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.group_id IS NULL AND j.partition_key IS NULL
               AND j.run_at <= pg_catalog.now()
             ORDER BY %1$s LIMIT 1)
        ), live AS (
            SELECT DISTINCT j.partition_key AS part FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()
              AND j.partition_key IS NOT NULL
        ), firsts AS (
            SELECT DISTINCT ON (h.part) h.part, h.id, h.run_at FROM heads h
            WHERE h.part IS NULL OR h.part NOT IN (SELECT l.part FROM live l)
            ORDER BY h.part, %2$s
        )
        SELECT f.part FROM firsts f ORDER BY %3$s
        $sql$,
        jobbuf.claim_order('j', by_run_at),
        jobbuf.claim_order('h', by_run_at),
        jobbuf.claim_order('f', by_run_at));
$$;

-- True when the partition has a group in flight (a lease that has not expired).
CREATE FUNCTION jobbuf.partition_in_flight(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM jobbuf.jobs j
                   WHERE j.queue = $1 AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()
                     AND j.partition_key = $2);
$$;

-- True when a claim of the partition could take something: it has a ready job (waiting and
-- due, or with an expired lease) and no group in flight. Checked before its slot is locked.
CREATE FUNCTION jobbuf.partition_claimable(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (EXISTS (SELECT 1 FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.group_id IS NULL AND j.partition_key = $2
                      AND j.run_at <= pg_catalog.now())
            OR EXISTS (SELECT 1 FROM jobbuf.jobs j
                       WHERE j.queue = $1 AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
                         AND j.partition_key = $2 AND j.run_at <= pg_catalog.now()))
       AND NOT jobbuf.partition_in_flight($1, $2);
$$;

-- Moves to jobbuf.dead the jobs of the queue whose lease expired for the last allowed time
-- (attempts + 1 >= max_attempts), so that no claim hands them out again. Skips locked rows.
CREATE FUNCTION jobbuf.bury_abandoned(q jobbuf.queues)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH abandoned AS (
        SELECT j.id FROM jobbuf.jobs j
        WHERE j.queue = q.name AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
          AND j.attempts + 1 >= coalesce((q.options->>'max_attempts')::integer, 25)
        FOR UPDATE SKIP LOCKED
    ), buried AS (
        DELETE FROM jobbuf.jobs j USING abandoned a WHERE j.id = a.id
        RETURNING j.*
    )
    INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at, attempts,
                             last_error, errors)
    SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at, b.attempts + 1,
           'lease expired',
           CASE WHEN b.last_error IS NULL THEN '[]'::jsonb
                ELSE pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', NULL, 'attempt', b.attempts, 'error', b.last_error)) END
           || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', pg_catalog.now(), 'attempt', b.attempts + 1, 'error', 'lease expired'))
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
            WHERE j.queue = q.name AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()) >= max_groups THEN
            RETURN;
        END IF;
    END IF;

    IF wanted_partition IS NOT NULL THEN
        IF NOT jobbuf.partition_claimable(q.name, wanted_partition) THEN
            RETURN;  -- nothing to take: no slot is locked for it
        END IF;
        IF NOT jobbuf.try_claim_lock(q.name, wanted_partition) THEN
            RETURN;  -- another claim of this partition (or of one sharing its slot) is deciding
        END IF;
        -- A statement of its own, so that its snapshot is taken after the lock is held: it sees
        -- the group of a claim that committed just before (the rule re-checked, as above).
        IF jobbuf.partition_in_flight(q.name, wanted_partition) THEN
            RETURN;
        END IF;
        RETURN QUERY EXECUTE jobbuf.claim_statement(true, by_run_at)
            USING q.name, batch, wanted_partition, new_group, lease, min_jobs, max_wait_for;
        RETURN;
    END IF;

    FOR candidate IN EXECUTE jobbuf.claim_candidates_statement(by_run_at) USING q.name LOOP
        IF candidate.part IS NOT NULL THEN
            CONTINUE WHEN NOT jobbuf.try_claim_lock(q.name, candidate.part);
            CONTINUE WHEN jobbuf.partition_in_flight(q.name, candidate.part);
        END IF;
        RETURN QUERY EXECUTE jobbuf.claim_statement(candidate.part IS NOT NULL, by_run_at)
            USING q.name, batch, candidate.part, new_group, lease, min_jobs, max_wait_for;
        IF FOUND THEN
            RETURN;
        END IF;
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
--  * attempts + 1 and last_error = error;
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
    message constant text := error;
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
            ), buried AS (
                DELETE FROM jobbuf.jobs j USING failing f
                WHERE j.id = f.id AND f.dies
                RETURNING j.id, j.queue, j.payload, j.partition_key, j.unique_key, j.staged_at,
                          f.attempt, j.last_error AS previous_error
            ), dead_letters AS (
                INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at,
                                         attempts, last_error, errors)
                SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at,
                       b.attempt, message,
                       CASE WHEN b.previous_error IS NULL THEN '[]'::jsonb
                            ELSE jsonb_build_array(jsonb_build_object(
                                'at', NULL, 'attempt', b.attempt - 1, 'error', b.previous_error)) END
                       || jsonb_build_array(jsonb_build_object(
                                'at', now(), 'attempt', b.attempt, 'error', message))
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
                                      staged_at, attempts, last_error)
        SELECT p.id, p.queue, p.payload, now(), p.unique_key, p.partition_key, p.staged_at, 0,
               p.last_error
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
-- jobbuf: the privilege model. Three group roles (cluster-wide, NOLOGIN; created if missing,
-- left in place by DROP EXTENSION); grant them to your login roles:
--   jobbuf_producer  stage jobs: jobbuf_stage, or INSERT INTO jobbuf.jobs (the staging columns only)
--   jobbuf_consumer  batch consumers: jobbuf_claim / complete / fail / extend / group
--   jobbuf_admin     queues and dead letters: create / alter / drop / pause / resume queues,
--                    retry / purge dead letters, purge the archive; reads every jobbuf table
-- All three may call jobbuf_stats() and jobbuf_worker_status(). Nothing is executable by PUBLIC.
-- Consumer, admin and inspection functions are SECURITY DEFINER with a pinned search_path, so
-- those roles need no privilege on the tables themselves.
-- This script runs as a superuser with the extension's schema (normally public, where the
-- database owner may create functions) first in search_path: every call below is qualified,
-- so that no function a database owner planted there can run with the installer's rights.

DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['jobbuf_producer', 'jobbuf_consumer', 'jobbuf_admin'] LOOP
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
        'jobbuf_purge_dead', 'jobbuf_purge_archive'];
    inspection_functions constant text[] := ARRAY['jobbuf_stats', 'jobbuf_worker_status'];
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
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_producer, jobbuf_consumer, jobbuf_admin', fn);
        END IF;
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA jobbuf TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- Producers stage through jobbuf_stage (invoker's rights) or a plain INSERT: both need INSERT on
-- the staging columns, the sequence, SELECT of the id (RETURNING) and of the queue metadata that
-- the validation trigger reads. They cannot read or change other jobs.
GRANT INSERT (queue, payload, run_at, unique_key, partition_key) ON jobbuf.jobs TO jobbuf_producer;
GRANT SELECT (id) ON jobbuf.jobs TO jobbuf_producer;
GRANT USAGE ON SEQUENCE jobbuf.jobs_id_seq TO jobbuf_producer;
GRANT SELECT ON jobbuf.queues TO jobbuf_producer;

GRANT SELECT ON ALL TABLES IN SCHEMA jobbuf TO jobbuf_admin;

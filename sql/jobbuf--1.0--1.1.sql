-- jobbuf 1.0 -> 1.1: ALTER EXTENSION jobbuf UPDATE. Every change 1.1 makes to the extension's
-- SQL is made here as well as in src/sql/ (which builds jobbuf--1.1.sql); test/upgrade checks that
-- an updated 1.0 and a fresh 1.1 have the same catalog, and that jobs in every state survive.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.1'" to load this file. \quit

-- First, the library: 1.1's SQL needs the 1.1 library, and a server still running the 1.0 one
-- (the new build installed, Postgres not yet restarted) would run 1.0's worker against 1.1's
-- objects. Only 1.1 and later libraries export jobbuf_library_version, so creating it refuses
-- the update in that case, with what to do. (src/sql/30_inspection.sql)
DO $$
BEGIN
    CREATE FUNCTION jobbuf.library_version()
    RETURNS text LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'jobbuf_library_version';
EXCEPTION WHEN undefined_function THEN
    RAISE EXCEPTION 'jobbuf: the jobbuf library loaded in this server is older than 1.1'
        USING ERRCODE = 'object_not_in_prerequisite_state',
              HINT = 'install the new build, restart PostgreSQL (the library is loaded at server start), then run ALTER EXTENSION jobbuf UPDATE';
END $$;
REVOKE ALL ON FUNCTION jobbuf.library_version() FROM PUBLIC;

-- Claims: serialized by row locks on jobbuf.claim_locks that only the extension's functions can
-- take (instead of advisory locks any role could hold), one set of rows per queue (created with
-- the queue by a trigger, filled here for the queues that exist, deleted with the queue), so that
-- a consumer can hold back only the claims of a queue it may claim; jobbuf_claim refuses queues the worker
-- delivers, whose group claims go through jobbuf.claim (schema jobbuf, owner only); every call
-- on the claim path qualified. (src/sql/40_claim.sql)
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
-- The slots of the queues that exist already.
SELECT jobbuf.add_claim_locks(q.name) FROM jobbuf.queues q;

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

-- ORDER BY list of a claim for the queue's order option, on the relation alias `rel`.
CREATE OR REPLACE FUNCTION jobbuf.claim_order(rel text, by_run_at boolean)
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
CREATE OR REPLACE FUNCTION jobbuf.claim_statement(partitioned boolean, by_run_at boolean)
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
CREATE OR REPLACE FUNCTION jobbuf.claim_candidates_statement(by_run_at boolean)
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
CREATE OR REPLACE FUNCTION jobbuf.partition_in_flight(queue text, part text)
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
CREATE OR REPLACE FUNCTION jobbuf.bury_abandoned(q jobbuf.queues)
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
CREATE OR REPLACE FUNCTION jobbuf_claim(queue text, batch_size integer DEFAULT NULL, partition_key text DEFAULT NULL)
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
-- CREATE OR REPLACE made jobbuf_claim SECURITY INVOKER again; the new internals are the owner's alone.
ALTER FUNCTION jobbuf_claim(text, integer, text) SECURITY DEFINER;
REVOKE ALL ON FUNCTION jobbuf.try_claim_lock(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.add_claim_locks(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.queue_claim_locks_trigger() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.partition_claimable(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.claim(jobbuf.queues, integer, text) FROM PUBLIC;
GRANT SELECT ON jobbuf.claim_locks TO jobbuf_admin;  -- as every jobbuf table (90_privileges.sql)

-- Backups (pg_dump restores the data of configuration tables in the order of the foreign keys
-- between them): jobbuf.jobs references jobbuf.queues, so a dump restores the queues before the
-- jobs that name them (see 00_schema.sql). A 1.0 database may hold jobs of a queue that was
-- dropped while they were staged (a race 1.1 closes): the key could not be added over them, and
-- they were invisible to jobbuf_stats(); they move to the dead letters with the reason, where
-- jobbuf_purge_dead(queue) removes them, or jobbuf_retry_dead(queue) puts them back once a queue
-- of that name exists again.
WITH orphans AS (
    DELETE FROM jobbuf.jobs j
    WHERE NOT EXISTS (SELECT 1 FROM jobbuf.queues q WHERE q.name OPERATOR(pg_catalog.=) j.queue)
    RETURNING j.*
)
INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at, attempts, last_error)
SELECT o.id, o.queue, o.payload, o.partition_key, o.unique_key, o.staged_at, o.attempts,
       'jobbuf 1.1 update: queue ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(o.queue)
           OPERATOR(pg_catalog.||) ' no longer exists'
FROM orphans o;
ALTER TABLE jobbuf.jobs ADD CONSTRAINT jobs_queue_fkey FOREIGN KEY (queue) REFERENCES jobbuf.queues (name);
-- Its check on INSERT is disabled: the staging trigger does that job without a query per job
-- and without locking the queue row (see 00_schema.sql).
DO $$
BEGIN
    EXECUTE (SELECT pg_catalog.format('ALTER TABLE jobbuf.jobs DISABLE TRIGGER %I', t.tgname)
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_constraint k ON k.oid OPERATOR(pg_catalog.=) t.tgconstraint
             WHERE t.tgrelid OPERATOR(pg_catalog.=) 'jobbuf.jobs'::pg_catalog.regclass
               AND k.conname OPERATOR(pg_catalog.=) 'jobs_queue_fkey'
               AND t.tgfoid OPERATOR(pg_catalog.=) 'pg_catalog."RI_FKey_check_ins"'::pg_catalog.regproc);
END $$;

-- Administrative changes lock the queue row FOR NO KEY UPDATE, which does not wait for the
-- transactions that hold it FOR KEY SHARE through that key.
CREATE OR REPLACE FUNCTION jobbuf.locked_queue(queue text)
RETURNS jobbuf.queues LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM jobbuf.queues q WHERE q.name = queue FOR NO KEY UPDATE;
    RETURN jobbuf.known_queue(queue);
END $$;

-- Delivery changes: jobbuf_alter_queue leaves the groups in flight leased and says so in a NOTICE
-- when a queue's delivery mode changes; the worker releases the expired claims of queues with
-- delivery 'each' (claims 1.0 let consumers make on list, stream and sidekiq queues included)
-- and delivers their jobs. (src/sql/10_queues.sql)
-- A change of delivery mode leaves the groups in flight leased, and says so: their consumers
-- may be working on them, and can still read them (jobbuf_group) and finish them
-- (jobbuf_complete, jobbuf_fail). Releasing them at once would deliver their jobs a second time
-- while that work goes on; refusing the change would make it wait for every lease, which a
-- consumer's heartbeat (jobbuf_extend) can prolong forever, and a switch away from group
-- delivery is often made because its consumers fail. A lease that expires is handled the new way:
-- its jobs are claimed again as a group, or released by the worker and delivered one by one.
CREATE OR REPLACE FUNCTION jobbuf_alter_queue(queue text, options jsonb)
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
-- CREATE OR REPLACE made it SECURITY INVOKER again (90_privileges.sql makes it SECURITY DEFINER).
ALTER FUNCTION jobbuf_alter_queue(text, jsonb) SECURITY DEFINER;

-- Job frameworks: the targets bullmq and celery, their options (prefix, bullmq_queue,
-- celery_queue; group_class for all three framework targets). (src/sql/00_schema.sql,
-- src/sql/10_queues.sql)
ALTER TABLE jobbuf.queues DROP CONSTRAINT queues_target_known,
    ADD CONSTRAINT queues_target_known CHECK (target IN ('list', 'stream', 'sidekiq', 'bullmq', 'celery', 'none'));
CREATE OR REPLACE FUNCTION jobbuf.checked_options(target text, options jsonb)
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

-- Every database: jobbuf_worker_status() returns one row per drain worker (one per database),
-- from the library's jobbuf_worker_status_all (the 1.0 symbol keeps 1.0's one-row shape for a
-- database still on 1.0's SQL). Its type changes, so it is created again, with 1.0's privileges
-- (as 90_privileges.sql gives them). (src/sql/30_inspection.sql)
DROP FUNCTION jobbuf_worker_status();
CREATE FUNCTION jobbuf_worker_status(
    OUT pid integer, OUT database text, OUT running boolean, OUT redis_connected boolean,
    OUT last_error text, OUT last_error_at timestamptz, OUT wakeups bigint, OUT batches bigint,
    OUT delivered bigint)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 8 AS 'MODULE_PATHNAME', 'jobbuf_worker_status_all';
ALTER FUNCTION jobbuf_worker_status() SECURITY DEFINER;
REVOKE ALL ON FUNCTION jobbuf_worker_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_worker_status() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- No Redis format carries an infinite time, and 1.1 refuses one when a job is staged or restored
-- (the staging trigger checks every row a dump restores): jobs 1.0 staged with one get the
-- nearest time the worker carries, so that nothing is lost in the next dump and restore.
UPDATE jobbuf.jobs j SET
    run_at = CASE WHEN j.run_at OPERATOR(pg_catalog.>) pg_catalog.now() THEN '9999-12-31 23:59:59+00'::timestamptz
                  ELSE '1970-01-01 00:00:00+00'::timestamptz END
  WHERE NOT pg_catalog.isfinite(j.run_at);
UPDATE jobbuf.jobs j SET staged_at = pg_catalog.now() WHERE NOT pg_catalog.isfinite(j.staged_at);
UPDATE jobbuf.dead d SET staged_at = pg_catalog.now() WHERE NOT pg_catalog.isfinite(d.staged_at);

-- Keep this statement last.
-- Wakes the drain worker when this update commits: a worker running the 1.1 library against 1.0
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;

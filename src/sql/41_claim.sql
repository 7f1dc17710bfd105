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

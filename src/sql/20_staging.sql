-- jobbuf 1.0: staging jobs (jobbuf_stage and plain INSERT), validation and the commit wake-up.

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

CREATE FUNCTION jobbuf_stage(queue text, payload jsonb, run_at timestamptz DEFAULT NULL,
                             unique_key text DEFAULT NULL, partition_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    new_id bigint;
BEGIN
    -- ON CONFLICT DO NOTHING: its only possible arbiter is jobs_unique_waiting, so a second
    -- waiting job with the same unique_key stages nothing and returns NULL; a concurrent
    -- stager of the same key waits for the first one's outcome.
    INSERT INTO jobbuf.jobs AS j (queue, payload, run_at, unique_key, partition_key)
    VALUES (queue, payload, coalesce(run_at, now()), unique_key, partition_key)
    ON CONFLICT DO NOTHING
    RETURNING j.id INTO new_id;
    RETURN new_id;
END $$;

CREATE FUNCTION jobbuf_stage(queue text, payloads jsonb[])
RETURNS SETOF bigint LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO jobbuf.jobs (queue, payload)
    SELECT queue, p.payload FROM unnest(payloads) WITH ORDINALITY AS p (payload, n) ORDER BY p.n
    RETURNING id;
$$;

-- jobbuf_stage('q', '{"a": 1}') with an untyped literal would be ambiguous between the jsonb and
-- jsonb[] forms; this text form wins that resolution (and serves drivers that bind text).
CREATE FUNCTION jobbuf_stage(queue text, payload text)
RETURNS bigint LANGUAGE sql AS $$
    SELECT @extschema@.jobbuf_stage(queue, payload::jsonb);
$$;

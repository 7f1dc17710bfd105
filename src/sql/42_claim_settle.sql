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
                                 AND w.group_id IS NULL AND w.owner = jobbuf.installation_id())
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

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

-- jobbuf: inspection (per-queue statistics, worker status).

-- Every job of jobbuf.jobs that is not held (60_copies.sql) is in exactly one of: claimed (its
-- group holds a lease), ready (due and not claimed, or its lease expired: a claim takes it),
-- scheduled (due later). oldest_ready_age
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
        WHERE j.owner OPERATOR(pg_catalog.=) jobbuf.installation_id()
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

-- jobbuf 1.0: inspection (per-queue statistics, worker status).

CREATE FUNCTION jobbuf_stats()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint,
               claimed bigint, dead bigint, oldest_ready_age interval, delivered_total bigint,
               failed_total bigint, last_error text, last_delivery_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH waiting AS (
        SELECT j.queue,
               count(*) FILTER (WHERE j.run_at <= now() AND (j.group_id IS NULL OR j.lease_until <= now())) AS ready,
               count(*) FILTER (WHERE j.run_at > now() AND j.group_id IS NULL) AS scheduled,
               count(*) FILTER (WHERE j.group_id IS NOT NULL AND j.lease_until > now()) AS claimed,
               min(j.staged_at) FILTER (WHERE j.run_at <= now() AND (j.group_id IS NULL OR j.lease_until <= now())) AS oldest_ready
        FROM jobbuf.jobs j GROUP BY j.queue
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

-- One row: the drain worker's state (counters since the server started).
CREATE FUNCTION jobbuf_worker_status(
    OUT pid integer, OUT database text, OUT running boolean, OUT redis_connected boolean,
    OUT last_error text, OUT last_error_at timestamptz, OUT wakeups bigint, OUT batches bigint,
    OUT delivered bigint)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_worker_status';

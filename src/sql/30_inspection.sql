-- jobbuf: inspection (per-queue statistics, worker status).

-- The census: the worker's count of each queue's jobs, kept in jobbuf.queue_stats so that
-- jobbuf_stats() and jobbuf_queue_metrics() read one row per queue instead of counting jobs.
-- The drain worker walks jobbuf.jobs in steps of jobbuf.census_step between its delivery
-- batches, adds the steps' counts up in its memory and publishes them with
-- jobbuf.publish_census when the walk reaches the end (src/census/queue_census.cpp);
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

-- jobbuf: flow control as an operator sees it (SPEC 1.3, "Flow control at the drain": Visible;
-- docs/flow.md, "What you see"). The drain worker writes the queues it holds back into
-- jobbuf.queue_flow (src/status/queue_flow.cpp): a row when a queue is first held back (the Redis
-- memory guard, max_in_redis, max_rate) or its target is refused by the Redis in use, rewritten at
-- most once a second while it stays held, deleted once no job of it has been held back for 10 s.
-- Its last INFO memory reading of each Redis node it sends to goes into jobbuf.redis_memory at
-- most once a second. Neither is dumped (a restore's worker writes its own), and neither takes
-- rows from logical replication (the subscriber's own worker writes them).
CREATE TABLE jobbuf.queue_flow (
    queue          text PRIMARY KEY,
    state          text NOT NULL CONSTRAINT queue_flow_state_known
                   CHECK (state IN ('redis_memory', 'depth_cap', 'rate_limited', 'stopped')),
    reason         text,
    depth_in_redis bigint,
    waiting_since  timestamptz NOT NULL,
    held_at        timestamptz NOT NULL
);
COMMENT ON TABLE jobbuf.queue_flow IS 'queues the drain worker holds back now or did within the last 10 s (not dumped); read through jobbuf_flow_status()';
CREATE TRIGGER queue_flow_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.queue_flow
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.queue_flow ENABLE ALWAYS TRIGGER queue_flow_not_replicated;

CREATE TABLE jobbuf.redis_memory (
    node          text PRIMARY KEY,
    counted_bytes bigint NOT NULL,
    limit_bytes   bigint,
    held          boolean NOT NULL,
    read_at       timestamptz NOT NULL
);
COMMENT ON TABLE jobbuf.redis_memory IS 'the drain worker''s last INFO memory reading of each Redis node it sends to (not dumped): used_memory - mem_not_counted_for_evict, the limit jobbuf.redis_memory_limit gives (NULL: none applies)';
CREATE TRIGGER redis_memory_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.redis_memory
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.redis_memory ENABLE ALWAYS TRIGGER redis_memory_not_replicated;

-- Per queue the worker pushes to ('none' queues are claimed by consumers, never pushed: left
-- out), what holds its delivery back now. state, first that applies:
--   paused        jobbuf_pause()
--   disabled      jobbuf.enabled is off, or no drain worker runs for this database
--   stopped       the Redis in use refuses its target (reason names why), or the worker is not
--                 connected to Redis: down, refusing the worker, or another cluster holds the
--                 delivery lease (reason: the worker's last_error)
--   redis_memory  its Redis (node) is at jobbuf.redis_memory_limit
--   depth_cap     its jobs in Redis reach max_in_redis
--   rate_limited  max_rate allows no job now
--   flowing       none of these
-- The last three last until no job of the queue has been held back for 10 s; waiting_since is
-- when that spell began (NULL in the other states). depth_in_redis: the depth the worker last
-- read while it held the queue back (NULL otherwise). ready: as of the last census.
CREATE FUNCTION jobbuf_flow_status()
RETURNS TABLE (queue text, state text, reason text, ready bigint, depth_in_redis bigint,
               max_in_redis bigint, max_rate float8, weight integer, waiting_since timestamptz)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH worker AS (
        SELECT coalesce(pg_catalog.bool_or(w.running), false) AS running,
               coalesce(pg_catalog.bool_or(w.running AND w.redis_connected), false) AS connected,
               pg_catalog.max(w.last_error) AS last_error
        FROM @extschema@.jobbuf_worker_status() w
        WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
    ), delivery AS (
        SELECT coalesce(pg_catalog.current_setting('jobbuf.enabled', true), 'on')
               OPERATOR(pg_catalog.<>) ALL (ARRAY['off', 'false', '0', 'no']) AS enabled
    ), shown AS (
        SELECT q.name, q.paused, q.options, c.ready, f.state AS held_state, f.reason AS held_reason,
               f.depth_in_redis, f.waiting_since,
               CASE WHEN q.paused THEN 'paused'
                    WHEN NOT d.enabled OR NOT w.running THEN 'disabled'
                    WHEN f.state OPERATOR(pg_catalog.=) 'stopped' THEN 'stopped'
                    WHEN NOT w.connected THEN 'stopped'
                    ELSE coalesce(f.state, 'flowing') END AS state,
               CASE WHEN q.paused THEN 'paused with jobbuf_pause()'
                    WHEN NOT d.enabled THEN 'jobbuf.enabled is off'
                    WHEN NOT w.running THEN coalesce('no drain worker runs for this database: ' OPERATOR(pg_catalog.||) w.last_error,
                                                     'no drain worker runs for this database')
                    WHEN f.state OPERATOR(pg_catalog.=) 'stopped' THEN f.reason
                    WHEN NOT w.connected THEN coalesce(w.last_error, 'the drain worker is not connected to Redis')
                    ELSE f.reason END AS reason
        FROM jobbuf.queues q
        CROSS JOIN worker w CROSS JOIN delivery d
        LEFT JOIN jobbuf.queue_counters() c ON c.queue OPERATOR(pg_catalog.=) q.name
        LEFT JOIN jobbuf.queue_flow f ON f.queue OPERATOR(pg_catalog.=) q.name
        WHERE q.target OPERATOR(pg_catalog.<>) 'none'
    )
    SELECT s.name, s.state, s.reason, coalesce(s.ready, 0),
           s.depth_in_redis,
           (s.options OPERATOR(pg_catalog.->>) 'max_in_redis')::bigint,
           (s.options OPERATOR(pg_catalog.->>) 'max_rate')::float8,
           coalesce((s.options OPERATOR(pg_catalog.->>) 'weight')::integer, 1),
           CASE WHEN s.state OPERATOR(pg_catalog.=) s.held_state THEN s.waiting_since END
    FROM shown s
    ORDER BY s.name;
$$;

-- The exporter's jobbuf_queue_flow_state (contrib/prometheus/queries.yaml): per queue of
-- jobbuf_flow_status() one row per state, 1 for its state and 0 for the others.
CREATE FUNCTION jobbuf_prometheus_flow()
RETURNS TABLE (datname text, queue text, state text, queue_flow_state integer)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text, f.queue, s.state,
           (f.state OPERATOR(pg_catalog.=) s.state)::integer
    FROM @extschema@.jobbuf_flow_status() f
    CROSS JOIN pg_catalog.unnest(ARRAY['flowing', 'paused', 'disabled', 'stopped', 'redis_memory',
                                       'depth_cap', 'rate_limited']) s(state);
$$;

-- The exporter's jobbuf_redis_memory_ratio: per Redis node (each master of a Cluster) the
-- memory Redis counts against maxmemory divided by the limit the guard enforces, from the
-- worker's last reading; at least 1 while the guard holds delivery to it (it resumes below 0.9);
-- NaN when no limit applies (jobbuf.redis_memory_limit off, or a fraction of a Redis without
-- maxmemory or one that evicts). No row before the first reading.
CREATE FUNCTION jobbuf_prometheus_redis_memory()
RETURNS TABLE (datname text, node text, memory_ratio float8)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text, m.node,
           CASE WHEN m.limit_bytes IS NULL OR m.limit_bytes OPERATOR(pg_catalog.<=) 0 THEN 'NaN'::float8
                WHEN m.held THEN greatest(1.0::float8, m.counted_bytes::float8 OPERATOR(pg_catalog./) m.limit_bytes::float8)
                ELSE m.counted_bytes::float8 OPERATOR(pg_catalog./) m.limit_bytes::float8 END
    FROM jobbuf.redis_memory m
    ORDER BY m.node;
$$;

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
        'bullmq_queue', 'celery_queue', 'max_in_redis', 'max_rate', 'weight', 'fair_by'];
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
        IF k IN ('max_in_redis', 'max_rate') AND target = 'none' THEN
            RAISE EXCEPTION 'jobbuf: option "%" applies only to targets the worker pushes to', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a none queue is claimed with jobbuf_claim: max_in_flight bounds its claimed jobs, min_batch and max_wait its batches';
        END IF;
        IF k = 'max_rate' THEN
            IF kind <> 'number' OR v::numeric <= 0 OR v::numeric > 1000000000 THEN
                RAISE EXCEPTION 'jobbuf: option "max_rate" must be a number of jobs per second above 0 and at most 1000000000, not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k = 'fair_by' THEN
            IF target = 'none' THEN
                RAISE EXCEPTION 'jobbuf: option "fair_by" applies only to targets the worker pushes to'
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'a none queue is claimed with jobbuf_claim, whose partition_key argument claims one partition''s jobs';
            END IF;
            IF kind <> 'string' OR v #>> '{}' <> 'partition_key' THEN
                RAISE EXCEPTION 'jobbuf: option "fair_by" must be "partition_key", not %', v
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'fair_by "partition_key" delivers the oldest job of each partition key in turn';
            END IF;
        ELSIF k = 'weight' THEN
            IF target = 'none' THEN
                RAISE EXCEPTION 'jobbuf: option "weight" applies only to targets the worker pushes to'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF kind <> 'number' OR v::text !~ '^[0-9]+$' OR v::numeric < 1 OR v::numeric > 100 THEN
                RAISE EXCEPTION 'jobbuf: option "weight" must be an integer from 1 to 100, not %', v
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF k IN ('maxlen', 'batch_size', 'max_attempts', 'min_batch', 'max_in_flight', 'visibility', 'max_in_redis') THEN
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
    IF options->>'delivery' = 'group' AND options ? 'fair_by' THEN
        RAISE EXCEPTION 'jobbuf: option fair_by applies to delivery "each" only'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a group queue pushes one message per claimed group';
    END IF;
    IF (options->>'maxlen') IS NOT NULL AND (options->>'max_in_redis') IS NOT NULL
       AND (options->>'maxlen')::bigint < (options->>'max_in_redis')::bigint THEN
        RAISE EXCEPTION 'jobbuf: maxlen (%) cannot be below max_in_redis (%)',
            options->>'maxlen', options->>'max_in_redis'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'the stream would trim jobs its consumers have not read yet';
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

-- if_not_exists makes a migration that creates its queues safe to run twice: a queue that exists
-- with the same target is left as it is (its options are neither compared nor changed: that is
-- jobbuf_alter_queue's job), and a NOTICE says so; one with another target is an error that names
-- both. The arguments are checked either way, so a mistake shows on a database that has the queue
-- as it does on one that does not. The existing row is held FOR KEY SHARE, as a row this
-- transaction created would be: the queue is not dropped under the caller before it commits.
-- (SECURITY DEFINER through 90_privileges.sql: everything is schema-qualified.)
CREATE FUNCTION jobbuf_create_queue(queue text, target text DEFAULT 'list', options jsonb DEFAULT '{}',
                                    if_not_exists boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    checked jsonb;
    existing text;
BEGIN
    PERFORM jobbuf.checked_queue_name(queue);
    checked := jobbuf.checked_options(target, coalesce(options, '{}'));
    LOOP
        INSERT INTO jobbuf.queues (name, target, options)
        VALUES (queue, target, checked)
        ON CONFLICT (name) DO NOTHING;
        IF FOUND THEN
            INSERT INTO jobbuf.queue_stats (queue) VALUES (queue);
            RETURN;
        END IF;
        IF NOT coalesce(if_not_exists, false) THEN
            RAISE EXCEPTION 'jobbuf: queue % already exists', pg_catalog.quote_literal(queue)
                USING ERRCODE = 'duplicate_object',
                      HINT = 'change its options with jobbuf_alter_queue, or pass if_not_exists => true to leave an existing queue as it is';
        END IF;
        SELECT q.target INTO existing FROM jobbuf.queues q
        WHERE q.name OPERATOR(pg_catalog.=) jobbuf_create_queue.queue FOR KEY SHARE;
        -- Not found: dropped since the INSERT met it (and committed); insert again.
        EXIT WHEN FOUND;
    END LOOP;
    IF existing OPERATOR(pg_catalog.<>) target THEN
        RAISE EXCEPTION 'jobbuf: queue % already exists with target %, not %',
            pg_catalog.quote_literal(queue), existing, target
            USING ERRCODE = 'duplicate_object',
                  HINT = 'a queue keeps its target: create the new one under another name, or drop this one (jobbuf_drop_queue) and create it again';
    END IF;
    RAISE NOTICE 'jobbuf: queue % already exists with target %, left as it is', pg_catalog.quote_literal(queue), existing
        USING DETAIL = 'if_not_exists neither compares nor changes its options',
              HINT = 'change its options with jobbuf_alter_queue';
END $$;

-- Checks one job of a queue that switches from delivery 'group' to 'each' against its target, as
-- staging would have: jobs staged under 'group' were not (src/staging/delivery_switch_check.cpp).
CREATE FUNCTION jobbuf.check_each_payload(queue text, target text, id bigint, payload jsonb)
RETURNS void LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'jobbuf_check_each_payload';

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
    waited_lock text;
BEGIN
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'jobbuf: queue options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A JSON null removes an option; anything else replaces it.
    merged := jsonb_strip_nulls(q.options || options);
    UPDATE jobbuf.queues SET options = jobbuf.checked_options(q.target, merged) WHERE name = q.name;
    delivery := coalesce(merged->>'delivery', 'each');
    -- From 'group' to 'each': every job the queue holds (waiting, or in a group whose lease may
    -- expire) becomes a message of its own, so it must suit the target as a staged job does.
    -- Stagers still in progress are waited for (they may have staged under 'group'), at most
    -- 2 s: while this lock waits, every new staging transaction of every queue queues behind it.
    IF q.target OPERATOR(pg_catalog.<>) 'none' AND delivery OPERATOR(pg_catalog.=) 'each'
       AND coalesce(q.options OPERATOR(pg_catalog.->>) 'delivery', 'each') OPERATOR(pg_catalog.=) 'group' THEN
        waited_lock := pg_catalog.current_setting('lock_timeout');
        PERFORM pg_catalog.set_config('lock_timeout', '2s', true);
        BEGIN
            LOCK TABLE jobbuf.jobs IN SHARE ROW EXCLUSIVE MODE;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'jobbuf: queue %: transactions that stage jobs are still open; the switch to delivery each waited 2 s for them', pg_catalog.quote_literal(q.name)
                USING ERRCODE = 'lock_not_available',
                      HINT = 'retry; a session idle in transaction after staging (pg_stat_activity) holds it up';
        END;
        PERFORM pg_catalog.set_config('lock_timeout', waited_lock, true);
        PERFORM jobbuf.check_each_payload(q.name, q.target, j.id, j.payload)
        FROM jobbuf.jobs j WHERE j.queue OPERATOR(pg_catalog.=) q.name ORDER BY j.id;
    END IF;
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
    -- A schedule that names the queue would fail at its next tick: refused unless force.
    IF EXISTS (SELECT 1 FROM jobbuf.schedules s WHERE s.queue OPERATOR(pg_catalog.=) q.name) THEN
        IF NOT coalesce(force, false) THEN
            RAISE EXCEPTION 'jobbuf: queue % has schedules: %', pg_catalog.quote_literal(q.name),
                (SELECT pg_catalog.string_agg(pg_catalog.quote_literal(s.name), ', ' ORDER BY s.name)
                 FROM jobbuf.schedules s WHERE s.queue OPERATOR(pg_catalog.=) q.name)
                USING ERRCODE = 'object_in_use',
                      HINT = 'remove them with jobbuf_unschedule(name), or call jobbuf_drop_queue(queue, force => true), which removes them too';
        END IF;
        DELETE FROM jobbuf.schedules s WHERE s.queue OPERATOR(pg_catalog.=) q.name;
    END IF;
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

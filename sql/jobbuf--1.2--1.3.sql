-- jobbuf 1.2 -> 1.3: ALTER EXTENSION jobbuf UPDATE. Every change 1.3 makes to the extension's SQL
-- is made here as well as in src/sql/ (which builds jobbuf--1.3.sql). test/upgrade checks that an
-- updated 1.2 (and 1.1, and 1.0) and a fresh 1.3 have the same catalog, with jobs in every state.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.3'" to load this file. \quit

-- First, the library: 1.3's SQL needs the 1.3 library, and a server still running an older one
-- (the new build installed, Postgres not yet restarted) would run that worker against 1.3's
-- objects. jobbuf.library_version() answers from the library loaded in this backend.
DO $$
BEGIN
    IF jobbuf.library_version() OPERATOR(pg_catalog.=) ANY (ARRAY['1.1', '1.2']) THEN
        RAISE EXCEPTION 'jobbuf: the jobbuf library loaded in this server is older than 1.3'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'install the new build, restart PostgreSQL (the library is loaded at server start), then run ALTER EXTENSION jobbuf UPDATE';
    END IF;
END $$;

-- The extension's description: CREATE EXTENSION takes it from jobbuf.control, an update does not,
-- so a database created at 1.0 would keep describing 1.0 in \dx.
COMMENT ON EXTENSION jobbuf IS 'Transactionally staged jobs drained to Redis (Sidekiq, BullMQ, Celery, ActiveJob, lists, streams) by a background worker';

-- Copies and replication (src/sql/00_schema.sql, src/sql/60_copies.sql; docs/copies.md, "Logical
-- replication"). jobbuf.consumer_failures has no key: the whole row is its replica identity, so
-- the census's DELETE is not refused under a publication that publishes deletes.
ALTER TABLE jobbuf.consumer_failures REPLICA IDENTITY FULL;

-- jobbuf_release_restored also moves jobbuf.jobs_id_seq past every id the installation holds, and
-- adopts the queue's held schedules (below).
-- (CREATE OR REPLACE resets SECURITY DEFINER, which 90_privileges.sql gives the admin functions.)
CREATE OR REPLACE FUNCTION jobbuf_release_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    released bigint;
    dead_letters bigint;
    top bigint;
BEGIN
    SELECT pg_catalog.max(h.id) INTO top FROM (
        SELECT pg_catalog.max(j.id) FROM jobbuf.jobs j
        UNION ALL SELECT pg_catalog.max(d.id) FROM jobbuf.dead d
        UNION ALL SELECT pg_catalog.max(a.id) FROM jobbuf.archive a) h (id);
    IF top OPERATOR(pg_catalog.>) (SELECT CASE WHEN s.is_called THEN s.last_value
                                               ELSE s.last_value OPERATOR(pg_catalog.-) 1 END
                                   FROM jobbuf.jobs_id_seq s) THEN
        PERFORM pg_catalog.setval('jobbuf.jobs_id_seq'::pg_catalog.regclass, top, true);
    END IF;
    UPDATE jobbuf.jobs j SET owner = jobbuf.installation_id()
    FROM jobbuf.held_jobs_of(jobbuf_release_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS released = ROW_COUNT;
    IF released OPERATOR(pg_catalog.>) 0 THEN
        -- A statement on jobbuf.queues wakes the worker when this transaction commits.
        UPDATE jobbuf.queues SET paused = paused WHERE false;
    END IF;
    UPDATE jobbuf.dead d SET owner = jobbuf.installation_id()
    FROM jobbuf.held_dead_letters_of(jobbuf_release_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    -- The queue's held schedules fire from here on (not counted in the result).
    UPDATE jobbuf.schedules s SET installation = jobbuf.installation_id()
    WHERE s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND (jobbuf_release_restored.queue IS NULL
           OR s.queue OPERATOR(pg_catalog.=) jobbuf_release_restored.queue);
    RETURN released OPERATOR(pg_catalog.+) dead_letters;
END $$;
ALTER FUNCTION jobbuf_release_restored(text) SECURITY DEFINER;

-- jobbuf_reset_identity runs as origin (the identity trigger below skips changes made as replica).
ALTER FUNCTION jobbuf_reset_identity() SET session_replication_role = origin;

-- The subscriber's own identity and claim slots are never replaced by a publisher's rows.
CREATE FUNCTION jobbuf.skip_replicated_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica' THEN
        RETURN NULL;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER installation_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.installation
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.installation ENABLE ALWAYS TRIGGER installation_not_replicated;
-- Only the inserts: a replicated delete (the queue dropped on the publisher) still removes the slot.
CREATE TRIGGER claim_locks_not_replicated BEFORE INSERT ON jobbuf.claim_locks
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.claim_locks ENABLE ALWAYS TRIGGER claim_locks_not_replicated;
REVOKE ALL ON FUNCTION jobbuf.skip_replicated_row() FROM PUBLIC;

-- jobbuf_create_queue gains if_not_exists (src/sql/10_queues.sql). A fourth defaulted parameter
-- beside the old function would make jobbuf_create_queue('q') ambiguous, so the old one goes, and
-- the new one gets what the fresh install gives it: the extension owner's, SECURITY DEFINER,
-- EXECUTE for jobbuf_admin only (90_privileges.sql). A grant someone added to the old function by
-- hand is not carried over (made here, it would count as the extension's own, and pg_dump would
-- leave it out): the update names each one in a WARNING, to be granted again once it is done.
-- Anything of the user's that depends on the old function (a BEGIN ATOMIC function calling it)
-- makes the DROP fail, and with it the update, rather than being dropped.
DO $$
DECLARE
    grant_again text;
BEGIN
    FOR grant_again IN
        SELECT pg_catalog.format('GRANT EXECUTE ON FUNCTION %s.jobbuf_create_queue(text, text, jsonb, boolean) TO %s%s',
                   pg_catalog.quote_ident(n.nspname),
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                        ELSE a.grantee::pg_catalog.regrole::text END,
                   CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid OPERATOR(pg_catalog.=) 'jobbuf_create_queue(text, text, jsonb)'::pg_catalog.regprocedure::pg_catalog.oid
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
          AND a.grantee OPERATOR(pg_catalog.<>) 'jobbuf_admin'::pg_catalog.regrole::pg_catalog.oid
        ORDER BY 1
    LOOP
        RAISE WARNING 'jobbuf: the update replaces jobbuf_create_queue, and drops a grant made on it by hand'
            USING DETAIL = 'to grant it again once the update is done: ' || grant_again,
                  HINT = 'grant the role jobbuf_admin instead, which the new function is granted to';
    END LOOP;
END $$;
DROP FUNCTION jobbuf_create_queue(text, text, jsonb);
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
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION jobbuf_create_queue(text, text, jsonb, boolean) OWNER TO %s',
        (SELECT e.extowner::pg_catalog.regrole::text FROM pg_catalog.pg_extension e
         WHERE e.extname OPERATOR(pg_catalog.=) 'jobbuf'));
END $$;
REVOKE ALL ON FUNCTION jobbuf_create_queue(text, text, jsonb, boolean) FROM PUBLIC;
ALTER FUNCTION jobbuf_create_queue(text, text, jsonb, boolean) SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION jobbuf_create_queue(text, text, jsonb, boolean) TO jobbuf_admin;

-- A tick's id (src/sql/00_schema.sql): what the ids consumers see derive from for a periodic job.
ALTER TABLE jobbuf.jobs ADD COLUMN tick_id bigint;

-- Periodic jobs (src/sql/70_schedules.sql, as the fresh install makes them; docs/schedules.md).
-- One row per schedule, dumped with the data (pg_extension_config_dump below). owner is the role
-- that called jobbuf_schedule: a tick is staged only while that role may INSERT into
-- jobbuf.jobs. installation is the installation that fires it: a schedule restored from a dump,
-- copied or replicated carries its original's and is held (not fired) until
-- jobbuf_release_restored adopts it, as jobs are. next_run_at is the next tick (NULL: the cron
-- text matches no later time); last_error says why the last due tick was not staged (NULL: it was).
CREATE TABLE jobbuf.schedules (
    name         text PRIMARY KEY,
    cron         text NOT NULL,
    queue        text NOT NULL REFERENCES jobbuf.queues (name),
    payload      jsonb NOT NULL,
    options      jsonb NOT NULL DEFAULT '{}',
    time_zone    text NOT NULL DEFAULT 'UTC',
    catch_up     text NOT NULL DEFAULT 'one',
    unique_ticks boolean NOT NULL DEFAULT false,
    paused       boolean NOT NULL DEFAULT false,
    owner        name NOT NULL,
    next_run_at  timestamptz,
    last_run_at  timestamptz,
    last_job_id  bigint,
    last_error   text,
    installation uuid NOT NULL DEFAULT jobbuf.installation_id(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedules_name_format CHECK (name ~ '^[A-Za-z0-9_.:-]{1,63}$'),
    CONSTRAINT schedules_catch_up_known CHECK (catch_up IN ('none', 'one', 'all')),
    CONSTRAINT schedules_options_object CHECK (jsonb_typeof(options) = 'object')
);
COMMENT ON TABLE jobbuf.schedules IS 'periodic jobs; change them only through jobbuf_schedule / jobbuf_unschedule';
-- The worker finds due ticks through this index: a schedule that is not due costs nothing.
CREATE INDEX schedules_due ON jobbuf.schedules (next_run_at) WHERE NOT paused;
SELECT pg_catalog.pg_extension_config_dump('jobbuf.schedules', '');

-- A change of a schedule wakes the drain worker when it commits: it reads the next due tick again.
CREATE FUNCTION jobbuf.schedules_changed_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_schedules_changed_trigger';
CREATE TRIGGER schedules_wake AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobbuf.schedules
    FOR EACH STATEMENT EXECUTE FUNCTION jobbuf.schedules_changed_trigger();

-- The first tick of the cron text strictly after the given time, in the named time zone (NULL
-- when it never matches again); an invalid cron text is an error that shows the valid form.
CREATE FUNCTION jobbuf.next_tick(cron text, time_zone text, after timestamptz)
RETURNS timestamptz LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'jobbuf_next_tick';

-- The ticks from first (a tick itself) up to upto, the latest keep of them, oldest first.
CREATE FUNCTION jobbuf.ticks_between(cron text, time_zone text, first timestamptz, upto timestamptz, keep integer)
RETURNS timestamptz[] LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'jobbuf_ticks_between';

-- What staging says of a job of the queue with the payload (an ERROR naming what the target
-- needs), without staging it.
CREATE FUNCTION jobbuf.check_staged_payload(queue text, payload jsonb)
RETURNS void LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'jobbuf_check_staged_payload';

-- The role that called the current SQL-callable function from outside any SECURITY DEFINER
-- function (the session's current role): the owner jobbuf_schedule records.
CREATE FUNCTION jobbuf.calling_role()
RETURNS name LANGUAGE c STABLE AS 'MODULE_PATHNAME', 'jobbuf_calling_role';

-- Creates or replaces a schedule and returns its next tick. A replaced schedule keeps last_run_at
-- (and its last job) and computes next_run_at from now. Options: time_zone (a name of
-- pg_timezone_names; default UTC), catch_up (none, one, all; default one), unique_key (true:
-- each tick staged with unique_key '<name>:<tick>'), paused.
-- (SECURITY DEFINER through 90_privileges.sql: everything is schema-qualified.)
CREATE FUNCTION jobbuf_schedule(name text, cron text, queue text, payload jsonb, options jsonb DEFAULT '{}')
RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET timezone_abbreviations = 'Default' AS $$
DECLARE
    opts jsonb := coalesce(options, '{}');
    zone text := 'UTC';
    catch text := 'one';
    want_unique boolean;
    want_paused boolean;
    key text;
    q jobbuf.queues;
    next_at timestamptz;
    caller pg_catalog.name := jobbuf.calling_role();
BEGIN
    IF name IS NULL OR name OPERATOR(pg_catalog.!~) '^[A-Za-z0-9_.:-]{1,63}$' THEN
        RAISE EXCEPTION 'jobbuf: invalid schedule name %', coalesce(pg_catalog.quote_literal(name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a schedule name is 1 to 63 characters of A-Z, a-z, 0-9, _ . : -';
    END IF;
    IF cron IS NULL THEN
        RAISE EXCEPTION 'jobbuf: the cron text of schedule % is NULL', pg_catalog.quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'five fields (minute hour day month weekday) such as ''*/5 * * * *'', @hourly, @daily, @weekly, @monthly, @yearly, or ''N seconds'' (1-59)';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'jobbuf: the payload of schedule % is NULL', pg_catalog.quote_literal(name)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give the jsonb every tick stages, as jobbuf_stage takes it';
    END IF;
    IF pg_catalog.jsonb_typeof(opts) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION 'jobbuf: schedule options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'for example ''{"time_zone": "Europe/Berlin", "catch_up": "one", "unique_key": true, "paused": false}''';
    END IF;
    FOR key IN SELECT k FROM pg_catalog.jsonb_object_keys(opts) k LOOP
        IF key OPERATOR(pg_catalog.<>) ALL (ARRAY['time_zone', 'catch_up', 'unique_key', 'paused']) THEN
            RAISE EXCEPTION 'jobbuf: unknown schedule option %', pg_catalog.quote_literal(key)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'schedule options are time_zone, catch_up, unique_key and paused';
        END IF;
    END LOOP;
    IF opts OPERATOR(pg_catalog.?) 'time_zone' THEN
        IF pg_catalog.jsonb_typeof(opts OPERATOR(pg_catalog.->) 'time_zone') OPERATOR(pg_catalog.<>) 'string'
           OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z
                          WHERE z.name OPERATOR(pg_catalog.=) (opts OPERATOR(pg_catalog.->>) 'time_zone'))
           -- Zone files named like an abbreviation (CET, EST, MST) are refused as abbreviations
           -- (timezone_abbreviations is pinned to Default for this check: see the SET below), and
           -- so are the names that are no place: the server's own zone (localtime), tz's
           -- internals (posixrules, Factory) and the POSIX-style rule names (EST5EDT, PST8PDT).
           OR ((opts OPERATOR(pg_catalog.->>) 'time_zone') OPERATOR(pg_catalog.<>) 'UTC'
               AND EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_abbrevs a
                           WHERE a.abbrev OPERATOR(pg_catalog.=) (opts OPERATOR(pg_catalog.->>) 'time_zone')))
           OR (opts OPERATOR(pg_catalog.->>) 'time_zone') OPERATOR(pg_catalog.=) ANY (ARRAY['localtime', 'posixrules', 'Factory'])
           OR (opts OPERATOR(pg_catalog.->>) 'time_zone') OPERATOR(pg_catalog.~) '^[A-Z]{3}[0-9]' THEN
            RAISE EXCEPTION 'jobbuf: unknown time zone % for schedule %', opts OPERATOR(pg_catalog.->) 'time_zone',
                pg_catalog.quote_literal(name)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'give a name from pg_timezone_names such as "Europe/Berlin", "America/New_York" or "UTC"; abbreviations (CET) and POSIX strings (UTC+3) are refused';
        END IF;
        zone := opts OPERATOR(pg_catalog.->>) 'time_zone';
    END IF;
    IF opts OPERATOR(pg_catalog.?) 'catch_up' THEN
        IF pg_catalog.jsonb_typeof(opts OPERATOR(pg_catalog.->) 'catch_up') OPERATOR(pg_catalog.<>) 'string'
           OR (opts OPERATOR(pg_catalog.->>) 'catch_up') OPERATOR(pg_catalog.<>) ALL (ARRAY['none', 'one', 'all']) THEN
            RAISE EXCEPTION 'jobbuf: invalid catch_up % for schedule %', opts OPERATOR(pg_catalog.->) 'catch_up',
                pg_catalog.quote_literal(name)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'catch_up is "none" (skip ticks missed while no worker ran), "one" (stage one job for them, the default) or "all" (the latest 1,000 of them, oldest first)';
        END IF;
        catch := opts OPERATOR(pg_catalog.->>) 'catch_up';
    END IF;
    FOREACH key IN ARRAY ARRAY['unique_key', 'paused'] LOOP
        IF opts OPERATOR(pg_catalog.?) key AND pg_catalog.jsonb_typeof(opts OPERATOR(pg_catalog.->) key) OPERATOR(pg_catalog.<>) 'boolean' THEN
            RAISE EXCEPTION 'jobbuf: schedule option % must be true or false, not %', key, opts OPERATOR(pg_catalog.->) key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    want_unique := coalesce((opts OPERATOR(pg_catalog.->) 'unique_key')::boolean, false);
    want_paused := coalesce((opts OPERATOR(pg_catalog.->) 'paused')::boolean, false);
    q := jobbuf.known_queue(queue);
    -- The payload as staging would check it: a payload the target cannot carry is refused now.
    PERFORM jobbuf.check_staged_payload(q.name, payload);
    -- The cron text is checked here (an error shows the valid form), before anything is written.
    -- From the clock, not the transaction's start: a tick the worker stages while this waits for
    -- the schedule's row is not due again after the replace.
    next_at := jobbuf.next_tick(cron, zone, pg_catalog.clock_timestamp());
    INSERT INTO jobbuf.schedules AS s (name, cron, queue, payload, options, time_zone, catch_up, unique_ticks,
                                       paused, owner, next_run_at)
    VALUES (jobbuf_schedule.name, jobbuf_schedule.cron, q.name, jobbuf_schedule.payload, opts, zone, catch,
            want_unique, want_paused, caller, next_at)
    ON CONFLICT ON CONSTRAINT schedules_pkey DO UPDATE
        SET cron = excluded.cron, queue = excluded.queue, payload = excluded.payload, options = excluded.options,
            time_zone = excluded.time_zone, catch_up = excluded.catch_up, unique_ticks = excluded.unique_ticks,
            paused = excluded.paused, owner = excluded.owner,
            -- After the last tick staged too (the clock read once the row is locked): never a tick twice.
            next_run_at = jobbuf.next_tick(excluded.cron, excluded.time_zone,
                                           GREATEST(pg_catalog.clock_timestamp(), s.last_run_at)),
            last_error = NULL
    RETURNING s.next_run_at INTO next_at;
    IF next_at IS NULL THEN
        RAISE WARNING 'jobbuf: schedule % never fires: % matches no date from now on', pg_catalog.quote_literal(name),
            pg_catalog.quote_literal(cron)
            USING HINT = 'check the day and month fields (for example 30 2 is February 30th)';
    ELSIF NOT jobbuf.database_has_worker() THEN
        RAISE WARNING 'jobbuf: no drain worker runs in database %: schedule % fires no tick until one does',
            pg_catalog.quote_ident(pg_catalog.current_database()), pg_catalog.quote_literal(name)
            USING HINT = 'the drain worker stages the ticks: jobbuf must be in shared_preload_libraries, the database named by jobbuf.database, and jobbuf.max_workers high enough (jobbuf_worker_status() says which)';
    END IF;
    RETURN next_at;
END $$;

-- Whether a drain worker serves this database (one runs, or the launcher is about to start one).
CREATE FUNCTION jobbuf.database_has_worker()
RETURNS boolean LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_database_has_worker';

-- Deletes a schedule; false when there is none of that name. Ticks already staged stay.
CREATE FUNCTION jobbuf_unschedule(name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM jobbuf.schedules s WHERE s.name OPERATOR(pg_catalog.=) jobbuf_unschedule.name;
    RETURN FOUND;
END $$;

-- Every schedule, held or not; last_error says why the last due tick was not staged.
CREATE FUNCTION jobbuf_schedules()
RETURNS TABLE (name text, cron text, queue text, time_zone text, catch_up text, paused boolean, held boolean,
               owner name, next_run_at timestamptz, last_run_at timestamptz, last_job_id bigint, payload jsonb,
               options jsonb, last_error text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.name, s.cron, s.queue, s.time_zone, s.catch_up, s.paused,
           s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id(), s.owner, s.next_run_at, s.last_run_at,
           s.last_job_id, s.payload, s.options, s.last_error
    FROM jobbuf.schedules s ORDER BY s.name;
$$;

-- For the exporter (jobbuf_schedule_lateness_seconds): how long each schedule's due tick has
-- waited to be staged, 0 while on time; paused and held schedules are never late.
CREATE FUNCTION jobbuf_prometheus_schedules()
RETURNS TABLE (datname text, schedule text, lateness_seconds float8)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text, s.name,
           CASE WHEN s.paused OR s.next_run_at IS NULL
                     OR s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id() THEN 0::float8
                ELSE GREATEST(0::float8,
                         pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) s.next_run_at)) END
    FROM jobbuf.schedules s ORDER BY s.name;
$$;

-- The drain worker's part (src/schedules/tick_staging.cpp), in a transaction of its own: stages
-- the due ticks of this installation's schedules that are not paused and advances each schedule
-- in the same transaction. Which ticks: catch_up one stages the latest due tick (one job for any
-- ticks missed), all the latest 1,000 due ticks oldest first, none the latest due tick when it
-- came due less than 10 seconds ago (on time: a worker busy for a moment misses nothing) and
-- nothing else. Each tick is inserted as the schedule's owner (SET ROLE): it is staged only with
-- the privileges that role has now. A tick the owner may not stage (no INSERT on jobbuf.jobs, a
-- dropped role) or whose payload the queue's target refuses is skipped: the schedule advances,
-- last_error says why. Any other error (a lock wait, a cron text or time zone that no longer
-- reads) stages nothing and leaves the schedule due, with last_error: it is tried again at the
-- next call, and shows as late. One WARNING per schedule when its reason changes. Returns when to
-- call again: now when more schedules were due than one call takes, else the next tick ahead.
CREATE FUNCTION jobbuf.stage_due_ticks(max_schedules integer DEFAULT 100)
RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s jobbuf.schedules;
    now_at timestamptz := pg_catalog.clock_timestamp();
    ticks timestamptz[];
    tick timestamptz;
    job bigint;
    last_job bigint;
    problem text;
    skipped boolean;
    tick_key text;
    next_at timestamptz;
    keep integer;
    staged integer := 0;
BEGIN
    FOR s IN
        SELECT * FROM jobbuf.schedules d
        WHERE d.next_run_at OPERATOR(pg_catalog.<=) now_at AND NOT d.paused
          AND d.installation OPERATOR(pg_catalog.=) jobbuf.installation_id()
        ORDER BY d.next_run_at LIMIT max_schedules
        FOR UPDATE SKIP LOCKED
    LOOP
        problem := NULL;
        skipped := false;
        last_job := NULL;
        keep := 1;
        IF s.catch_up OPERATOR(pg_catalog.=) 'all' THEN
            keep := 1000;
        END IF;
        BEGIN
            ticks := jobbuf.ticks_between(s.cron, s.time_zone, s.next_run_at, now_at, keep);
            next_at := jobbuf.next_tick(s.cron, s.time_zone, GREATEST(now_at, s.next_run_at));
            IF s.catch_up OPERATOR(pg_catalog.=) 'none'
               AND ticks[1] OPERATOR(pg_catalog.<) (now_at OPERATOR(pg_catalog.-) '10 seconds'::interval) THEN
                ticks := '{}';  -- missed: it came due while no worker staged it
            END IF;
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) s.owner) THEN
                    RAISE EXCEPTION 'its owner, role %, does not exist', pg_catalog.quote_ident(s.owner)
                        USING ERRCODE = 'undefined_object';
                END IF;
                IF NOT (pg_catalog.has_column_privilege(s.owner, 'jobbuf.jobs', 'queue', 'INSERT')
                        AND pg_catalog.has_column_privilege(s.owner, 'jobbuf.jobs', 'payload', 'INSERT')
                        AND pg_catalog.has_column_privilege(s.owner, 'jobbuf.jobs', 'run_at', 'INSERT')
                        AND pg_catalog.has_column_privilege(s.owner, 'jobbuf.jobs', 'unique_key', 'INSERT')) THEN
                    RAISE EXCEPTION 'role % may not INSERT into jobbuf.jobs', pg_catalog.quote_ident(s.owner)
                        USING ERRCODE = 'insufficient_privilege';
                END IF;
                -- As the owner: the INSERT needs what a producer needs (its values are computed
                -- before, as the worker). The tick's id (tick_id, which producers cannot write) is
                -- set after, as the worker.
                FOREACH tick IN ARRAY ticks LOOP
                    job := NULL;
                    tick_key := NULL;
                    IF s.unique_ticks THEN
                        tick_key := s.name OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) jobbuf.tick_text(tick);
                    END IF;
                    PERFORM pg_catalog.set_config('role', s.owner, true);
                    INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key)
                    VALUES (s.queue, s.payload, tick, tick_key)
                    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND group_id IS NULL DO NOTHING
                    RETURNING id INTO job;
                    PERFORM pg_catalog.set_config('role', 'none', true);
                    IF job IS NOT NULL THEN
                        UPDATE jobbuf.jobs j SET tick_id = jobbuf.tick_id(s.name, tick)
                        WHERE j.id OPERATOR(pg_catalog.=) job;
                        last_job := job;
                    END IF;
                END LOOP;
            EXCEPTION WHEN insufficient_privilege OR undefined_object OR invalid_parameter_value
                           OR object_not_in_prerequisite_state OR check_violation OR not_null_violation THEN
                -- The owner's privileges, its role, or the payload against the target (what a
                -- producer staging this job would be told): this tick is skipped.
                problem := SQLERRM;
                skipped := true;
            END;
        EXCEPTION WHEN OTHERS THEN
            -- Anything else stages nothing and leaves the schedule due: tried again.
            problem := SQLERRM;
            skipped := false;
            ticks := NULL;
        END;
        IF problem IS NOT NULL AND (s.last_error IS NULL OR problem OPERATOR(pg_catalog.<>) s.last_error) THEN
            RAISE WARNING 'jobbuf: schedule % %: %', pg_catalog.quote_literal(s.name),
                CASE WHEN skipped THEN 'skipped its tick' ELSE 'could not stage its tick; it stays due' END, problem
                USING HINT = 'jobbuf_schedules() shows it until a tick is staged again';
        END IF;
        IF ticks IS NULL THEN
            UPDATE jobbuf.schedules u SET last_error = problem WHERE u.name OPERATOR(pg_catalog.=) s.name;
        ELSE
            UPDATE jobbuf.schedules u
            SET next_run_at = next_at,
                last_run_at = CASE WHEN skipped THEN u.last_run_at
                                   ELSE coalesce(ticks[pg_catalog.array_length(ticks, 1)], u.last_run_at) END,
                last_job_id = coalesce(last_job, u.last_job_id),
                last_error = problem
            WHERE u.name OPERATOR(pg_catalog.=) s.name;
        END IF;
        staged := staged OPERATOR(pg_catalog.+) 1;
    END LOOP;
    -- More due than one call takes: at once. Otherwise the next tick ahead (a due schedule that
    -- a jobbuf_schedule in progress holds locked, or one that failed, is tried at the worker's
    -- next call: when a commit changes jobbuf.schedules, and at least every poll_interval).
    IF staged OPERATOR(pg_catalog.>=) max_schedules THEN
        RETURN now_at;
    END IF;
    RETURN (SELECT pg_catalog.min(d.next_run_at) FROM jobbuf.schedules d
            WHERE NOT d.paused AND d.installation OPERATOR(pg_catalog.=) jobbuf.installation_id()
              AND d.next_run_at OPERATOR(pg_catalog.>) now_at);
END $$;

-- A tick's id (jobbuf.jobs.tick_id): 61 bits of the MD5 of '<name>:<tick>' with bit 61 set, so
-- that it never equals a job id (those stay below 2^61); with the installation's salt it makes
-- the ids consumers see (Sidekiq jid, BullMQ and Celery ids, stream uid) for every staging of
-- that tick.
CREATE FUNCTION jobbuf.tick_id(schedule text, tick timestamptz)
RETURNS bigint LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT (('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.md5(schedule OPERATOR(pg_catalog.||) ':'
                OPERATOR(pg_catalog.||) jobbuf.tick_text(tick)), 1, 16))::bit(64)::bigint
            OPERATOR(pg_catalog.&) 2305843009213693951) OPERATOR(pg_catalog.|) 2305843009213693952;
$$;

-- A tick as unique keys and ids write it: UTC, ISO 8601, 2026-03-29T01:00:00Z.
CREATE FUNCTION jobbuf.tick_text(tick timestamptz)
RETURNS text LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.to_char(pg_catalog.timezone('UTC', tick), 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
$$;

-- Their privileges, as 90_privileges.sql gives them: nothing for PUBLIC; jobbuf_schedule,
-- jobbuf_unschedule and jobbuf_schedules for jobbuf_admin, jobbuf_prometheus_schedules for all
-- four roles, each SECURITY DEFINER.
REVOKE ALL ON FUNCTION jobbuf.schedules_changed_trigger(), jobbuf.next_tick(text, text, timestamptz),
    jobbuf.ticks_between(text, text, timestamptz, timestamptz, integer), jobbuf.calling_role(),
    jobbuf_schedule(text, text, text, jsonb, jsonb), jobbuf.database_has_worker(), jobbuf_unschedule(text),
    jobbuf_schedules(), jobbuf_prometheus_schedules(), jobbuf.stage_due_ticks(integer), jobbuf.tick_text(timestamptz),
    jobbuf.tick_id(text, timestamptz), jobbuf.check_staged_payload(text, jsonb)
    FROM PUBLIC;
ALTER FUNCTION jobbuf_schedule(text, text, text, jsonb, jsonb) SECURITY DEFINER;
ALTER FUNCTION jobbuf_unschedule(text) SECURITY DEFINER;
ALTER FUNCTION jobbuf_schedules() SECURITY DEFINER;
ALTER FUNCTION jobbuf_prometheus_schedules() SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION jobbuf_schedule(text, text, text, jsonb, jsonb), jobbuf_unschedule(text), jobbuf_schedules()
    TO jobbuf_admin;
GRANT EXECUTE ON FUNCTION jobbuf_prometheus_schedules()
    TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT SELECT ON jobbuf.schedules TO jobbuf_admin;

-- jobbuf_drop_queue refuses a queue a schedule names, unless force (which removes them), and
-- jobbuf_discard_restored deletes the queue's held schedules.
CREATE OR REPLACE FUNCTION jobbuf_drop_queue(queue text, force boolean DEFAULT false)
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
ALTER FUNCTION jobbuf_drop_queue(text, boolean) SECURITY DEFINER;
CREATE OR REPLACE FUNCTION jobbuf_discard_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    discarded bigint;
    dead_letters bigint;
BEGIN
    DELETE FROM jobbuf.jobs j USING jobbuf.held_jobs_of(jobbuf_discard_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS discarded = ROW_COUNT;
    DELETE FROM jobbuf.dead d USING jobbuf.held_dead_letters_of(jobbuf_discard_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    DELETE FROM jobbuf.schedules s
    WHERE s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND (jobbuf_discard_restored.queue IS NULL
           OR s.queue OPERATOR(pg_catalog.=) jobbuf_discard_restored.queue);
    RETURN discarded OPERATOR(pg_catalog.+) dead_letters;
END $$;
ALTER FUNCTION jobbuf_discard_restored(text) SECURITY DEFINER;

-- Flow control (src/sql/10_queues.sql): the queue options max_in_redis and max_rate (refused on
-- a none queue and with delivery group; a stream's maxlen not below max_in_redis) and weight.
CREATE OR REPLACE FUNCTION jobbuf.checked_options(target text, options jsonb)
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

-- ==== Unique keys in a copy (issue 34, finding #6) — begin ====
-- A held job's unique_key never blocks this installation's own job: src/sql/62_held_keys.sql,
-- which explains the trigger, and docs/copies.md, "Unique keys in a copy". The same objects and
-- privileges as a fresh 1.3 (90_privileges.sql: no function is PUBLIC's; jobbuf_admin reads
-- every table).
-- The held jobs discarded (or skipped) this way, until the worker's census counts them in its
-- LOG line about held jobs and deletes them (src/delivery/held_jobs.cpp). A row per discarded
-- job, never updated: stagers never wait for each other or for the worker on a counter. At most
-- one row per held job, so it stays as small as the held jobs were. Not dumped.
CREATE TABLE jobbuf.held_discards (
    queue        text NOT NULL,
    id           bigint NOT NULL,
    unique_key   text NOT NULL,
    discarded_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobbuf.held_discards IS 'held jobs discarded because a job of this installation took their unique_key; emptied by the worker''s census, which logs them';
-- No key: the whole row identifies it to logical replication (the census's DELETE under a
-- publication that publishes deletes), as for jobbuf.consumer_failures.
ALTER TABLE jobbuf.held_discards REPLICA IDENTITY FULL;

-- SECURITY DEFINER: producers may not read or delete other jobs; this deletes only a waiting job
-- of another installation with the key the producer is staging, which that job would block.
CREATE FUNCTION jobbuf.held_key_yields() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    own constant uuid := jobbuf.installation_id();
    discarded bigint;
BEGIN
    IF NEW.owner OPERATOR(pg_catalog.=) own THEN
        -- At most one: jobs_unique_waiting.
        DELETE FROM jobbuf.jobs j
        WHERE j.queue OPERATOR(pg_catalog.=) NEW.queue AND j.unique_key OPERATOR(pg_catalog.=) NEW.unique_key
          AND j.group_id IS NULL AND j.owner OPERATOR(pg_catalog.<>) own
        RETURNING j.id INTO discarded;
        IF discarded IS NOT NULL THEN
            INSERT INTO jobbuf.held_discards (queue, id, unique_key) VALUES (NEW.queue, discarded, NEW.unique_key);
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        RETURN NEW;  -- a held row is never claimed, so never released: nothing to decide
    END IF;
    IF EXISTS (SELECT FROM jobbuf.jobs j
               WHERE j.queue OPERATOR(pg_catalog.=) NEW.queue AND j.unique_key OPERATOR(pg_catalog.=) NEW.unique_key
                 AND j.group_id IS NULL AND j.owner OPERATOR(pg_catalog.=) own) THEN
        INSERT INTO jobbuf.held_discards (queue, id, unique_key) VALUES (NEW.queue, NEW.id, NEW.unique_key);
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
-- Named to fire after jobs_validate_and_wake (triggers fire in name order): nothing is deleted
-- for a row the validation refuses.
CREATE TRIGGER jobs_yield_held_key BEFORE INSERT OR UPDATE OF group_id ON jobbuf.jobs
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL AND NEW.group_id IS NULL)
    EXECUTE FUNCTION jobbuf.held_key_yields();
ALTER TABLE jobbuf.jobs ENABLE ALWAYS TRIGGER jobs_yield_held_key;
REVOKE ALL ON FUNCTION jobbuf.held_key_yields() FROM PUBLIC;
GRANT SELECT ON jobbuf.held_discards TO jobbuf_admin;
-- ==== Unique keys in a copy — end ====

-- ==== Clones and later starts (docs/copies.md): the delivery counter and jobbuf_take_over() ====
-- (one block; as src/sql/60_copies.sql and 90_privileges.sql give a fresh 1.3)
CREATE TABLE jobbuf.delivery_counter (
    delivered_unit      bigint NOT NULL DEFAULT 0,
    take_over_requested boolean NOT NULL DEFAULT false,
    take_over_start     timestamptz,
    one_row             boolean PRIMARY KEY DEFAULT true CONSTRAINT delivery_counter_one_row CHECK (one_row)
);
COMMENT ON TABLE jobbuf.delivery_counter IS 'the delivery number of this cluster''s last batch (one row, not dumped): what tells a later start of this cluster from a copy; written by the drain worker and jobbuf_take_over()';
INSERT INTO jobbuf.delivery_counter DEFAULT VALUES;
CREATE TRIGGER delivery_counter_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.delivery_counter
    FOR EACH ROW WHEN (pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica')
    EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.delivery_counter ENABLE ALWAYS TRIGGER delivery_counter_not_replicated;
CREATE FUNCTION jobbuf_take_over()
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET session_replication_role = origin AS $$
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r
                     WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER), false) THEN
        RAISE EXCEPTION 'jobbuf_take_over() is for superusers' USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The request names this postmaster's start: a standby or a base backup taken before the
    -- worker acted on it carries the row but never honours it (its start differs).
    UPDATE jobbuf.delivery_counter
    SET take_over_requested = true, take_over_start = pg_catalog.pg_postmaster_start_time();
    -- A statement on jobbuf.queues makes the worker reload when this commits, reading the request.
    UPDATE jobbuf.queues SET paused = paused WHERE false;
END $$;
REVOKE ALL ON FUNCTION jobbuf_take_over() FROM PUBLIC;
GRANT SELECT ON jobbuf.delivery_counter TO jobbuf_admin;
-- ==== end of the clones block ====

-- A failed job of this installation is dropped only for a waiting job of this installation with
-- its key (src/sql/42_claim_settle.sql); a held one gives way to it (62_held_keys.sql).
CREATE OR REPLACE FUNCTION jobbuf_fail(group_id uuid, error text, ids bigint[] DEFAULT NULL)
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
-- As 90_privileges.sql makes it (CREATE OR REPLACE reset it to the invoker's rights).
ALTER FUNCTION jobbuf_fail(uuid, text, bigint[]) SECURITY DEFINER;
-- ==== Flow control made visible (docs/flow.md, "What you see"): jobbuf_flow_status(), the
-- exporter's jobbuf_prometheus_flow() and jobbuf_prometheus_redis_memory() ====
-- (one block; as src/sql/65_flow.sql and 90_privileges.sql give a fresh 1.3)
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
REVOKE ALL ON FUNCTION jobbuf_flow_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_prometheus_flow() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_prometheus_redis_memory() FROM PUBLIC;
ALTER FUNCTION jobbuf_flow_status() SECURITY DEFINER;
ALTER FUNCTION jobbuf_prometheus_flow() SECURITY DEFINER;
ALTER FUNCTION jobbuf_prometheus_redis_memory() SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION jobbuf_flow_status() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_prometheus_flow() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_prometheus_redis_memory() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT SELECT ON jobbuf.queue_flow, jobbuf.redis_memory TO jobbuf_admin;
-- ==== end of the flow block ====

-- Keep this statement last.
-- Wakes the drain worker when this update commits: a worker running the 1.3 library against 1.2
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;

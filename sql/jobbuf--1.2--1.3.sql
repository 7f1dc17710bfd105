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

-- jobbuf_release_restored also moves jobbuf.jobs_id_seq past every id the installation holds.
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

-- Keep this statement last.
-- Wakes the drain worker when this update commits: a worker running the 1.3 library against 1.2
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;

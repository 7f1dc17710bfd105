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

-- Keep this statement last.
-- Wakes the drain worker when this update commits: a worker running the 1.3 library against 1.2
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;

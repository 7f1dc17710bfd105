-- jobbuf 1.1 -> 1.2: ALTER EXTENSION jobbuf UPDATE. Built from the parts in
-- src/sql/updates/1.1--1.2/ (in name order); every change 1.2 makes to the extension's SQL is made
-- in one of these parts as well as in src/sql/ (which builds jobbuf--1.2.sql). test/upgrade checks
-- that an updated 1.1 (and 1.0) and a fresh 1.2 have the same catalog, with jobs in every state.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.2'" to load this file. \quit

-- First, the library: 1.2's SQL needs the 1.2 library, and a server still running the 1.1 one
-- (the new build installed, Postgres not yet restarted) would run 1.1's worker against 1.2's
-- objects. jobbuf.library_version() answers from the library loaded in this backend.
DO $$
BEGIN
    IF jobbuf.library_version() OPERATOR(pg_catalog.=) '1.1' THEN
        RAISE EXCEPTION 'jobbuf: the jobbuf library loaded in this server is older than 1.2'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'install the new build, restart PostgreSQL (the library is loaded at server start), then run ALTER EXTENSION jobbuf UPDATE';
    END IF;
END $$;

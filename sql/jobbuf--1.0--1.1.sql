-- jobbuf 1.0 -> 1.1: ALTER EXTENSION jobbuf UPDATE. Every change 1.1 makes to the extension's
-- SQL is made here as well as in src/sql/ (which builds jobbuf--1.1.sql); test/upgrade checks that
-- an updated 1.0 and a fresh 1.1 have the same catalog, and that jobs in every state survive.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.1'" to load this file. \quit

-- Backups (pg_dump restores the data of configuration tables in the order of the foreign keys
-- between them): jobbuf.jobs references jobbuf.queues, so a dump restores the queues before the
-- jobs that name them (see 00_schema.sql). A 1.0 database may hold jobs of a queue that was
-- dropped while they were staged (a race 1.1 closes): the key could not be added over them, and
-- they were invisible to jobbuf_stats(); they move to the dead letters with the reason, where
-- jobbuf_purge_dead(queue) removes them, or jobbuf_retry_dead(queue) puts them back once a queue
-- of that name exists again.
WITH orphans AS (
    DELETE FROM jobbuf.jobs j
    WHERE NOT EXISTS (SELECT 1 FROM jobbuf.queues q WHERE q.name OPERATOR(pg_catalog.=) j.queue)
    RETURNING j.*
)
INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at, attempts, last_error)
SELECT o.id, o.queue, o.payload, o.partition_key, o.unique_key, o.staged_at, o.attempts,
       'jobbuf 1.1 update: queue ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(o.queue)
           OPERATOR(pg_catalog.||) ' no longer exists'
FROM orphans o;
ALTER TABLE jobbuf.jobs ADD CONSTRAINT jobs_queue_fkey FOREIGN KEY (queue) REFERENCES jobbuf.queues (name);
-- Its check on INSERT is disabled: the staging trigger does that job without a query per job
-- and without locking the queue row (see 00_schema.sql).
DO $$
BEGIN
    EXECUTE (SELECT pg_catalog.format('ALTER TABLE jobbuf.jobs DISABLE TRIGGER %I', t.tgname)
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_constraint k ON k.oid OPERATOR(pg_catalog.=) t.tgconstraint
             WHERE t.tgrelid OPERATOR(pg_catalog.=) 'jobbuf.jobs'::pg_catalog.regclass
               AND k.conname OPERATOR(pg_catalog.=) 'jobs_queue_fkey'
               AND t.tgfoid OPERATOR(pg_catalog.=) 'pg_catalog."RI_FKey_check_ins"'::pg_catalog.regproc);
END $$;

-- Administrative changes lock the queue row FOR NO KEY UPDATE, which does not wait for the
-- transactions that hold it FOR KEY SHARE through that key.
CREATE OR REPLACE FUNCTION jobbuf.locked_queue(queue text)
RETURNS jobbuf.queues LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM jobbuf.queues q WHERE q.name = queue FOR NO KEY UPDATE;
    RETURN jobbuf.known_queue(queue);
END $$;

-- jobbuf: the privilege model. Four group roles (cluster-wide, NOLOGIN; created if missing,
-- left in place by DROP EXTENSION); grant them to your login roles:
--   jobbuf_producer  stage jobs: jobbuf_stage, or INSERT INTO jobbuf.jobs (the staging columns only)
--   jobbuf_consumer  batch consumers: jobbuf_claim / complete / fail / extend / group
--   jobbuf_admin     queues, schedules and dead letters: create / alter / drop / pause / resume
--                    queues, schedule / unschedule periodic jobs, retry / purge dead letters,
--                    purge the archive; reads every jobbuf table
--   jobbuf_monitor   monitoring (a Prometheus exporter, docs/operations.md): the inspection
--                    functions only; no table, no job payload
-- All four may call the inspection functions: jobbuf_stats(), jobbuf_queue_metrics(),
-- jobbuf_worker_status(), jobbuf_flow_status() and the exporter's jobbuf_prometheus_queues() /
-- _worker() / _schedules() / _flow() / _redis_memory(). They show
-- this database's queues (the tables of the database they run in); jobbuf_worker_status()
-- shows other databases' errors and counters only to superusers and pg_monitor.
-- Nothing is executable by PUBLIC.
-- Consumer, admin and inspection functions are SECURITY DEFINER with a pinned search_path, so
-- those roles need no privilege on the tables themselves.
-- This script runs as a superuser with the extension's schema (normally public, where the
-- database owner may create functions) first in search_path: every call below is qualified,
-- so that no function a database owner planted there can run with the installer's rights.

DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['jobbuf_producer', 'jobbuf_consumer', 'jobbuf_admin', 'jobbuf_monitor'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) role_name) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', role_name);
        END IF;
    END LOOP;
END $$;

DO $$
DECLARE
    fn regprocedure;
    name text;
    consumer_functions constant text[] := ARRAY['jobbuf_claim', 'jobbuf_complete', 'jobbuf_fail',
        'jobbuf_extend', 'jobbuf_group'];
    admin_functions constant text[] := ARRAY['jobbuf_create_queue', 'jobbuf_alter_queue',
        'jobbuf_drop_queue', 'jobbuf_pause', 'jobbuf_resume', 'jobbuf_retry_dead',
        'jobbuf_purge_dead', 'jobbuf_purge_archive', 'jobbuf_release_restored', 'jobbuf_discard_restored',
        'jobbuf_schedule', 'jobbuf_unschedule', 'jobbuf_schedules'];
    inspection_functions constant text[] := ARRAY['jobbuf_stats', 'jobbuf_worker_status',
        'jobbuf_queue_metrics', 'jobbuf_prometheus_queues', 'jobbuf_prometheus_worker', 'jobbuf_prometheus_schedules',
        'jobbuf_flow_status', 'jobbuf_prometheus_flow', 'jobbuf_prometheus_redis_memory'];
BEGIN
    FOR fn, name IN
        SELECT p.oid::regprocedure, p.proname
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d
          ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
         AND d.objid OPERATOR(pg_catalog.=) p.oid
        JOIN pg_catalog.pg_extension e
          ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
         AND d.refobjid OPERATOR(pg_catalog.=) e.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'
        WHERE e.extname OPERATOR(pg_catalog.=) 'jobbuf'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
        IF name OPERATOR(pg_catalog.=) 'jobbuf_stage' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_producer', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (consumer_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_consumer', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (admin_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_admin', fn);
        ELSIF name OPERATOR(pg_catalog.=) ANY (inspection_functions) THEN
            EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', fn);
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor', fn);
        END IF;
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA jobbuf TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- The default of jobbuf.jobs.origin and owner runs as whoever inserts (producers; consumers
-- see the identity in every job id anyway).
GRANT EXECUTE ON FUNCTION jobbuf.installation_id() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;

-- Producers stage through jobbuf_stage (invoker's rights) or a plain INSERT: both need INSERT on
-- the staging columns, the sequence, SELECT of the id (RETURNING) and of the queue metadata that
-- the validation trigger reads. They cannot read or change other jobs.
GRANT INSERT (queue, payload, run_at, unique_key, partition_key) ON jobbuf.jobs TO jobbuf_producer;
GRANT SELECT (id) ON jobbuf.jobs TO jobbuf_producer;
GRANT USAGE ON SEQUENCE jobbuf.jobs_id_seq TO jobbuf_producer;
GRANT SELECT ON jobbuf.queues TO jobbuf_producer;

GRANT SELECT ON ALL TABLES IN SCHEMA jobbuf TO jobbuf_admin;

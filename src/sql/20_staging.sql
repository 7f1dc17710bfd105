-- jobbuf: staging jobs (jobbuf_stage and plain INSERT), validation and the commit wake-up.

-- Validates every row inserted into jobbuf.jobs (queue exists, payload fits the queue's target),
-- fills defaults, and marks the transaction so that its commit wakes the worker.
CREATE FUNCTION jobbuf.staged_job_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_staged_job_trigger';
CREATE TRIGGER jobs_validate_and_wake BEFORE INSERT ON jobbuf.jobs
    FOR EACH ROW EXECUTE FUNCTION jobbuf.staged_job_trigger();

-- Invalidates the queue metadata that backends cache for the trigger above, and wakes the
-- worker at commit (a resumed or re-configured queue may have work).
CREATE FUNCTION jobbuf.queues_changed_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_queues_changed_trigger';
CREATE TRIGGER queues_invalidate AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobbuf.queues
    FOR EACH STATEMENT EXECUTE FUNCTION jobbuf.queues_changed_trigger();

-- Stages one job in the caller's transaction and returns its id. With a unique_key that is
-- already waiting in the queue it stages nothing and returns NULL (ON CONFLICT DO NOTHING on
-- jobs_unique_waiting: a concurrent stager of the same key waits for the first one's outcome).
-- In C (src/staging/stage_function.cpp, src/staging/job_inserter.cpp): the row is validated and inserted without
-- a SQL statement; with a unique_key, or when jobbuf.jobs was altered, through a kept INSERT.
CREATE FUNCTION jobbuf_stage(queue text, payload jsonb, run_at timestamptz DEFAULT NULL,
                             unique_key text DEFAULT NULL, partition_key text DEFAULT NULL)
RETURNS bigint LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_stage_jsonb';

-- Many jobs in one call, ids in payload order (the same C path, the table opened once).
CREATE FUNCTION jobbuf_stage(queue text, payloads jsonb[])
RETURNS SETOF bigint LANGUAGE c VOLATILE ROWS 100 AS 'MODULE_PATHNAME', 'jobbuf_stage_many';

-- jobbuf_stage('q', '{"a": 1}') with an untyped literal would be ambiguous between the jsonb and
-- jsonb[] forms; this text form wins that resolution (and serves drivers that bind text).
CREATE FUNCTION jobbuf_stage(queue text, payload text)
RETURNS bigint LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'jobbuf_stage_text';

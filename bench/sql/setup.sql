-- jobbuf benchmark fixtures (loaded once into the private benchmark cluster by bench/run.sh).
--  * bench.staged_jobs: the external enqueuer's source table, a plain table of the same shape as
--    jobbuf.jobs (columns, bigserial PK, the same two partial indexes), with no trigger.
--  * bench.plain_jobs: the same again, the target of the plain-INSERT side of the staging cost.
--  * bench.pk_jobs: a table with only a primary key (id, queue, payload, created_at), an
--    application's own outbox table: the other comparison of the single-job staging cost.
--  * bench.payload(n): the ~100-byte job used everywhere (a Sidekiq-shaped object, so the same
--    payload is valid for list and sidekiq queues).
--  * bench.sql_ceiling(...): the SQL-only drain ceiling, the worker's SQL-path batch statement
--    (same cursor / WHERE / ORDER BY / LIMIT / FOR UPDATE SKIP LOCKED / DELETE ... RETURNING /
--    projection as src/delivery/drain_batch.cpp, the fastest form of it we know) in batches, one
--    transaction per batch, nothing sent. The worker normally takes its batches without SQL
--    (src/delivery/job_taker.h); the SQL path is what it runs on a table its owner changed.
CREATE SCHEMA bench;

CREATE FUNCTION bench.payload(n bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT format('{"class": "InvoiceMailer", "args": [%s, "customer-%s@example.com", {"plan": "pro", "locale": "en"}]}',
                  1000000 + n, n % 100000)::jsonb
$$;

-- The comparison tables have jobbuf.jobs's columns, defaults and indexes (LIKE ... INCLUDING),
-- with their own id sequences, and no trigger: what an application's hand-made staging table is.
CREATE TABLE bench.staged_jobs (LIKE jobbuf.jobs INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE SEQUENCE bench.staged_jobs_id_seq OWNED BY bench.staged_jobs.id;
ALTER TABLE bench.staged_jobs ALTER COLUMN id SET DEFAULT nextval('bench.staged_jobs_id_seq');

CREATE TABLE bench.plain_jobs (LIKE jobbuf.jobs INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE SEQUENCE bench.plain_jobs_id_seq OWNED BY bench.plain_jobs.id;
ALTER TABLE bench.plain_jobs ALTER COLUMN id SET DEFAULT nextval('bench.plain_jobs_id_seq');

CREATE TABLE bench.pk_jobs (
    id         bigserial PRIMARY KEY,
    queue      text NOT NULL,
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Drains queue q of jobbuf.jobs with the worker's SQL-path statement (src/delivery/drain_batch.cpp: the same
-- WHERE with the cursor, ORDER BY, LIMIT, FOR UPDATE SKIP LOCKED, DELETE ... RETURNING and
-- projection), batch_size rows per transaction. Returns the jobs taken and the bytes of JSON
-- text produced (so the projection is computed). To count them the DELETE sits in a CTE, which
-- adds one tuplestore pass the worker does not have.
CREATE PROCEDURE bench.sql_ceiling(q text, batch_size integer, sidekiq boolean,
                                   INOUT n_jobs bigint DEFAULT 0, INOUT n_bytes bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    b bigint;
    cursor_id bigint := 0;
BEGIN
    LOOP
        WITH picked AS (
            SELECT id FROM jobbuf.jobs
            WHERE queue <= q AND (queue, id) > (q, cursor_id) AND group_id IS NULL AND (sidekiq OR run_at <= now())
            ORDER BY queue, id LIMIT batch_size FOR UPDATE SKIP LOCKED
        ), taken AS (
            DELETE FROM jobbuf.jobs j WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p))
            RETURNING j.id,
                CASE WHEN sidekiq AND j.payload ?| '{queue,jid,created_at,enqueued_at}'
                     THEN (j.payload - '{queue,jid,created_at,enqueued_at}'::text[])::text
                     ELSE j.payload::text END AS body,
                date_part('epoch', j.staged_at) AS staged_epoch, date_part('epoch', j.run_at) AS run_epoch,
                sidekiq AND j.payload ? 'retry' AS has_retry,
                j.payload, j.partition_key, j.unique_key, j.staged_at, j.attempts
        )
        SELECT count(*), coalesce(sum(length(body)), 0), max(id) INTO n, b, cursor_id FROM taken;
        EXIT WHEN n = 0;
        n_jobs := n_jobs + n;
        n_bytes := n_bytes + b;
        COMMIT;
    END LOOP;
    COMMIT;
END $$;

SELECT jobbuf_create_queue('bench_list', 'list');
SELECT jobbuf_create_queue('bench_sq', 'sidekiq');
SELECT jobbuf_create_queue('bench_stage', 'list');
SELECT jobbuf_create_queue('bench_bg', 'list');
SELECT jobbuf_create_queue('bench_lat', 'list');

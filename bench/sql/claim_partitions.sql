-- jobbuf benchmark: the cost of one claim without partition key (jobbuf_claim(queue, 1)) as the
-- number of partitions with ready work grows, and the claim-lock rows that queues cost.
-- Run with psql against a database where jobbuf is installed, as a superuser (it creates queues
-- and drops them again):
--   psql -X -v partitions=60000 -f bench/sql/claim_partitions.sql
-- It stages one job in each of :partitions partitions (at least 100 jobs) of a queue with target
-- none, then claims and completes a group 50 times (each claim in a transaction of its own, as
-- consumers do) and prints the mean and worst claim time; then the same with every partition
-- busy (a group in flight in each, a job waiting in each: 10 claims that find nothing); then it
-- creates :queues queues (default 1000) and prints how many rows jobbuf.claim_locks holds for
-- them before any claim. Nothing is left behind.
\set ON_ERROR_STOP on
\if :{?partitions}
\else
\set partitions 10
\endif
\if :{?queues}
\else
\set queues 1000
\endif
SET client_min_messages = warning;
SELECT jobbuf_create_queue('bench_claim_parts', 'none');
INSERT INTO jobbuf.jobs (queue, payload, partition_key)
SELECT 'bench_claim_parts', '{}'::jsonb, 'tenant-' || (g % :partitions)
FROM generate_series(1, greatest(:partitions, 100)) g;
ANALYZE jobbuf.jobs;

CREATE TEMP TABLE claim_times (ms float8);
-- time_claims(queue, n): n claims of one job without partition key, each in a transaction of its
-- own (completed when it took one); their times in claim_times.
CREATE PROCEDURE pg_temp.time_claims(q text, n integer) LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz;
    gid uuid;
BEGIN
    TRUNCATE claim_times;
    FOR i IN 1..n LOOP
        started := clock_timestamp();
        SELECT c.group_id INTO gid FROM jobbuf_claim(q, 1) c;
        INSERT INTO claim_times VALUES (extract(epoch FROM clock_timestamp() - started) * 1000);
        IF gid IS NOT NULL THEN
            PERFORM jobbuf_complete(gid);
        END IF;
        COMMIT;
    END LOOP;
END $$;
CALL pg_temp.time_claims('bench_claim_parts', 50);
SELECT :partitions AS partitions, round(avg(ms)::numeric, 2) AS claim_ms_mean,
       round(max(ms)::numeric, 2) AS claim_ms_max FROM claim_times;
SELECT jobbuf_drop_queue('bench_claim_parts', true);

-- The same number of partitions, each with a group in flight and a job waiting: claims without
-- partition key find nothing to take (10 claims, the mean and worst).
SELECT jobbuf_create_queue('bench_claim_busy', 'none');
INSERT INTO jobbuf.jobs (queue, payload, partition_key, group_id, lease_until)
SELECT 'bench_claim_busy', '{}'::jsonb, 'tenant-' || g, gen_random_uuid(), now() + interval '1 hour'
FROM generate_series(1, :partitions) g;
INSERT INTO jobbuf.jobs (queue, payload, partition_key)
SELECT 'bench_claim_busy', '{}'::jsonb, 'tenant-' || g FROM generate_series(1, :partitions) g;
VACUUM ANALYZE jobbuf.jobs;
CALL pg_temp.time_claims('bench_claim_busy', 10);
SELECT :partitions AS busy_partitions, round(avg(ms)::numeric, 2) AS empty_claim_ms_mean,
       round(max(ms)::numeric, 2) AS empty_claim_ms_max FROM claim_times;
SELECT jobbuf_drop_queue('bench_claim_busy', true);

SELECT count(jobbuf_create_queue('bench_claim_q' || g, 'none')) AS queues_created
FROM generate_series(1, :queues) g;
SELECT :queues AS queues, count(*) AS claim_lock_rows,
       pg_size_pretty(pg_total_relation_size('jobbuf.claim_locks')) AS claim_locks_size
FROM jobbuf.claim_locks;
SELECT count(jobbuf_drop_queue('bench_claim_q' || g, true)) AS queues_dropped
FROM generate_series(1, :queues) g;

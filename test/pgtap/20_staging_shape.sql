-- pgTAP: the staging trigger on a jobbuf.jobs whose owner changed it (src/staging/staged_job_trigger.cpp,
-- src/metadata/jobs_table_shape.cpp), and the foreign key jobs (queue) -> queues (name) that orders backups
-- (src/sql/00_schema.sql), whose check on INSERT the staging paths do not run.
BEGIN;
SELECT plan(17);

SELECT jobbuf_create_queue('shape_direct', 'none');
SELECT jobbuf_create_queue('shape_q', 'sidekiq');

-- The foreign key, and no query per staged job for it: jobbuf_stage still takes the direct insert
-- (its queue is checked in the backend's cache), and a plain INSERT does not run the key's check
-- (disabled as created). An owner who enables it again gets it on INSERT only.
SELECT is((SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'jobs_queue_fkey'
           AND conrelid = 'jobbuf.jobs'::regclass),
          'FOREIGN KEY (queue) REFERENCES jobbuf.queues(name)', 'jobbuf.jobs (queue) references jobbuf.queues');
SELECT ok(jobbuf_stage('shape_direct', '{"n": 0}'::jsonb) IS NOT NULL, 'jobbuf_stage stages (and caches the queue)');
CREATE FUNCTION pg_temp.queue_reads() RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
    WHERE relid = 'jobbuf.queues'::regclass $$;
-- Stages seven jobs with jobbuf_stage and three with INSERT; returns how often jobbuf.queues was read.
CREATE FUNCTION pg_temp.stage_ten() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_temp.queue_reads();
BEGIN
    PERFORM jobbuf_stage('shape_direct', jsonb_build_object('n', g)) FROM generate_series(1, 5) g;
    PERFORM jobbuf_stage('shape_direct', ARRAY['{"n": 6}', '{"n": 7}']::jsonb[]);
    INSERT INTO jobbuf.jobs (queue, payload) SELECT 'shape_direct', jsonb_build_object('n', g) FROM generate_series(8, 10) g;
    RETURN pg_temp.queue_reads() - before;
END $$;
SELECT is(pg_temp.stage_ten(), 0::bigint,
          'seven jobs through jobbuf_stage, three through INSERT: jobbuf.queues read 0 times');
ALTER TABLE jobbuf.jobs ENABLE TRIGGER ALL;
SELECT is(pg_temp.stage_ten(), 3::bigint,
          'with the key''s check enabled again: read 3 times, for the three INSERTed jobs only');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'shape_direct'), 21, 'all 21 jobs staged');
SELECT throws_ok($$ DELETE FROM jobbuf.queues WHERE name = 'shape_direct' $$, '23503', NULL,
                 'a queue with jobs cannot be deleted behind jobbuf_drop_queue''s back');
SELECT throws_ok($$ INSERT INTO jobbuf.jobs (queue, payload) VALUES ('shape_nope', '{}') $$, '42704',
                 'jobbuf: unknown queue "shape_nope"', 'an unknown queue is refused with the validation trigger''s error');

-- An owner's extra column (before the extension's, as a dropped and re-added column would be):
-- the trigger finds the columns it reads by name; jobbuf_stage takes the SQL path.
ALTER TABLE jobbuf.jobs ADD COLUMN tenant text;
ALTER TABLE jobbuf.jobs DROP COLUMN run_at;
ALTER TABLE jobbuf.jobs ADD COLUMN run_at timestamptz NOT NULL DEFAULT now();
SELECT lives_ok($$ INSERT INTO jobbuf.jobs (queue, payload, run_at, staged_at, tenant)
                   VALUES ('shape_q', '{"class": "W", "args": []}', NULL, NULL, 't1') $$,
                'INSERT into the re-shaped table: explicit NULL run_at and staged_at accepted');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE tenant = 't1' AND run_at IS NOT NULL AND staged_at IS NOT NULL),
          1, 'the NULL run_at and staged_at were filled by name, not by position');
SELECT throws_ok($$ INSERT INTO jobbuf.jobs (queue, payload) VALUES ('shape_q', '{"args": []}') $$, '22023',
                 'jobbuf: a job for sidekiq queue "shape_q" needs a string "class"',
                 'the payload is still validated for its queue (read by name)');
SELECT ok(jobbuf_stage('shape_q', '{"class": "W", "args": [1]}'::jsonb) IS NOT NULL,
          'jobbuf_stage works on the re-shaped table');

-- A column whose type is not the extension's: refused clearly, nothing read as the wrong type.
ALTER TABLE jobbuf.jobs ALTER COLUMN payload TYPE json USING payload::json;
SELECT throws_ok($$ INSERT INTO jobbuf.jobs (queue, payload) VALUES ('shape_q', '{"class": "W", "args": []}') $$,
                 '55000', 'jobbuf: column "payload" of jobbuf.jobs is of type json, not jsonb as the extension created it',
                 'INSERT with payload json is refused, naming the column');
SELECT throws_ok($$ SELECT jobbuf_stage('shape_q', '{"class": "W", "args": []}'::jsonb) $$, '55000', NULL,
                 'jobbuf_stage is refused the same way');
SELECT throws_ok($$ SELECT jobbuf_stage('shape_q', ARRAY['{"class": "W", "args": []}']::jsonb[]) $$, '55000', NULL,
                 'and the array form');
ALTER TABLE jobbuf.jobs ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
SELECT ok(jobbuf_stage('shape_q', '{"class": "W", "args": [2]}'::jsonb) IS NOT NULL,
          'jobbuf_stage works again once the column is jsonb again');

ALTER TABLE jobbuf.jobs RENAME COLUMN queue TO queue_name;
SELECT throws_ok($$ INSERT INTO jobbuf.jobs (queue_name, payload) VALUES ('shape_q', '{"class": "W", "args": []}') $$,
                 '55000', 'jobbuf: jobbuf.jobs has no column "queue"', 'a missing column is refused, naming it');
ALTER TABLE jobbuf.jobs RENAME COLUMN queue_name TO queue;
SELECT lives_ok($$ INSERT INTO jobbuf.jobs (queue, payload) VALUES ('shape_q', '{"class": "W", "args": [3]}') $$,
                'and INSERT works again once it is back');

SELECT * FROM finish();
ROLLBACK;

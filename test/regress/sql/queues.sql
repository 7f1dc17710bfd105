-- Queue lifecycle: create (every target, every option kind), duplicate, if_not_exists, alter
-- (merge, null removes, validated), drop (refused while jobs remain, force), pause / resume.
-- No worker drains this database's queues here; jobs are staged only on paused or 'none' queues.
\set SHOW_CONTEXT never
-- Each file starts from a fresh installation, so that the files do not depend on each other.
SET client_min_messages = error;  -- DROP EXTENSION warns about the jobs it discards
DROP EXTENSION IF EXISTS jobbuf;
CREATE EXTENSION jobbuf;
RESET client_min_messages;

-- Every target, defaults.
SELECT jobbuf_create_queue('q_default');
SELECT jobbuf_create_queue('q_list', 'list');
SELECT jobbuf_create_queue('q_stream', 'stream');
SELECT jobbuf_create_queue('q_sidekiq', 'sidekiq');
SELECT jobbuf_create_queue('q_none', 'none');
SELECT jobbuf_create_queue('q_null_options', 'list', NULL);

-- Every option kind.
SELECT jobbuf_create_queue('q_list_opts', 'list',
    '{"key": "myapp:jobs", "batch_size": 500, "max_attempts": 3, "backoff_base": 0.5,
      "backoff_max": 60, "visibility": 30, "archive": true}');
SELECT jobbuf_create_queue('q_stream_opts', 'stream', '{"key": "events", "maxlen": 10000}');
SELECT jobbuf_create_queue('q_sidekiq_opts', 'sidekiq',
    '{"sidekiq_queue": "critical", "namespace": "myapp", "sidekiq_version": 8, "retry_unused": null}');
SELECT jobbuf_create_queue('q_sidekiq_opts', 'sidekiq',
    '{"sidekiq_queue": "critical", "namespace": "myapp", "sidekiq_version": 8}');
SELECT jobbuf_create_queue('q_sidekiq6', 'sidekiq', '{"sidekiq_version": 6}');
SELECT jobbuf_create_queue('q_group', 'sidekiq',
    '{"delivery": "group", "group_class": "BatchJob", "batch_size": 100}');
SELECT jobbuf_create_queue('q_batches', 'none',
    '{"min_batch": 10, "max_wait": 2.5, "batch_size": 50, "max_in_flight": 2, "order": "run_at",
      "delivery": "each", "backoff_base": 0}');
SELECT jobbuf_create_queue('q_list_group', 'list', '{"delivery": "group", "order": "id"}');

-- Valid names: 1 and 63 characters, every allowed character.
SELECT jobbuf_create_queue('x');
SELECT jobbuf_create_queue(repeat('n', 63));
SELECT jobbuf_create_queue('App:mail.v2-high_prio:0');

SELECT name, target, options, paused FROM jobbuf.queues ORDER BY name;
SELECT queue, delivered_total, failed_total, last_error, last_delivery_at FROM jobbuf.queue_stats ORDER BY queue;

-- A duplicate is refused and changes nothing.
SELECT jobbuf_create_queue('q_list', 'stream');
SELECT target FROM jobbuf.queues WHERE name = 'q_list';

-- if_not_exists (a migration that creates its queues, run twice): the same target leaves the
-- queue as it is, with a NOTICE (its options are neither compared nor merged); another target
-- is an error naming both; the arguments are checked either way; false and NULL are the default.
-- One function: jobbuf_create_queue('q') above was not ambiguous.
SELECT count(*) FROM pg_proc WHERE proname = 'jobbuf_create_queue';
SELECT jobbuf_create_queue('q_list_opts', 'list', '{"batch_size": 7}', true);
SELECT jobbuf_create_queue('q_list_opts', if_not_exists => true);
SELECT options FROM jobbuf.queues WHERE name = 'q_list_opts';
SELECT jobbuf_create_queue('q_list_opts', 'stream', '{"key": "events"}', if_not_exists => true);
SELECT jobbuf_create_queue('q_list_opts', 'list', '{"colour": "red"}', if_not_exists => true);
SELECT jobbuf_create_queue('q_list_opts', 'list', if_not_exists => false);
SELECT jobbuf_create_queue('q_list_opts', 'list', '{}', NULL);
SELECT name, target, options FROM jobbuf.queues WHERE name = 'q_list_opts';
-- A queue that does not exist is created, with its statistics row.
BEGIN;
SELECT jobbuf_create_queue('q_migrated', 'sidekiq', '{"sidekiq_queue": "mail"}', if_not_exists => true);
SELECT jobbuf_create_queue('q_migrated', 'sidekiq', '{"sidekiq_queue": "other"}', if_not_exists => true);
COMMIT;
SELECT q.name, q.target, q.options, s.queue IS NOT NULL AS has_stats
FROM jobbuf.queues q LEFT JOIN jobbuf.queue_stats s ON s.queue = q.name WHERE q.name = 'q_migrated';
-- The error is raised in the caller's transaction, which it aborts.
BEGIN;
SELECT jobbuf_pause('q_migrated');
SELECT jobbuf_create_queue('q_migrated', 'celery', if_not_exists => true);
SELECT 1;
ROLLBACK;
SELECT name, target, paused FROM jobbuf.queues WHERE name = 'q_migrated';
SELECT jobbuf_drop_queue('q_migrated');

-- Alter: options are merged; a JSON null removes an option; the result is validated as a whole.
SELECT jobbuf_alter_queue('q_list_opts', '{"batch_size": 10, "min_batch": 2}');
SELECT options FROM jobbuf.queues WHERE name = 'q_list_opts';
SELECT jobbuf_alter_queue('q_list_opts', '{"key": null, "archive": false, "min_batch": null, "no_such": null}');
SELECT options FROM jobbuf.queues WHERE name = 'q_list_opts';
SELECT jobbuf_alter_queue('q_list_opts', '{}');
SELECT options FROM jobbuf.queues WHERE name = 'q_list_opts';
SELECT jobbuf_alter_queue('q_list_opts', '{"batch_size": 0}');
SELECT jobbuf_alter_queue('q_list_opts', '{"colour": "red"}');
SELECT jobbuf_alter_queue('q_list_opts', '{"namespace": "x"}');
SELECT jobbuf_alter_queue('q_batches', '{"min_batch": 100}');
SELECT jobbuf_alter_queue('q_batches', '{"min_batch": 50}');
SELECT jobbuf_alter_queue('q_group', '{"group_class": null}');
SELECT jobbuf_alter_queue('q_list_opts', '[]');
SELECT jobbuf_alter_queue('q_list_opts', NULL);
SELECT jobbuf_alter_queue('no_such_queue', '{}');
SELECT name, options FROM jobbuf.queues WHERE name IN ('q_list_opts', 'q_batches', 'q_group') ORDER BY name;

-- Pause and resume: flags, idempotent, unknown queue.
SELECT jobbuf_pause('q_list');
SELECT jobbuf_pause('q_list');
SELECT name, paused FROM jobbuf.queues WHERE name IN ('q_list', 'q_stream') ORDER BY name;
SELECT queue, paused FROM jobbuf_stats() WHERE queue IN ('q_list', 'q_stream');
SELECT jobbuf_resume('q_list');
SELECT jobbuf_resume('q_list');
SELECT jobbuf_resume('q_stream');
SELECT name, paused FROM jobbuf.queues WHERE name IN ('q_list', 'q_stream') ORDER BY name;
SELECT jobbuf_pause('no_such_queue');
SELECT jobbuf_resume(NULL);

-- Drop: refused while jobs remain (with a hint), unless forced; the jobs go with the queue.
SELECT jobbuf_pause('q_list');
SELECT count(*) FROM jobbuf_stage('q_list', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT count(*) FROM jobbuf_stage('q_none', ARRAY['{"n": 1}']::jsonb[]);
SELECT jobbuf_drop_queue('q_list');
SELECT jobbuf_drop_queue('q_list', false);
SELECT queue, count(*) FROM jobbuf.jobs GROUP BY queue ORDER BY queue;
SELECT jobbuf_drop_queue('q_list', force => true);
SELECT queue, count(*) FROM jobbuf.jobs GROUP BY queue ORDER BY queue;
SELECT count(*) FROM jobbuf.queues WHERE name = 'q_list';
SELECT count(*) FROM jobbuf.queue_stats WHERE queue = 'q_list';
SELECT jobbuf_drop_queue('q_list');
SELECT jobbuf_drop_queue('q_default');
SELECT jobbuf_drop_queue('q_null_options', NULL);
-- A dropped queue accepts no more jobs, and can be created again.
SELECT jobbuf_stage('q_default', '{}'::jsonb);
SELECT jobbuf_create_queue('q_default', 'stream');
SELECT name, target FROM jobbuf.queues WHERE name = 'q_default';

-- jobbuf_stats() counts as of the last census: taken here by hand, with every queue's row of
-- jobbuf.queue_stats held until COMMIT, so that this database's worker (jobbuf.database '*') does
-- not publish a census it began before the statements above over it (staging.sql says more).
BEGIN;
SELECT count(*) > 0 AS queues_held FROM (SELECT queue FROM jobbuf.queue_stats FOR UPDATE) held;
SELECT jobbuf.take_census() > 0 AS counted;
SELECT queue, target, paused, ready, scheduled, claimed, dead, delivered_total, failed_total, last_error
FROM jobbuf_stats();
COMMIT;

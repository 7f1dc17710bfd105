-- Bad input is refused with a clear error (and a hint where one helps) in the caller's
-- transaction: queue names, targets, options, payloads - by jobbuf_stage and by plain INSERT.
\set SHOW_CONTEXT never
-- Each file starts from a fresh installation, so that the files do not depend on each other.
SET client_min_messages = error;  -- DROP EXTENSION warns about the jobs it discards
DROP EXTENSION IF EXISTS jobbuf;
CREATE EXTENSION jobbuf;
RESET client_min_messages;

-- Queue names: 1-63 characters of [A-Za-z0-9_.:-].
SELECT jobbuf_create_queue('');
SELECT jobbuf_create_queue(repeat('n', 64));
SELECT jobbuf_create_queue(NULL);
SELECT jobbuf_create_queue('has space');
SELECT jobbuf_create_queue(' lead');
SELECT jobbuf_create_queue('trail ');
SELECT jobbuf_create_queue('quote''s');
SELECT jobbuf_create_queue('double"quote');
SELECT jobbuf_create_queue('x''); DROP TABLE jobbuf.jobs; --');
SELECT jobbuf_create_queue('q; DROP SCHEMA jobbuf CASCADE');
SELECT jobbuf_create_queue('a/b');
SELECT jobbuf_create_queue('back\slash');
SELECT jobbuf_create_queue('star*');
SELECT jobbuf_create_queue(E'new\nline');
SELECT jobbuf_create_queue(E'tab\there');
SELECT jobbuf_create_queue('ümlaut');
SELECT jobbuf_create_queue('{curly}');
-- The table refuses them too (a direct INSERT bypassing the functions).
\set VERBOSITY terse
INSERT INTO jobbuf.queues (name, target) VALUES ('bad name', 'list');
INSERT INTO jobbuf.queues (name, target) VALUES ('ok', 'kafka');
INSERT INTO jobbuf.queues (name, target, options) VALUES ('ok', 'list', '[]');
\set VERBOSITY default
-- Nothing was created, and the tables are intact.
SELECT count(*) FROM jobbuf.queues;
SELECT to_regclass('jobbuf.jobs') IS NOT NULL AS jobs_table_intact;

-- Targets.
SELECT jobbuf_create_queue('t', 'kafka');
SELECT jobbuf_create_queue('t', 'LIST');
SELECT jobbuf_create_queue('t', '');
SELECT jobbuf_create_queue('t', NULL);

-- Options: unknown names, not an object.
SELECT jobbuf_create_queue('t', 'list', '{"colour": "red"}');
SELECT jobbuf_create_queue('t', 'list', '{"Key": "x"}');
SELECT jobbuf_create_queue('t', 'list', '[]');
SELECT jobbuf_create_queue('t', 'list', '"key"');
-- Positive integers: maxlen, batch_size, max_attempts, min_batch, max_in_flight, visibility.
SELECT jobbuf_create_queue('t', 'stream', '{"maxlen": "1000"}');
SELECT jobbuf_create_queue('t', 'stream', '{"maxlen": 0}');
SELECT jobbuf_create_queue('t', 'stream', '{"maxlen": -5}');
SELECT jobbuf_create_queue('t', 'stream', '{"maxlen": 1.5}');
SELECT jobbuf_create_queue('t', 'stream', '{"maxlen": 2147483648}');
SELECT jobbuf_create_queue('t', 'list', '{"batch_size": 0}');
SELECT jobbuf_create_queue('t', 'list', '{"batch_size": 100001}');
SELECT jobbuf_create_queue('t', 'list', '{"batch_size": null}');
SELECT jobbuf_create_queue('t', 'list', '{"max_attempts": true}');
SELECT jobbuf_create_queue('t', 'none', '{"min_batch": 0}');
SELECT jobbuf_create_queue('t', 'none', '{"max_in_flight": [1]}');
SELECT jobbuf_create_queue('t', 'none', '{"visibility": -1}');
-- Seconds: backoff_base, backoff_max, max_wait (0 .. 31536000, fractions allowed).
SELECT jobbuf_create_queue('t', 'none', '{"backoff_base": -0.1}');
SELECT jobbuf_create_queue('t', 'none', '{"backoff_max": "1h"}');
SELECT jobbuf_create_queue('t', 'none', '{"max_wait": 31536001}');
-- Enumerations and booleans.
SELECT jobbuf_create_queue('t', 'none', '{"archive": "yes"}');
SELECT jobbuf_create_queue('t', 'none', '{"archive": 1}');
SELECT jobbuf_create_queue('t', 'none', '{"order": "fifo"}');
SELECT jobbuf_create_queue('t', 'none', '{"order": 1}');
SELECT jobbuf_create_queue('t', 'list', '{"delivery": "batch"}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"sidekiq_version": 9}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"sidekiq_version": "7"}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"sidekiq_version": 7.0}');
-- Options that apply to other targets only: key (list, stream), maxlen (stream).
SELECT jobbuf_create_queue('t', 'list', '{"maxlen": 10}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"key": "x"}');
SELECT jobbuf_create_queue('t', 'none', '{"key": "x"}');
-- Strings: key, group_class, namespace (1..512 characters); sidekiq_queue (a queue name).
SELECT jobbuf_create_queue('t', 'list', '{"key": ""}');
SELECT jobbuf_create_queue('t', 'list', '{"key": 42}');
SELECT jobbuf_create_queue('t', 'list', jsonb_build_object('key', repeat('k', 513)));
SELECT jobbuf_create_queue('t', 'sidekiq', '{"sidekiq_queue": "has space"}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"namespace": ""}');
-- Options that belong to another target, and combinations.
SELECT jobbuf_create_queue('t', 'list', '{"sidekiq_queue": "default"}');
SELECT jobbuf_create_queue('t', 'stream', '{"namespace": "ns"}');
SELECT jobbuf_create_queue('t', 'none', '{"group_class": "G"}');
SELECT jobbuf_create_queue('t', 'none', '{"delivery": "group"}');
SELECT jobbuf_create_queue('t', 'sidekiq', '{"delivery": "group"}');
SELECT jobbuf_create_queue('t', 'none', '{"min_batch": 20, "batch_size": 10}');
SELECT count(*) FROM jobbuf.queues;

-- Staging: unknown queue, NULL queue, NULL payload - each with a hint.
SELECT jobbuf_create_queue('v_list', 'list');
SELECT jobbuf_pause('v_list');
SELECT jobbuf_stage('no_such_queue', '{"a": 1}'::jsonb);
SELECT jobbuf_stage(NULL, '{"a": 1}'::jsonb);
SELECT jobbuf_stage('v_list', NULL::jsonb);
SELECT jobbuf_stage('v_list', NULL::text);
SELECT jobbuf_stage('v_list', 'not json');
SELECT jobbuf_stage('v_list', ARRAY['{"a": 1}', NULL]::jsonb[]);
SELECT jobbuf_stage('no_such_queue', ARRAY['{"a": 1}']::jsonb[]);
-- Any JSON value is a valid payload for list, stream and none queues.
SELECT count(*) FROM jobbuf_stage('v_list', ARRAY['1', '"s"', 'null', '[]', '{}', 'true']::jsonb[]);

-- Sidekiq queues (delivery each): an object with a string "class" and an array "args".
SELECT jobbuf_create_queue('v_sidekiq', 'sidekiq');
SELECT jobbuf_pause('v_sidekiq');
SELECT jobbuf_stage('v_sidekiq', '{"args": [1]}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '{"class": 42, "args": [1]}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '{"class": null, "args": [1]}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '{"class": "HardWorker"}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '{"class": "HardWorker", "args": {"a": 1}}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '{"class": "HardWorker", "args": "1, 2"}'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '["HardWorker", [1, 2]]'::jsonb);
SELECT jobbuf_stage('v_sidekiq', '"HardWorker"'::jsonb);
SELECT jobbuf_stage('v_sidekiq', ARRAY['{"class": "A", "args": []}', '{"class": "B"}']::jsonb[]);
SELECT jobbuf_stage('v_sidekiq', '{"class": "HardWorker", "args": []}'::jsonb) IS NOT NULL AS staged;
SELECT jobbuf_stage('v_sidekiq', '{"class": "HardWorker", "args": [1, "x", {"k": null}], "retry": 3, "tags": ["a"]}'::jsonb) IS NOT NULL AS staged;
-- A sidekiq queue with delivery group carries any payload (one message per group).
SELECT jobbuf_create_queue('v_sidekiq_group', 'sidekiq', '{"delivery": "group", "group_class": "G"}');
SELECT jobbuf_pause('v_sidekiq_group');
SELECT jobbuf_stage('v_sidekiq_group', '{"anything": 1}'::jsonb) IS NOT NULL AS staged;

-- A plain INSERT is validated exactly the same way.
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('no_such_queue', '{}');
INSERT INTO jobbuf.jobs (queue, payload) VALUES (NULL, '{}');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_list', NULL);
INSERT INTO jobbuf.jobs (queue) VALUES ('v_list');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_sidekiq', '{"args": []}');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_sidekiq', '{"class": "HardWorker", "args": 5}');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_sidekiq', '{"class": "A", "args": []}'), ('v_sidekiq', '{"class": "B"}');
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_sidekiq', '{"class": "HardWorker", "args": []}');
-- A failed statement stages nothing, also inside a transaction that goes on.
BEGIN;
SELECT jobbuf_stage('v_list', '{"in": "tx"}'::jsonb) IS NOT NULL AS staged;
SAVEPOINT s;
SELECT jobbuf_stage('v_sidekiq', '{"class": "A"}'::jsonb);
ROLLBACK TO SAVEPOINT s;
COMMIT;

SELECT queue, payload FROM jobbuf.jobs ORDER BY id;
-- A queue dropped later: jobs cannot be staged for it any more (the cached metadata is invalidated).
SELECT jobbuf_drop_queue('v_sidekiq_group', true);
SELECT jobbuf_stage('v_sidekiq_group', '{"anything": 1}'::jsonb);
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_sidekiq_group', '{}');

-- Job-framework targets: their options.
SELECT jobbuf_create_queue('t', 'list', '{"prefix": "bull"}');
SELECT jobbuf_create_queue('t', 'celery', '{"bullmq_queue": "q"}');
SELECT jobbuf_create_queue('t', 'bullmq', '{"celery_queue": "q"}');
SELECT jobbuf_create_queue('t', 'bullmq', '{"bullmq_queue": "a:b"}');
SELECT jobbuf_create_queue('t', 'bullmq', '{"prefix": ""}');
SELECT jobbuf_create_queue('t', 'celery', '{"delivery": "group"}');
SELECT jobbuf_create_queue('v_bullmq', 'bullmq', '{"prefix": "{app}", "bullmq_queue": "mail", "delivery": "group"}');
SELECT jobbuf_alter_queue('v_bullmq', '{"delivery": null}');
SELECT jobbuf_create_queue('v_celery', 'celery', '{"celery_queue": "{app}.tasks", "group_class": "app.digest"}');
SELECT jobbuf_pause('v_bullmq');
SELECT jobbuf_pause('v_celery');
-- BullMQ payloads: {"name": text, "data": any[, "opts": {priority, attempts, backoff, removeOnComplete, removeOnFail}]}.
SELECT jobbuf_stage('v_bullmq', '{"data": 1}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": 1, "data": 1}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n"}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "delay": 5}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": []}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"jobId": "x"}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"priority": 1.5}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"priority": 2097152}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"attempts": -1}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"backoff": "fast"}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"backoff": {"delay": 5}}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"removeOnFail": "yes"}}'::jsonb);
-- What BullMQ's Worker cannot run: an unknown backoff type, removeOn* members that are not integers.
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"backoff": {"type": "nonesuch"}}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"backoff": {"type": "fixed", "delay": 5, "x": 1}}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"removeOnComplete": {"age": "abc"}}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"removeOnFail": {"count": "x"}}}'::jsonb);
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1, "opts": {"removeOnFail": {"keep": 1}}}'::jsonb);
-- No Redis format carries an infinite time.
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": 1}'::jsonb, run_at => 'infinity');
INSERT INTO jobbuf.jobs (queue, payload, run_at) VALUES ('v_bullmq', '{"name": "n", "data": 1}', '-infinity');
INSERT INTO jobbuf.jobs (queue, payload, staged_at) VALUES ('v_bullmq', '{"name": "n", "data": 1}', 'infinity');
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": null}'::jsonb) IS NOT NULL AS staged;
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": [1], "opts": {"priority": 2097151, "attempts": 3,
  "backoff": {"type": "exponential", "delay": 100}, "removeOnComplete": true, "removeOnFail": {"age": 60}}}'::jsonb) IS NOT NULL AS staged;
SELECT jobbuf_stage('v_bullmq', '{"name": "n", "data": {}, "opts": {"backoff": 100, "removeOnFail": 10}}'::jsonb) IS NOT NULL AS staged;
-- Celery payloads: {"task": text[, "args": array][, "kwargs": object]}.
SELECT jobbuf_stage('v_celery', '{"args": []}'::jsonb);
SELECT jobbuf_stage('v_celery', '{"task": "t", "args": {}}'::jsonb);
SELECT jobbuf_stage('v_celery', '{"task": "t", "kwargs": []}'::jsonb);
SELECT jobbuf_stage('v_celery', '{"task": "t", "queue": "q"}'::jsonb);
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('v_celery', '{"task": "t", "args": 1}');
SELECT jobbuf_stage('v_celery', '{"task": "t"}'::jsonb) IS NOT NULL AS staged;
SELECT jobbuf_stage('v_celery', '{"task": "t", "args": [1, "x"], "kwargs": {"k": null}}'::jsonb) IS NOT NULL AS staged;
SELECT jobbuf_drop_queue('v_bullmq', true);
SELECT jobbuf_drop_queue('v_celery', true);

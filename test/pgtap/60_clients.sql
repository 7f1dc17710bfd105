-- pgTAP: jobbuf_queue_for (src/sql/95_clients.sql), the framework queue lookup the clients call.
BEGIN;
SELECT plan(15);

SELECT jobbuf_create_queue('mail', 'bullmq');
SELECT jobbuf_create_queue('mail_eu', 'bullmq', '{"bullmq_queue": "mail"}');
SELECT jobbuf_create_queue('reports', 'bullmq', '{"bullmq_queue": "report-jobs"}');
SELECT jobbuf_create_queue('tasks', 'celery');
SELECT jobbuf_create_queue('urgent_tasks', 'celery', '{"celery_queue": "urgent"}');
SELECT jobbuf_create_queue('default', 'sidekiq');
SELECT jobbuf_create_queue('crit', 'sidekiq', '{"sidekiq_queue": "critical"}');
SELECT jobbuf_create_queue('lists', 'list');
CREATE ROLE qf_producer LOGIN IN ROLE jobbuf_producer;
CREATE ROLE qf_nobody LOGIN;

SELECT is(jobbuf_queue_for('sidekiq', 'default'), 'default', 'sidekiq_queue defaults to the jobbuf queue''s name');
SELECT is(jobbuf_queue_for('sidekiq', 'critical'), 'crit', 'the sidekiq_queue option maps a Sidekiq queue');
SELECT is(jobbuf_queue_for('bullmq', 'report-jobs'), 'reports', 'the bullmq_queue option maps a BullMQ queue');
SELECT is(jobbuf_queue_for('bullmq', 'mail'), 'mail', 'of two jobbuf queues delivering into "mail", the one named mail wins');
SELECT is(jobbuf_queue_for('celery', 'celery'), 'tasks', 'celery_queue defaults to "celery", where the worker delivers');
SELECT is(jobbuf_queue_for('celery', 'urgent'), 'urgent_tasks', 'the celery_queue option maps a Celery queue');
SELECT throws_ok($$ SELECT jobbuf_queue_for('sidekiq', 'crit') $$, '42704',
                 'jobbuf: no jobbuf queue delivers into the sidekiq queue "crit": create one (in a migration) with SELECT jobbuf_create_queue(''crit'', ''sidekiq'');',
                 'a queue named crit delivering elsewhere does not match; the error names the call to make');
SELECT throws_ok($$ SELECT jobbuf_queue_for('celery', 'low') $$, '42704',
                 'jobbuf: no jobbuf queue delivers into the celery queue "low": create one (in a migration) with SELECT jobbuf_create_queue(''low'', ''celery'', ''{"celery_queue": "low"}'');',
                 'for Celery the call names the celery_queue option');
SELECT throws_ok($$ SELECT jobbuf_queue_for('list', 'lists') $$, '22023', NULL, 'list and stream queues have no framework queue');
SELECT jobbuf_create_queue('celery_eu', 'celery');
SELECT throws_ok($$ SELECT jobbuf_queue_for('celery', 'celery') $$, '42P08', NULL,
                 'two jobbuf queues delivering into one Celery queue, neither named like it: an error');

SELECT ok(has_function_privilege('jobbuf_producer', 'jobbuf_queue_for(text, text)', 'EXECUTE'), 'jobbuf_producer may call it');
SELECT ok(NOT has_function_privilege('public', 'jobbuf_queue_for(text, text)', 'EXECUTE'), 'PUBLIC may not');
SELECT ok((SELECT 'search_path=pg_catalog, pg_temp' = ANY (proconfig) FROM pg_proc WHERE proname = 'jobbuf_queue_for'),
          'its search_path is pinned');
SET ROLE qf_producer;
SELECT is(jobbuf_queue_for('sidekiq', 'critical'), 'crit', 'a producer reads the mapping');
RESET ROLE;
SET ROLE qf_nobody;
SELECT throws_ok($$ SELECT jobbuf_queue_for('sidekiq', 'critical') $$, '42501', NULL, 'a role without a jobbuf role may not');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

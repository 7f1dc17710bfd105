-- pgTAP: the privilege model (src/sql/90_privileges.sql), tried as the wrong roles.
BEGIN;
SELECT plan(71);

SELECT jobbuf_create_queue('priv_q', 'none');
CREATE ROLE priv_producer LOGIN IN ROLE jobbuf_producer;
CREATE ROLE priv_consumer LOGIN IN ROLE jobbuf_consumer;
CREATE ROLE priv_admin LOGIN IN ROLE jobbuf_admin;
CREATE ROLE priv_nobody LOGIN;
CREATE ROLE priv_monitor LOGIN IN ROLE jobbuf_monitor;

-- Catalog-level properties.
SELECT is((SELECT count(*)::int FROM pg_proc p
           JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'jobbuf'
           WHERE has_function_privilege('public', p.oid, 'EXECUTE')),
          0, 'no jobbuf function is executable by PUBLIC');
SELECT is((SELECT count(*)::int FROM pg_proc p
           JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'jobbuf'
           WHERE p.prosecdef AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
             AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')),
          0, 'every SECURITY DEFINER function pins search_path');
SELECT ok((SELECT count(*) FROM pg_proc WHERE proname = 'jobbuf_claim' AND prosecdef) > 0,
          'jobbuf_claim runs as definer');

-- Producer: stages, and nothing else.
SET ROLE priv_producer;
SELECT ok(jobbuf_stage('priv_q', '{"a": 1}'::jsonb) IS NOT NULL, 'producer can jobbuf_stage');
SELECT lives_ok($$ INSERT INTO jobbuf.jobs (queue, payload) VALUES ('priv_q', '{"b": 2}') $$,
                'producer can INSERT into jobbuf.jobs');
SELECT throws_ok($$ SELECT payload FROM jobbuf.jobs $$, '42501', NULL, 'producer cannot read payloads');
SELECT throws_ok($$ UPDATE jobbuf.jobs SET attempts = 0 $$, '42501', NULL, 'producer cannot update jobs');
SELECT throws_ok($$ DELETE FROM jobbuf.jobs $$, '42501', NULL, 'producer cannot delete jobs');
SELECT throws_ok($$ INSERT INTO jobbuf.jobs (queue, payload, group_id) VALUES ('priv_q', '{}', gen_random_uuid()) $$,
                 '42501', NULL, 'producer cannot insert claimed jobs');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_q', 10) $$, '42501', NULL, 'producer cannot claim');
SELECT throws_ok($$ SELECT jobbuf_create_queue('priv_other', 'none') $$, '42501', NULL, 'producer cannot create queues');
SELECT throws_ok($$ SELECT jobbuf_purge_dead('priv_q') $$, '42501', NULL, 'producer cannot purge dead letters');
SELECT lives_ok($$ SELECT * FROM jobbuf_stats() $$, 'producer can read jobbuf_stats()');
RESET ROLE;

-- Consumer: claims and completes, nothing else.
SET ROLE priv_consumer;
SELECT is((SELECT count(*)::int FROM jobbuf_claim('priv_q', 10)), 2, 'consumer claims both jobs');
SELECT throws_ok($$ SELECT jobbuf_stage('priv_q', '{"c": 3}'::jsonb) $$, '42501', NULL, 'consumer cannot stage');
SELECT throws_ok($$ DELETE FROM jobbuf.jobs $$, '42501', NULL, 'consumer cannot delete jobs directly');
SELECT throws_ok($$ SELECT jobbuf_drop_queue('priv_q', true) $$, '42501', NULL, 'consumer cannot drop queues');
SELECT throws_ok($$ SELECT jobbuf_pause('priv_q') $$, '42501', NULL, 'consumer cannot pause queues');
RESET ROLE;

-- Monitor: the inspection functions, nothing else (docs/operations.md).
SET ROLE priv_monitor;
SELECT lives_ok($$ SELECT * FROM jobbuf_stats() $$, 'monitor can read jobbuf_stats()');
SELECT lives_ok($$ SELECT * FROM jobbuf_queue_metrics() $$, 'monitor can read jobbuf_queue_metrics()');
SELECT lives_ok($$ SELECT * FROM jobbuf_prometheus_queues() $$, 'monitor can read jobbuf_prometheus_queues()');
SELECT lives_ok($$ SELECT * FROM jobbuf_prometheus_schedules() $$, 'monitor can read jobbuf_prometheus_schedules()');
SELECT throws_ok($$ SELECT * FROM jobbuf_schedules() $$, '42501', NULL, 'monitor cannot read schedules (payloads)');
SELECT is((SELECT count(*)::int FROM jobbuf_prometheus_worker()), 1, 'monitor reads one worker row: this database''s');
SELECT throws_ok($$ SELECT count(*) FROM jobbuf.jobs $$, '42501', NULL, 'monitor cannot read jobs');
SELECT throws_ok($$ SELECT count(*) FROM jobbuf.queue_stats $$, '42501', NULL, 'monitor cannot read the tables behind the metrics');
SELECT throws_ok($$ SELECT jobbuf.take_census() $$, '42501', NULL, 'monitor cannot take a census');
SELECT throws_ok($$ SELECT jobbuf_stage('priv_q', '{}'::jsonb) $$, '42501', NULL, 'monitor cannot stage');
-- Flow control (docs/flow.md, "What you see"): the status and its exporter functions, not the
-- tables the worker writes, and nothing that could hold the worker's writes back.
SELECT lives_ok($$ SELECT * FROM jobbuf_flow_status() $$, 'monitor can read jobbuf_flow_status()');
SELECT lives_ok($$ SELECT * FROM jobbuf_prometheus_flow() $$, 'monitor can read jobbuf_prometheus_flow()');
SELECT lives_ok($$ SELECT * FROM jobbuf_prometheus_redis_memory() $$, 'monitor can read jobbuf_prometheus_redis_memory()');
SELECT throws_ok($$ SELECT count(*) FROM jobbuf.queue_flow $$, '42501', NULL, 'monitor cannot read jobbuf.queue_flow');
SELECT throws_ok($$ SELECT count(*) FROM jobbuf.redis_memory $$, '42501', NULL, 'monitor cannot read jobbuf.redis_memory');
RESET ROLE;
SET ROLE priv_producer;
SELECT lives_ok($$ SELECT * FROM jobbuf_flow_status() $$, 'producer can read jobbuf_flow_status()');
RESET ROLE;
SET ROLE priv_consumer;
SELECT lives_ok($$ SELECT * FROM jobbuf_flow_status() $$, 'consumer can read jobbuf_flow_status()');
RESET ROLE;
SET ROLE priv_admin;
SELECT lives_ok($$ SELECT * FROM jobbuf_flow_status() $$, 'admin can read jobbuf_flow_status()');
SELECT lives_ok($$ SELECT count(*) FROM jobbuf.queue_flow $$, 'admin reads jobbuf.queue_flow (as every jobbuf table)');
SELECT throws_ok($$ SELECT * FROM jobbuf.queue_flow FOR UPDATE $$, '42501', NULL, 'admin cannot lock jobbuf.queue_flow rows');
SELECT throws_ok($$ LOCK TABLE jobbuf.redis_memory IN EXCLUSIVE MODE $$, '42501', NULL, 'admin cannot lock jobbuf.redis_memory');
SELECT throws_ok($$ DELETE FROM jobbuf.queue_flow $$, '42501', NULL, 'admin cannot change jobbuf.queue_flow');
RESET ROLE;
SET ROLE priv_nobody;
SELECT throws_ok($$ SELECT * FROM jobbuf_flow_status() $$, '42501', NULL, 'a role without a jobbuf role cannot read jobbuf_flow_status()');
RESET ROLE;
SELECT ok((SELECT bool_and(prosecdef) FROM pg_proc
           WHERE proname IN ('jobbuf_flow_status', 'jobbuf_prometheus_flow', 'jobbuf_prometheus_redis_memory')),
          'the flow functions run as definer');
SELECT is((SELECT count(*)::int FROM jobbuf_flow_status() WHERE queue = 'priv_q'), 0,
          'jobbuf_flow_status() leaves out none queues');
SET ROLE priv_nobody;
SELECT throws_ok($$ SELECT * FROM jobbuf_queue_metrics() $$, '42501', NULL, 'a role without a jobbuf role cannot read the metrics');
RESET ROLE;

-- Admin: manages queues and dead letters, but does not stage or claim.
SET ROLE priv_admin;
SELECT lives_ok($$ SELECT jobbuf_create_queue('priv_admin_q', 'none') $$, 'admin creates a queue');
SELECT lives_ok($$ SELECT jobbuf_pause('priv_admin_q') $$, 'admin pauses a queue');
SELECT lives_ok($$ SELECT jobbuf_drop_queue('priv_admin_q') $$, 'admin drops a queue');
SELECT lives_ok($$ SELECT jobbuf_schedule('priv_s', '@yearly', 'priv_q', '{}') $$, 'admin schedules');
SELECT is((SELECT owner::text FROM jobbuf_schedules() WHERE name = 'priv_s'), 'priv_admin',
          'the schedule belongs to the calling role, not the definer');
SELECT throws_ok($$ SELECT jobbuf.stage_due_ticks() $$, '42501', NULL, 'admin cannot run the worker''s tick staging');
SELECT throws_ok($$ UPDATE jobbuf.schedules SET owner = 'postgres' $$, '42501', NULL, 'admin cannot rewrite a schedule''s owner');
SELECT lives_ok($$ SELECT jobbuf_unschedule('priv_s') $$, 'admin unschedules');
SELECT lives_ok($$ SELECT count(*) FROM jobbuf.dead $$, 'admin reads dead letters');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_q', 10) $$, '42501', NULL, 'admin cannot claim');
RESET ROLE;

-- jobbuf_stage checks the privileges of the INSERT it stands for: the array form inserts
-- (queue, payload), the single form (queue, payload, run_at, unique_key, partition_key).
CREATE ROLE priv_narrow LOGIN;
GRANT USAGE ON SCHEMA jobbuf TO priv_narrow;
GRANT EXECUTE ON FUNCTION jobbuf_stage(text, jsonb[]), jobbuf_stage(text, jsonb, timestamptz, text, text) TO priv_narrow;
GRANT INSERT (queue, payload), SELECT (id) ON jobbuf.jobs TO priv_narrow;
GRANT USAGE ON SEQUENCE jobbuf.jobs_id_seq TO priv_narrow;
GRANT SELECT ON jobbuf.queues TO priv_narrow;
SET ROLE priv_narrow;
SELECT lives_ok($$ SELECT count(*) FROM jobbuf_stage('priv_q', ARRAY['{"n": 1}']::jsonb[]) $$,
                'INSERT (queue, payload) is enough for the array form');
SELECT throws_ok($$ SELECT jobbuf_stage('priv_q', '{"n": 2}'::jsonb) $$, '42501', NULL,
                 'the single form needs INSERT on all five staging columns');
RESET ROLE;

-- Queues the worker delivers are not for jobbuf_claim: a consumer that claimed (and completed)
-- their jobs would take them from their Redis consumers. Group delivery queues are claimed by
-- the worker through jobbuf.claim, which only the extension's owner may call.
SELECT jobbuf_create_queue('priv_list', 'list');
SELECT jobbuf_create_queue('priv_stream', 'stream');
SELECT jobbuf_create_queue('priv_sidekiq', 'sidekiq');
SELECT jobbuf_create_queue('priv_group', 'list', '{"delivery": "group"}');
SET ROLE priv_consumer;
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_list') $$, '42809',
                 'jobbuf: queue ''priv_list'' is delivered to Redis by the worker (target list); it cannot be claimed',
                 'a list queue cannot be claimed');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_stream') $$, '42809', NULL, 'a stream queue cannot be claimed');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_sidekiq', 10, 'p') $$, '42809', NULL,
                 'a sidekiq queue cannot be claimed, by partition either');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('priv_group') $$, '42809', NULL, 'a group delivery queue cannot be claimed');
SELECT throws_ok($$ SELECT * FROM jobbuf.claim(jobbuf.known_queue('priv_group'), 10, NULL) $$, '42501', NULL,
                 'a consumer cannot call the internal claim');
SELECT throws_ok($$ SELECT l.slot FROM jobbuf.claim_locks l LIMIT 1 FOR UPDATE $$, '42501', NULL,
                 'a consumer cannot lock the claim slots');
RESET ROLE;
SELECT jobbuf_stage('priv_group', '{"g": 1}'::jsonb);
SELECT is((SELECT count(*)::int FROM jobbuf.claim(jobbuf.known_queue('priv_group'), 10, NULL)), 1,
          'the internal claim serves a group delivery queue');
SET ROLE priv_admin;
SELECT throws_ok($$ SELECT l.slot FROM jobbuf.claim_locks l LIMIT 1 FOR UPDATE $$, '42501', NULL,
                 'an admin cannot lock the claim slots');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM jobbuf.claim_locks WHERE queue = 'priv_group'), 0,
          'a claim without max_in_flight or partition makes no claim slot');
SET ROLE priv_admin;
SELECT throws_ok($$ SELECT jobbuf.make_claim_locks('priv_q') $$, '42501', NULL, 'an admin cannot add claim slots');
RESET ROLE;
SET ROLE priv_consumer;
SELECT throws_ok($$ SELECT jobbuf.try_claim_lock('priv_q', NULL) $$, '42501', NULL, 'a consumer cannot take a claim slot directly');
RESET ROLE;

-- Anyone else: nothing, and the Redis URL (with its password) stays hidden.
SET ROLE priv_nobody;
SELECT throws_ok($$ SELECT jobbuf_stage('priv_q', '{"d": 4}'::jsonb) $$, '42501', NULL, 'a role without grants cannot stage');
SELECT throws_ok($$ SHOW jobbuf.redis_url $$, '42501', NULL, 'jobbuf.redis_url is not readable by non-superusers');
SELECT is((SELECT count(*)::int FROM pg_settings WHERE name = 'jobbuf.redis_url'), 0,
          'pg_settings hides jobbuf.redis_url from non-superusers');
SELECT throws_ok($$ SELECT * FROM jobbuf_worker_status() $$, '42501', NULL, 'worker status needs a jobbuf role');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;

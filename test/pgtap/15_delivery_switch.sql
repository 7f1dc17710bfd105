-- pgTAP: jobbuf_alter_queue's switch from delivery 'group' to 'each' (src/sql/10_queues.sql).
-- Jobs staged under 'group' were not checked against the target's payload shape (the worker
-- pushes one message per group); after a switch to 'each' each one becomes a Sidekiq job of its
-- own, so the switch checks them and refuses while one cannot be delivered on its own.
BEGIN;
SELECT plan(7);

SELECT jobbuf_create_queue('switching', 'sidekiq', '{"delivery": "group", "group_class": "GroupWorker"}');
SELECT jobbuf_stage('switching', '{"class": "HardWorker", "args": [1]}');
SELECT jobbuf_stage('switching', '{"no_class": true}') AS bad_id \gset
SELECT jobbuf_stage('switching', '{"class": "HardWorker", "args": "not an array"}') AS bad_args_id \gset

SELECT throws_like(
    $$SELECT jobbuf_alter_queue('switching', '{"delivery": "each"}')$$,
    format('jobbuf: queue "switching" cannot switch to delivery ''each'': job %s, staged while it had delivery ''group'', cannot be delivered on its own', :bad_id),
    'a job without "class" staged under group delivery refuses the switch to each, naming the job');
SELECT is((SELECT options->>'delivery' FROM jobbuf.queues WHERE name = 'switching'), 'group',
          'the queue keeps delivery group');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'switching'), 3, 'no job is lost');

DELETE FROM jobbuf.jobs WHERE id = :bad_id;
SELECT throws_like(
    $$SELECT jobbuf_alter_queue('switching', '{"delivery": "each"}')$$,
    format('%%job %s,%%', :bad_args_id), 'the next unfit job refuses it too');
DELETE FROM jobbuf.jobs WHERE id = :bad_args_id;

SELECT lives_ok($$SELECT jobbuf_alter_queue('switching', '{"delivery": "each"}')$$,
                'with every job fit for the target the switch succeeds');
SELECT is((SELECT options->>'delivery' FROM jobbuf.queues WHERE name = 'switching'), 'each', 'and happens');
-- The other way round nothing needs checking: a group message only names its jobs.
SELECT jobbuf_stage('switching', '{"class": "HardWorker", "args": []}');
SELECT lives_ok($$SELECT jobbuf_alter_queue('switching', '{"delivery": "group"}')$$, 'each to group is not checked');

SELECT * FROM finish();
ROLLBACK;

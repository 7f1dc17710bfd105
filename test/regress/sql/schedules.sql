-- Periodic jobs: jobbuf_schedule / jobbuf_unschedule / jobbuf_schedules, every bad input refused
-- with its message and nothing changed, the next tick in a time zone (Europe/Berlin's changes,
-- computed at instants near them: no waiting for a real date), catch_up's choice of ticks, and
-- jobbuf_drop_queue with schedules. This database's drain worker stages due ticks too: every
-- schedule here fires at most once a year (none comes due while the file runs), and a tick made
-- due by hand is staged in the same transaction, which the worker cannot see before it commits.
\set SHOW_CONTEXT never
SET client_min_messages = error;
DROP EXTENSION IF EXISTS jobbuf;
CREATE EXTENSION jobbuf;
-- (Warnings stay hidden: jobbuf_schedule warns where no drain worker runs, as under make
-- installcheck with jobbuf.database naming another database.)
SET TIME ZONE 'UTC';

SELECT jobbuf_create_queue('reports', 'list');
SELECT jobbuf_create_queue('other', 'sidekiq');

-- A schedule; its next tick is ahead.
SELECT jobbuf_schedule('nightly', '0 3 1 1 *', 'reports', '{"report": "sales"}') > now() AS next_is_ahead;
SELECT name, cron, queue, time_zone, catch_up, paused, held, owner = current_user AS owner_is_caller,
       next_run_at = jobbuf.next_tick('0 3 1 1 *', 'UTC', now()) AS next_as_computed,
       last_run_at, last_job_id, payload, options, last_error
FROM jobbuf_schedules();

-- Replaced: the new definition, options checked and stored.
SELECT jobbuf_schedule('nightly', '30 2 1 1 *', 'reports', '{"report": "all"}',
                       '{"time_zone": "Europe/Berlin", "catch_up": "all", "unique_key": true}') IS NOT NULL AS replaced;
SELECT name, cron, time_zone, catch_up, payload, options FROM jobbuf_schedules();
SELECT count(*) AS schedules FROM jobbuf.schedules;

-- Every bad input, refused with a message that shows the valid form; nothing changes.
\set VERBOSITY default
SELECT jobbuf_schedule('bad name!', '* * * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', NULL, 'reports', '{}');
SELECT jobbuf_schedule('b', '* * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '61 * * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '* 24 * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '* * 0 * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '* * * 13 *', 'reports', '{}');
SELECT jobbuf_schedule('b', '* * * * 8', 'reports', '{}');
SELECT jobbuf_schedule('b', '5-1 * * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '*/0 * * * *', 'reports', '{}');
SELECT jobbuf_schedule('b', '@reboot', 'reports', '{}');
SELECT jobbuf_schedule('b', '@sometimes', 'reports', '{}');
SELECT jobbuf_schedule('b', '60 seconds', 'reports', '{}');
SELECT jobbuf_schedule('b', '0 seconds', 'reports', '{}');
SELECT jobbuf_schedule('b', '* * * * *', 'missing', '{}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', NULL);
SELECT jobbuf_schedule('b', '* * * * *', 'other', '{"args": [1]}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '[]');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"timezone": "UTC"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "CET"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "EST"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "UTC+3"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "Mars/Olympus"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "localtime"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": "PST8PDT"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"time_zone": 1}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"catch_up": "some"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"unique_key": "yes"}');
SELECT jobbuf_schedule('b', '* * * * *', 'reports', '{}', '{"paused": 1}');
\set VERBOSITY terse
SELECT count(*) AS schedules, min(cron) AS cron FROM jobbuf.schedules;

-- A cron text that matches no date: accepted (with a WARNING), never fires.
SELECT jobbuf_schedule('never', '0 0 30 2 *', 'reports', '{}');
SELECT next_run_at FROM jobbuf_schedules() WHERE name = 'never';
SELECT jobbuf_unschedule('never'), jobbuf_unschedule('never');

-- The cron forms, from one instant (a Friday).
SELECT c AS cron, jobbuf.next_tick(c, 'UTC', '2026-11-27 10:07:30+00') AS next
FROM unnest(ARRAY['* * * * *', '*/15 * * * *', '5-59/20 * * * *', '0 */6 * * *', '0 9 * * mon-fri',
                  '0 9 * * 0', '0 9 * * 7', '0 0 1 jan *', '0 12 13 * fri', '@hourly', '@daily', '@midnight',
                  '@weekly', '@monthly', '@yearly', '@annually', '15 seconds', '1 seconds', '0 0 29 2 *']) c;

-- Europe/Berlin: 29 March 2026 02:00 -> 03:00 (01:00 UTC), 25 October 2026 03:00 -> 02:00 (01:00 UTC).
-- A fixed time skipped by the forward change fires once, at the change; a repeated one once, at
-- its first occurrence. A */15 schedule follows the wall clock: no skipped time, both passes of
-- the repeated hour.
SET TIME ZONE 'Europe/Berlin';
SELECT jobbuf.next_tick('30 2 * * *', 'Europe/Berlin', '2026-03-28 12:00+01') AS spring_fixed,
       jobbuf.next_tick('30 2 * * *', 'Europe/Berlin', '2026-03-29 03:00+02') AS spring_fixed_after,
       jobbuf.next_tick('30 2 * * *', 'Europe/Berlin', '2026-10-24 12:00+02') AS autumn_fixed,
       jobbuf.next_tick('30 2 * * *', 'Europe/Berlin', '2026-10-25 02:30+02') AS autumn_fixed_after;
SELECT t AS spring_every_15 FROM unnest(jobbuf.ticks_between('*/15 * * * *', 'Europe/Berlin',
    '2026-03-29 01:30+01', '2026-03-29 03:30+02', 100)) t;
SELECT t AS autumn_every_15 FROM unnest(jobbuf.ticks_between('*/15 * * * *', 'Europe/Berlin',
    '2026-10-25 01:45+02', '2026-10-25 03:15+01', 100)) t;
SELECT t AS seconds_across_change FROM unnest(jobbuf.ticks_between('20 seconds', 'Europe/Berlin',
    '2026-03-29 01:59:20+01', '2026-03-29 03:00:40+02', 100)) t;
SET TIME ZONE 'UTC';

-- ticks_between keeps the latest ones, oldest first.
SELECT jobbuf.ticks_between('* * * * *', 'UTC', '2026-11-27 10:00+00', '2026-11-27 10:05:30+00', 3) AS latest_three,
       jobbuf.ticks_between('* * * * *', 'UTC', '2026-11-27 10:00+00', '2026-11-27 10:05:30+00', 1000) AS all_six;
-- A year of "1 seconds" ticks missed: only the latest are walked.
SELECT jobbuf.ticks_between('1 seconds', 'UTC', '2025-01-01 00:00+00', '2026-01-01 00:00:05.5+00', 3) AS latest_of_a_year;

-- The worker's step, by hand: catch_up after ticks were missed. A yearly schedule whose next tick
-- is 1 January 2021 stands for a worker that was off across 6 ticks (2021 to 2026); one whose
-- next tick is 1 January 2026 for one off across a single tick, long ago.
SELECT jobbuf_pause('reports');
SELECT jobbuf_schedule('c_all', '0 0 1 1 *', 'reports', '{"c": "all"}', '{"catch_up": "all", "unique_key": true}') IS NOT NULL,
       jobbuf_schedule('c_one', '0 0 1 1 *', 'reports', '{"c": "one"}', '{"catch_up": "one"}') IS NOT NULL,
       jobbuf_schedule('c_none', '0 0 1 1 *', 'reports', '{"c": "none"}', '{"catch_up": "none"}') IS NOT NULL,
       jobbuf_schedule('c_paused', '0 0 1 1 *', 'reports', '{"c": "paused"}', '{"paused": true}') IS NOT NULL;
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = '2021-01-01 00:00+00' WHERE name LIKE 'c_%';
SELECT jobbuf.stage_due_ticks() > now() AS next_tick_ahead;
COMMIT;
SELECT payload->>'c' AS schedule, count(*) AS jobs, min(run_at), max(run_at),
       bool_and(unique_key IS NULL OR unique_key = 'c_all:' || jobbuf.tick_text(run_at)) AS keys
FROM jobbuf.jobs GROUP BY 1 ORDER BY 1;
SELECT min(unique_key) AS first_key FROM jobbuf.jobs;
SELECT name, last_run_at, next_run_at, last_error FROM jobbuf_schedules() WHERE name LIKE 'c_%' ORDER BY name;
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = '2026-01-01 00:00+00' WHERE name LIKE 'c_%' AND NOT paused;
SELECT jobbuf.stage_due_ticks() IS NOT NULL, jobbuf.stage_due_ticks() IS NOT NULL AS again;
COMMIT;
SELECT payload->>'c' AS schedule, count(*) AS jobs FROM jobbuf.jobs GROUP BY 1 ORDER BY 1;
-- A tick staged again (a restored copy released, a standby promoted) under unique_key: the
-- waiting job of that tick keeps it.
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'c_all';
SELECT jobbuf.stage_due_ticks() IS NOT NULL;
COMMIT;
SELECT count(*) AS c_all_jobs FROM jobbuf.jobs WHERE payload->>'c' = 'all';

-- A schedule whose role lost INSERT on jobbuf.jobs skips its tick, says why, and goes on.
CREATE ROLE sched_admin_reg NOLOGIN IN ROLE jobbuf_admin;
SET ROLE sched_admin_reg;
SELECT jobbuf_schedule('c_role', '0 0 1 1 *', 'reports', '{"c": "role"}') IS NOT NULL;
RESET ROLE;
SELECT owner FROM jobbuf_schedules() WHERE name = 'c_role';
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'c_role';
SELECT jobbuf.stage_due_ticks() IS NOT NULL;
COMMIT;
SELECT name, last_error, next_run_at FROM jobbuf_schedules() WHERE name = 'c_role';
GRANT jobbuf_producer TO sched_admin_reg;
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = '2026-01-01 00:00+00' WHERE name = 'c_role';
SELECT jobbuf.stage_due_ticks() IS NOT NULL;
COMMIT;
SELECT name, last_error, last_job_id = (SELECT max(id) FROM jobbuf.jobs WHERE payload->>'c' = 'role') AS staged
FROM jobbuf_schedules() WHERE name = 'c_role';

-- jobbuf_drop_queue refuses a queue a schedule names, unless force, which removes them.
SELECT jobbuf_schedule('to_other', '@daily', 'other', '{"class": "NightlyJob", "args": []}') IS NOT NULL;
SELECT jobbuf_drop_queue('other');
SELECT jobbuf_drop_queue('other', force => true);
SELECT count(*) AS left_for_other FROM jobbuf.schedules WHERE queue = 'other';

-- The exporter's lateness: 0 while on time, the wait of a due tick otherwise; paused never late.
BEGIN;
UPDATE jobbuf.schedules SET next_run_at = now() - interval '90 seconds' WHERE name IN ('c_one', 'c_paused');
SELECT schedule, lateness_seconds >= 90 AS late, lateness_seconds = 0 AS on_time
FROM jobbuf_prometheus_schedules() WHERE schedule IN ('c_one', 'c_all', 'c_paused') ORDER BY schedule;
ROLLBACK;

SELECT jobbuf_unschedule('nightly'), jobbuf_unschedule('nope');
SET client_min_messages = error;
DROP EXTENSION jobbuf;
RESET client_min_messages;
DROP ROLE sched_admin_reg;

-- pgTAP: dead letters (src/sql/50_dead_letters.sql): retry and purge, with unique keys.
BEGIN;
SELECT plan(36);

-- Kills every job of the queue through jobbuf_fail (max_attempts 1) and returns how many died.
CREATE FUNCTION pg_temp.kill_all(q text, why text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    g uuid;
    n integer := 0;
BEGIN
    LOOP
        SELECT min(c.group_id::text)::uuid INTO g FROM jobbuf_claim(q, 1000) c;
        EXIT WHEN g IS NULL;
        n := n + jobbuf_fail(g, why);
    END LOOP;
    RETURN n;
END $$;

SELECT jobbuf_create_queue('td_q', 'none', '{"max_attempts": 1}');
CREATE TEMP TABLE staged AS
SELECT jobbuf_stage('td_q', jsonb_build_object('n', g), partition_key => CASE WHEN g = 3 THEN 'P' END) AS id, g
FROM generate_series(1, 4) g;
SELECT is(pg_temp.kill_all('td_q', 'api said 500'), 4, 'four jobs fail at max_attempts 1');
SELECT results_eq($$ SELECT id, payload, attempts, last_error, partition_key, errors->0->>'error' FROM jobbuf.dead WHERE queue = 'td_q' ORDER BY id $$,
                  $$ SELECT id, jsonb_build_object('n', g), 1, 'api said 500'::text, CASE WHEN g = 3 THEN 'P' END, 'api said 500'::text
                     FROM staged ORDER BY id $$,
                  'they are dead letters with their payload, partition, attempts and error');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'td_q'), 0, 'and no longer jobs');

SELECT is(jobbuf_retry_dead('td_q', ARRAY[(SELECT id FROM staged WHERE g = 1), -42]), 1, 'retry one dead job by id');
SELECT results_eq($$ SELECT id, attempts, run_at, group_id, last_error FROM jobbuf.jobs WHERE queue = 'td_q' $$,
                  $$ SELECT id, 0, now(), NULL::uuid, 'api said 500'::text FROM staged WHERE g = 1 $$,
                  'it is back with the same id, attempts 0, run_at now(), unclaimed');
SELECT is((SELECT count(*)::int FROM jobbuf.dead WHERE queue = 'td_q'), 3, 'it left jobbuf.dead');
SELECT is((SELECT array_agg(c.id) FROM jobbuf_claim('td_q') c), ARRAY[(SELECT id FROM staged WHERE g = 1)],
          'a retried job is claimable');
SELECT is(jobbuf_retry_dead('td_q'), 3, 'retry all dead jobs of the queue');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'td_q' AND group_id IS NULL AND attempts = 0), 3, 'all are waiting again');
SELECT is((SELECT partition_key FROM jobbuf.jobs WHERE id = (SELECT id FROM staged WHERE g = 3)), 'P', 'keeping their partition key');
SELECT is(jobbuf_retry_dead('td_q'), 0, 'nothing left to retry');

-- Unique keys: a retried job must not break jobs_unique_waiting.
SELECT jobbuf_create_queue('td_u', 'none', '{"max_attempts": 1}');
CREATE TEMP TABLE uk AS SELECT jobbuf_stage('td_u', '{"v": "old"}'::jsonb, unique_key => 'K') AS old_id;
SELECT is(pg_temp.kill_all('td_u', 'gone'), 1, 'a unique job dies');
ALTER TABLE uk ADD COLUMN new_id bigint;
UPDATE uk SET new_id = jobbuf_stage('td_u', '{"v": "new"}'::jsonb, unique_key => 'K');
SELECT ok((SELECT new_id IS NOT NULL FROM uk), 'its key can be staged again');
SELECT is(jobbuf_retry_dead('td_u'), 0, 'retrying the dead one while the key waits moves nothing');
SELECT is((SELECT id FROM jobbuf.dead WHERE queue = 'td_u'), (SELECT old_id FROM uk), 'it stays dead');
SELECT is(pg_temp.kill_all('td_u', 'gone too'), 1, 'the new one dies too');
SELECT is(jobbuf_retry_dead('td_u'), 1, 'of two dead jobs with one key only one is retried');
SELECT is((SELECT id FROM jobbuf.jobs WHERE queue = 'td_u'), (SELECT new_id FROM uk), 'the newest');

-- Purge.
UPDATE jobbuf.jobs SET lease_until = now() - interval '1 second' WHERE queue = 'td_q' AND group_id IS NOT NULL;
SELECT is(pg_temp.kill_all('td_q', 'again'), 3, 'kill the first queue again (the claim itself buried the job whose lease expired at max_attempts)');
UPDATE jobbuf.dead SET died_at = now() - interval '3 days' WHERE id IN (SELECT id FROM staged WHERE g <= 2);
SELECT is(jobbuf_purge_dead('td_q', interval '1 day'), 2, 'purge_dead removes dead letters older than older_than');
SELECT is(jobbuf_purge_dead('td_q'), 2, 'purge_dead without older_than removes the rest');
SELECT throws_ok($$ SELECT jobbuf_purge_dead('td_nope') $$, '42704', NULL, 'purge_dead of an unknown queue');

-- Copies (docs/copies.md): a dead letter keeps its job's origin and owner, and comes back with them.
SELECT jobbuf_create_queue('td_c', 'none', '{"max_attempts": 1}');
CREATE TEMP TABLE other AS SELECT gen_random_uuid() AS id;
CREATE TEMP TABLE tc AS SELECT jobbuf_stage('td_c', jsonb_build_object('n', g)) AS id, g FROM generate_series(1, 3) g;
-- Jobs 1 and 2 were staged by another installation and adopted here (a released restore).
UPDATE jobbuf.jobs SET origin = (SELECT id FROM other) WHERE id IN (SELECT id FROM tc WHERE g <= 2);
SELECT is(jobbuf_fail((SELECT c.group_id FROM jobbuf_claim('td_c', 1) c), 'failed'), 1, 'job 1 dies by jobbuf_fail');
SELECT is((SELECT c.id FROM jobbuf_claim('td_c', 1) c), (SELECT id FROM tc WHERE g = 2), 'job 2 is claimed');
UPDATE jobbuf.jobs SET lease_until = now() - interval '1 second' WHERE id = (SELECT id FROM tc WHERE g = 2);
SELECT is((SELECT c.id FROM jobbuf_claim('td_c', 1) c), (SELECT id FROM tc WHERE g = 3), 'the next claim buries job 2 (lease expired) and takes job 3');
SELECT results_eq($$ SELECT id, origin = (SELECT id FROM other), owner = jobbuf.installation_id() FROM jobbuf.dead WHERE queue = 'td_c' ORDER BY id $$,
                  $$ SELECT id, true, true FROM tc WHERE g <= 2 ORDER BY id $$,
                  'both dead letters keep the origin and owner of their job');
SELECT is(jobbuf_retry_dead('td_c'), 2, 'both are retried');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE id IN (SELECT id FROM tc WHERE g <= 2)
             AND origin = (SELECT id FROM other) AND owner = jobbuf.installation_id()), 2,
          'with the same origin (the ids consumers saw) and owner');
SELECT is(pg_temp.kill_all('td_c', 'again'), 2, 'they die again');
-- As a dump restored into another database leaves them: another installation's dead letters.
UPDATE jobbuf.dead SET owner = (SELECT id FROM other) WHERE queue = 'td_c';
SELECT is(jobbuf_retry_dead('td_c', ARRAY[(SELECT id FROM tc WHERE g = 1)]), 1, 'a held dead letter is retried');
SELECT is((SELECT owner = (SELECT id FROM other) FROM jobbuf.jobs WHERE id = (SELECT id FROM tc WHERE g = 1)), true, 'as a held job');
SELECT is((SELECT count(*)::int FROM jobbuf_claim('td_c')), 0, 'which no claim takes');
SELECT is(jobbuf_release_restored('td_c'), 2::bigint, 'jobbuf_release_restored adopts the held job and the held dead letter');
SELECT is((SELECT owner = jobbuf.installation_id() FROM jobbuf.dead WHERE id = (SELECT id FROM tc WHERE g = 2)), true,
          'the dead letter is this installation''s');
UPDATE jobbuf.dead SET owner = (SELECT id FROM other) WHERE queue = 'td_c';
SELECT is(jobbuf_discard_restored('td_c'), 1::bigint, 'jobbuf_discard_restored deletes a held dead letter');
SELECT is((SELECT count(*)::int FROM jobbuf.dead WHERE queue = 'td_c'), 0, 'it is gone');

SELECT * FROM finish();
ROLLBACK;

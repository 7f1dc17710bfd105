-- pgTAP: batch consumers (src/sql/40_claim.sql): claim, complete, fail, extend, group; leases,
-- partitions, max_in_flight, min_batch / max_wait, run_at, order, archive, unique keys, stats.
-- Everything runs in one transaction, where now() stands still: leases and run_at are moved into
-- the past with UPDATE instead of waiting. Queues have target none (the worker ignores them).
BEGIN;
SELECT plan(161);

CREATE TEMP TABLE claims (tag text, group_id uuid, id bigint, payload jsonb, attempts integer,
                          partition text, staged_at timestamptz);
-- claim_into(tag, queue, batch, partition): claims, remembers the rows under tag, returns the count.
CREATE FUNCTION pg_temp.claim_into(tag text, q text, n integer DEFAULT NULL, part text DEFAULT NULL)
RETURNS integer LANGUAGE sql AS $$
    WITH c AS (SELECT * FROM jobbuf_claim(q, n, part)),
         ins AS (INSERT INTO claims SELECT tag, c.* FROM c RETURNING 1)
    SELECT count(*)::integer FROM ins;
$$;
CREATE FUNCTION pg_temp.gid(t text) RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT min(group_id::text)::uuid FROM claims WHERE tag = t;
$$;
CREATE FUNCTION pg_temp.ids(t text) RETURNS bigint[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM claims WHERE tag = t;
$$;
CREATE FUNCTION pg_temp.expire(t text) RETURNS void LANGUAGE sql AS $$
    UPDATE jobbuf.jobs SET lease_until = now() - interval '1 second'
    WHERE group_id = (SELECT min(group_id::text)::uuid FROM claims WHERE tag = t);
$$;
CREATE FUNCTION pg_temp.stage_n(q text, n integer) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT array_agg(jobbuf_stage(q, jsonb_build_object('n', g)) ORDER BY g) FROM generate_series(1, n) g;
$$;

------------------------------------------------------------------ basic claim
SELECT jobbuf_create_queue('tc_basic', 'none');
CREATE TEMP TABLE basic_ids AS SELECT unnest(pg_temp.stage_n('tc_basic', 5)) AS id;
SELECT is(pg_temp.claim_into('b1', 'tc_basic', 2), 2, 'claim takes batch_size jobs');
SELECT is(pg_temp.ids('b1'), (SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM basic_ids ORDER BY id LIMIT 2) s),
          'claim takes the oldest jobs in id order');
SELECT is((SELECT count(DISTINCT group_id)::int FROM claims WHERE tag = 'b1'), 1, 'one group id per claim');
SELECT is((SELECT array_agg(DISTINCT payload->>'n') FROM claims WHERE tag = 'b1'), ARRAY['1', '2'], 'claim returns the payloads');
SELECT is((SELECT min(attempts) FROM claims WHERE tag = 'b1'), 0, 'a new job has attempts 0');
SELECT ok((SELECT bool_and(j.lease_until = now() + interval '300 seconds' AND j.group_id = c.group_id)
           FROM claims c JOIN jobbuf.jobs j USING (id) WHERE c.tag = 'b1'),
          'claimed jobs carry the group id and a lease of the default visibility (300 s)');
SELECT is(pg_temp.claim_into('b2', 'tc_basic', 10), 3, 'a second claim takes only the rest');
SELECT ok(NOT EXISTS (SELECT 1 FROM claims a JOIN claims b USING (id) WHERE a.tag = 'b1' AND b.tag = 'b2'),
          'the two claims share no job');
SELECT ok(pg_temp.gid('b1') <> pg_temp.gid('b2'), 'each claim has its own group id');
SELECT is(pg_temp.claim_into('b3', 'tc_basic', 10), 0, 'nothing left to claim');
SELECT results_eq($$ SELECT id, payload, attempts FROM jobbuf_group(pg_temp.gid('b2')) $$,
                  $$ SELECT id, payload, attempts FROM claims WHERE tag = 'b2' ORDER BY id $$,
                  'jobbuf_group returns the jobs of the group in id order');

------------------------------------------------------------------ batch size defaults
SELECT jobbuf_create_queue('tc_default', 'none');
SELECT pg_temp.stage_n('tc_default', 150) IS NOT NULL;
SELECT is(pg_temp.claim_into('d1', 'tc_default'), 100, 'batch_size NULL without the option claims 100');
SELECT jobbuf_create_queue('tc_option', 'none', '{"batch_size": 7, "visibility": 30}');
SELECT pg_temp.stage_n('tc_option', 20) IS NOT NULL;
SELECT is(pg_temp.claim_into('o1', 'tc_option'), 7, 'batch_size NULL uses the queue option batch_size');
SELECT ok((SELECT bool_and(lease_until = now() + interval '30 seconds') FROM jobbuf.jobs WHERE group_id = pg_temp.gid('o1')),
          'the lease follows the queue option visibility');
SELECT is(pg_temp.claim_into('o2', 'tc_option', 3), 3, 'an explicit batch_size overrides the option');

------------------------------------------------------------------ bad inputs
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('tc_nope') $$, '42704', 'jobbuf: unknown queue ''tc_nope''',
                 'claim on an unknown queue');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('bad name!') $$, '22023', NULL, 'claim with a malformed queue name');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim(NULL) $$, '22023', NULL, 'claim with a NULL queue name');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('tc_option', 0) $$, '22023',
                 'jobbuf: batch_size must be between 1 and 100000, not 0', 'claim with batch_size 0');
SELECT throws_ok($$ SELECT * FROM jobbuf_claim('tc_option', -5) $$, '22023', NULL, 'claim with a negative batch_size');
SELECT throws_ok($$ SELECT jobbuf_complete(NULL) $$, '22004', 'jobbuf: group_id must not be NULL', 'complete with NULL group');
SELECT throws_ok($$ SELECT jobbuf_fail(NULL, 'x') $$, '22004', NULL, 'fail with NULL group');
SELECT throws_ok($$ SELECT jobbuf_fail(gen_random_uuid(), NULL) $$, '22004', NULL, 'fail with NULL error');
SELECT throws_ok($$ SELECT jobbuf_extend(NULL) $$, '22004', NULL, 'extend with NULL group');
SELECT throws_ok($$ SELECT * FROM jobbuf_group(NULL) $$, '22004', NULL, 'group with NULL group');
SELECT throws_ok($$ SELECT jobbuf_extend(pg_temp.gid('o1'), 0) $$, '22023', NULL, 'extend by 0 seconds');
SELECT throws_ok($$ SELECT jobbuf_stage('tc_option', NULL::jsonb) $$, '23502', NULL, 'stage a NULL payload');
SELECT throws_ok($$ SELECT jobbuf_create_queue('tc_badopt', 'none', '{"visiblity": 3}') $$, '22023', NULL,
                 'unknown queue option');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'tc_option' AND group_id IS NULL), 10,
          'the failed calls changed nothing');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE group_id = pg_temp.gid('o1')), 7, 'the failed calls released nothing');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobbuf.queues WHERE name = 'tc_badopt'), 'the bad queue was not created');

------------------------------------------------------------------ complete
SELECT is(jobbuf_complete(pg_temp.gid('o1'), ARRAY[(pg_temp.ids('o1'))[1], (pg_temp.ids('o1'))[2], (pg_temp.ids('o2'))[1]]), 2,
          'complete with ids counts only the ids of that group');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE group_id = pg_temp.gid('o1')), 5, 'the other jobs of the group stay claimed');
SELECT ok(EXISTS (SELECT 1 FROM jobbuf.jobs WHERE id = (pg_temp.ids('o2'))[1]), 'a job of another group is untouched');
SELECT is(jobbuf_complete(pg_temp.gid('o1')), 5, 'complete without ids takes the rest of the group');
SELECT is(jobbuf_complete(pg_temp.gid('o1')), 0, 'completing again returns 0');
SELECT is(jobbuf_complete(gen_random_uuid()), 0, 'an unknown group completes nothing');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobbuf.jobs WHERE id = ANY (pg_temp.ids('o1'))), 'completed jobs are deleted');
SELECT is((SELECT count(*)::int FROM jobbuf.archive WHERE queue = 'tc_option'), 0, 'no archive without the option');

------------------------------------------------------------------ archive
SELECT jobbuf_create_queue('tc_archive', 'none', '{"archive": true}');
SELECT pg_temp.stage_n('tc_archive', 4) IS NOT NULL;
UPDATE jobbuf.jobs SET attempts = 2 WHERE queue = 'tc_archive' AND payload->>'n' = '1';
SELECT is(pg_temp.claim_into('a1', 'tc_archive'), 4, 'claim on an archive queue');
SELECT is(jobbuf_complete(pg_temp.gid('a1')), 4, 'complete on an archive queue');
SELECT results_eq($$ SELECT id, payload, attempts, completed_at FROM jobbuf.archive WHERE queue = 'tc_archive' ORDER BY id $$,
                  $$ SELECT id, payload, CASE WHEN payload->>'n' = '1' THEN 2 ELSE 0 END, now() FROM claims WHERE tag = 'a1' ORDER BY id $$,
                  'completed jobs move to jobbuf.archive with their payload and attempts');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE queue = 'tc_archive'), 0, 'and leave jobbuf.jobs');
UPDATE jobbuf.archive SET completed_at = now() - interval '2 days' WHERE id = (pg_temp.ids('a1'))[1];
SELECT is(jobbuf_purge_archive('tc_archive', interval '1 day'), 1, 'purge_archive removes rows older than older_than');
SELECT is(jobbuf_purge_archive('tc_archive', NULL), 3, 'purge_archive with NULL removes the rest');
SELECT throws_ok($$ SELECT jobbuf_purge_archive('tc_nope', interval '1 day') $$, '42704', NULL,
                 'purge_archive of an unknown queue');

------------------------------------------------------------------ leases and fencing
SELECT jobbuf_create_queue('tc_lease', 'none', '{"visibility": 60}');
SELECT pg_temp.stage_n('tc_lease', 3) IS NOT NULL;
SELECT is(pg_temp.claim_into('l1', 'tc_lease'), 3, 'claim before the lease expires');
SELECT is(pg_temp.claim_into('l_none', 'tc_lease'), 0, 'a live lease keeps the jobs from other claims');
SELECT ok(jobbuf_extend(pg_temp.gid('l1'), 1000), 'extend a live lease');
SELECT ok((SELECT bool_and(lease_until = now() + interval '1000 seconds') FROM jobbuf.jobs WHERE group_id = pg_temp.gid('l1')),
          'extend sets the lease to now() + seconds');
SELECT ok(jobbuf_extend(pg_temp.gid('l1'), 5), 'a shorter extend succeeds');
SELECT ok((SELECT bool_and(lease_until = now() + interval '1000 seconds') FROM jobbuf.jobs WHERE group_id = pg_temp.gid('l1')),
          'but never shortens the lease');
SELECT pg_temp.expire('l1');
SELECT ok(NOT jobbuf_extend(pg_temp.gid('l1')), 'extend after the lease expired returns false');
SELECT is((SELECT count(*)::int FROM jobbuf_group(pg_temp.gid('l1'))), 0, 'jobbuf_group of an expired group is empty');
SELECT is(pg_temp.claim_into('l2', 'tc_lease', 2), 2, 'an expired lease makes the jobs claimable again');
SELECT is(pg_temp.ids('l2'), (pg_temp.ids('l1'))[1:2], 're-claimed in id order');
SELECT is(jobbuf_complete(pg_temp.gid('l1'), pg_temp.ids('l2')), 0, 'the stale group id completes none of the re-claimed jobs');
SELECT is(jobbuf_fail(pg_temp.gid('l1'), 'late', pg_temp.ids('l2')), 0, 'and fails none of them');
SELECT is((SELECT count(*)::int FROM jobbuf.jobs WHERE group_id = pg_temp.gid('l2') AND attempts = 1 AND last_error = 'lease expired'), 2,
          'the re-claim counts the expired lease as one attempt, and the stale group changed nothing');
SELECT ok(jobbuf_extend(pg_temp.gid('l2')), 'extend with NULL seconds on a live group');
SELECT ok((SELECT bool_and(lease_until = now() + interval '60 seconds') FROM jobbuf.jobs WHERE group_id = pg_temp.gid('l2')),
          'extend with NULL seconds uses the queue visibility');
SELECT is(jobbuf_complete(pg_temp.gid('l1')), 1,
          'the stale group still completes its expired job that no claim took');
SELECT is(jobbuf_complete(pg_temp.gid('l2')), 2, 'the new group completes its jobs');

------------------------------------------------------------------ poison jobs: expired leases reach max_attempts
SELECT jobbuf_create_queue('tc_poison', 'none', '{"visibility": 60, "max_attempts": 2}');
SELECT pg_temp.stage_n('tc_poison', 1) IS NOT NULL;
SELECT is(pg_temp.claim_into('p1', 'tc_poison'), 1, 'a poison job is claimed');
SELECT pg_temp.expire('p1');
SELECT is(pg_temp.claim_into('p2', 'tc_poison'), 1, 'its consumer died: the job is claimed again (attempt 1)');
SELECT pg_temp.expire('p2');
SELECT is(pg_temp.claim_into('p3', 'tc_poison'), 0, 'at max_attempts an expired lease is not handed out again');
SELECT results_eq($$ SELECT attempts, last_error, jsonb_array_length(errors) FROM jobbuf.dead WHERE queue = 'tc_poison' $$,
                  $$ VALUES (2, 'lease expired'::text, 2) $$,
                  'it is in jobbuf.dead with the lease expiry as its error and history');

------------------------------------------------------------------ run_at, order
SELECT jobbuf_create_queue('tc_sched', 'none');
SELECT jobbuf_stage('tc_sched', '{"k": "later"}'::jsonb, now() + interval '1 hour') IS NOT NULL;
SELECT jobbuf_stage('tc_sched', '{"k": "now"}'::jsonb) IS NOT NULL;
SELECT is(pg_temp.claim_into('s1', 'tc_sched', 10), 1, 'a job due later is not claimed');
SELECT is((SELECT payload->>'k' FROM claims WHERE tag = 's1'), 'now', 'only the due job');
UPDATE jobbuf.jobs SET run_at = now() - interval '1 second' WHERE queue = 'tc_sched' AND payload->>'k' = 'later';
SELECT is(pg_temp.claim_into('s2', 'tc_sched', 10), 1, 'once due it is claimed');

SELECT jobbuf_create_queue('tc_order', 'none', '{"order": "run_at"}');
SELECT jobbuf_stage('tc_order', jsonb_build_object('n', g), now() - g * interval '1 minute') IS NOT NULL
FROM generate_series(1, 4) g;
SELECT is((SELECT array_agg(payload->>'n') FROM jobbuf_claim('tc_order', 3)), ARRAY['4', '3', '2'],
          'order run_at: the earliest run_at is served first, whatever the id');
SELECT is((SELECT array_agg(payload->>'n') FROM jobbuf_claim('tc_order', 3)), ARRAY['1'], 'then the next');

------------------------------------------------------------------ fail, backoff, dead letters
SELECT jobbuf_create_queue('tc_fail', 'none', '{"max_attempts": 4, "backoff_base": 10, "backoff_max": 25}');
SELECT jobbuf_stage('tc_fail', '{"job": "flaky"}'::jsonb) IS NOT NULL;
SELECT jobbuf_stage('tc_fail', '{"job": "fine"}'::jsonb) IS NOT NULL;
SELECT is(pg_temp.claim_into('f1', 'tc_fail'), 2, 'claim two jobs to fail');
SELECT is(jobbuf_fail(pg_temp.gid('f1'), 'boom 1', ARRAY[(pg_temp.ids('f1'))[1]]), 1, 'fail one job of the group');
SELECT ok((SELECT attempts = 1 AND last_error = 'boom 1' AND group_id IS NULL AND lease_until IS NULL
                  AND run_at BETWEEN now() + interval '7.5 seconds' AND now() + interval '10 seconds'
           FROM jobbuf.jobs WHERE id = (pg_temp.ids('f1'))[1]),
          'first failure: attempts 1, error kept, released, run_at = now() + [0.75, 1] x backoff_base');
SELECT is((SELECT group_id FROM jobbuf.jobs WHERE id = (pg_temp.ids('f1'))[2]), pg_temp.gid('f1'),
          'the other job of the group stays claimed');
SELECT is(pg_temp.claim_into('f_early', 'tc_fail'), 0, 'a failed job is not claimable before its backoff');
UPDATE jobbuf.jobs SET run_at = now() WHERE id = (pg_temp.ids('f1'))[1];
SELECT is(pg_temp.claim_into('f2', 'tc_fail'), 1, 'claim it again after the backoff');
SELECT is((SELECT attempts FROM claims WHERE tag = 'f2'), 1, 'the claim shows the attempts so far');
SELECT is(jobbuf_fail(pg_temp.gid('f2'), 'boom 2'), 1, 'second failure');
SELECT ok((SELECT attempts = 2 AND run_at BETWEEN now() + interval '15 seconds' AND now() + interval '20 seconds'
           FROM jobbuf.jobs WHERE id = (pg_temp.ids('f1'))[1]),
          'second failure: backoff doubles: [0.75, 1] x 20 s');
UPDATE jobbuf.jobs SET run_at = now() WHERE id = (pg_temp.ids('f1'))[1];
SELECT is(pg_temp.claim_into('f3', 'tc_fail'), 1, 'third claim');
SELECT is(jobbuf_fail(pg_temp.gid('f3'), 'boom 3'), 1, 'third failure');
SELECT ok((SELECT attempts = 3 AND run_at BETWEEN now() + interval '18.75 seconds' AND now() + interval '25 seconds'
           FROM jobbuf.jobs WHERE id = (pg_temp.ids('f1'))[1]),
          'third failure: 40 s capped at backoff_max 25 s, jitter stays below the cap');
UPDATE jobbuf.jobs SET run_at = now() WHERE id = (pg_temp.ids('f1'))[1];
SELECT is(pg_temp.claim_into('f4', 'tc_fail'), 1, 'fourth claim');
SELECT is(jobbuf_fail(pg_temp.gid('f4'), 'boom 4: final'), 1, 'the failure at max_attempts counts');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobbuf.jobs WHERE id = (pg_temp.ids('f1'))[1]), 'at max_attempts the job leaves jobbuf.jobs');
SELECT results_eq(
    $$ SELECT id, queue, payload, attempts, last_error, jsonb_array_length(errors),
              errors->1->>'error', (errors->1->>'attempt')::int, errors->0->>'error', (errors->0->>'attempt')::int
       FROM jobbuf.dead WHERE queue = 'tc_fail' $$,
    $$ VALUES ((pg_temp.ids('f1'))[1], 'tc_fail'::text, '{"job": "flaky"}'::jsonb, 4, 'boom 4: final'::text, 2,
               'boom 4: final'::text, 4, 'boom 3'::text, 3) $$,
    'the dead letter keeps id, payload, attempts, the final error and the previous one');
SELECT ok((SELECT (errors->1->>'at')::timestamptz = now() FROM jobbuf.dead WHERE queue = 'tc_fail'), 'the final error has its time');
SELECT is((SELECT dead FROM jobbuf_stats() WHERE queue = 'tc_fail'), 1::bigint, 'jobbuf_stats counts the dead letter');

-- A spread of failures: the backoff stays within its bounds and is not constant (jitter).
SELECT jobbuf_create_queue('tc_jitter', 'none', '{"backoff_base": 100}');
SELECT pg_temp.stage_n('tc_jitter', 200) IS NOT NULL;
SELECT is(pg_temp.claim_into('j1', 'tc_jitter', 200), 200, 'claim 200 jobs');
SELECT is(jobbuf_fail(pg_temp.gid('j1'), 'down'), 200, 'fail all of them');
SELECT ok((SELECT min(run_at) >= now() + interval '75 seconds' AND max(run_at) <= now() + interval '100 seconds'
                  AND count(DISTINCT run_at) > 150
           FROM jobbuf.jobs WHERE queue = 'tc_jitter'),
          'first backoffs lie in [75 s, 100 s] and differ from each other');

------------------------------------------------------------------ unique keys on release
SELECT jobbuf_create_queue('tc_unique', 'none');
CREATE TEMP TABLE u AS SELECT jobbuf_stage('tc_unique', '{"v": 1}'::jsonb, unique_key => 'K') AS first_id;
SELECT ok(jobbuf_stage('tc_unique', '{"v": 2}'::jsonb, unique_key => 'K') IS NULL, 'a waiting unique key stages nothing more');
SELECT is(pg_temp.claim_into('u1', 'tc_unique'), 1, 'claim the unique job');
SELECT is(jobbuf_fail(pg_temp.gid('u1'), 'no luck'), 1, 'fail it without a rival');
SELECT ok((SELECT group_id IS NULL AND attempts = 1 FROM jobbuf.jobs WHERE id = (SELECT first_id FROM u)),
          'released with its unique key');
SELECT ok(jobbuf_stage('tc_unique', '{"v": 3}'::jsonb, unique_key => 'K') IS NULL, 'the released job holds the key again');
UPDATE jobbuf.jobs SET run_at = now() WHERE queue = 'tc_unique';
SELECT is(pg_temp.claim_into('u2', 'tc_unique'), 1, 'claim it again');
ALTER TABLE u ADD COLUMN second_id bigint;
UPDATE u SET second_id = jobbuf_stage('tc_unique', '{"v": 4}'::jsonb, unique_key => 'K');
SELECT ok((SELECT second_id IS NOT NULL FROM u), 'while it is claimed the key can be staged again');
SELECT is(jobbuf_fail(pg_temp.gid('u2'), 'again'), 1, 'failing the claimed duplicate does not violate the unique index');
SELECT results_eq($$ SELECT id, payload FROM jobbuf.jobs WHERE queue = 'tc_unique' $$,
                  $$ SELECT second_id, '{"v": 4}'::jsonb FROM u $$,
                  'the waiting job wins, the failed duplicate is dropped');

------------------------------------------------------------------ partitions
SELECT jobbuf_create_queue('tc_part', 'none');
SELECT jobbuf_stage('tc_part', jsonb_build_object('p', p, 'n', n), partition_key => p) IS NOT NULL
FROM (VALUES ('A', 1), ('B', 2), ('A', 3), ('C', 4), ('B', 5), ('A', 6)) v (p, n) ORDER BY n;
SELECT jobbuf_stage('tc_part', '{"p": null, "n": 7}'::jsonb) IS NOT NULL;
SELECT is(pg_temp.claim_into('p_b', 'tc_part', 10, 'B'), 2, 'a claim for partition B');
SELECT is((SELECT array_agg(DISTINCT partition) FROM claims WHERE tag = 'p_b'), ARRAY['B'], 'takes only jobs of B');
SELECT is(pg_temp.claim_into('p_b2', 'tc_part', 10, 'B'), 0, 'B has a group in flight: nothing more for B');
SELECT is(pg_temp.claim_into('p_1', 'tc_part', 2), 2, 'a claim without partition key');
SELECT is((SELECT array_agg(payload->>'n' ORDER BY id) FROM claims WHERE tag = 'p_1'), ARRAY['1', '3'],
          'picks the partition with the oldest ready job (A), up to batch_size of it');
SELECT is(pg_temp.claim_into('p_a', 'tc_part', 10, 'A'), 0, 'A is now in flight: a claim for A gets nothing');
SELECT is(pg_temp.claim_into('p_2', 'tc_part', 10), 1, 'the next claim without key');
SELECT is((SELECT payload->>'n' FROM claims WHERE tag = 'p_2'), '4', 'gets the oldest free partition (C)');
SELECT is(pg_temp.claim_into('p_3', 'tc_part', 10), 1, 'the next one');
SELECT is((SELECT partition FROM claims WHERE tag = 'p_3'), NULL, 'gets the unpartitioned job: it belongs to no partition');
SELECT is(pg_temp.claim_into('p_4', 'tc_part', 10), 0, 'every partition is in flight: nothing');
SELECT is(jobbuf_complete(pg_temp.gid('p_1')), 2, 'A completes its group');
SELECT is(pg_temp.claim_into('p_5', 'tc_part', 10), 1, 'A is free again');
SELECT is((SELECT payload->>'n' FROM claims WHERE tag = 'p_5'), '6', 'and its remaining job is claimed');
SELECT pg_temp.expire('p_b');
SELECT is(pg_temp.claim_into('p_6', 'tc_part', 10), 2, 'an expired group frees its partition');
SELECT is((SELECT array_agg(payload->>'n' ORDER BY id) FROM claims WHERE tag = 'p_6'), ARRAY['2', '5'], 'and its jobs');

------------------------------------------------------------------ max_in_flight
SELECT jobbuf_create_queue('tc_flight', 'none', '{"max_in_flight": 2}');
SELECT pg_temp.stage_n('tc_flight', 10) IS NOT NULL;
SELECT is(pg_temp.claim_into('m1', 'tc_flight', 2), 2, 'first group in flight');
SELECT is(pg_temp.claim_into('m2', 'tc_flight', 2), 2, 'second group in flight');
SELECT is(pg_temp.claim_into('m3', 'tc_flight', 2), 0, 'max_in_flight reached: nothing');
SELECT is(jobbuf_complete(pg_temp.gid('m1')), 2, 'one group completes');
SELECT is(pg_temp.claim_into('m4', 'tc_flight', 2), 2, 'a claim succeeds again');
SELECT pg_temp.expire('m2');
SELECT is(pg_temp.claim_into('m5', 'tc_flight', 2), 2, 'an expired group no longer counts');

------------------------------------------------------------------ min_batch / max_wait
SELECT jobbuf_create_queue('tc_min', 'none', '{"min_batch": 5, "max_wait": 60}');
SELECT pg_temp.stage_n('tc_min', 3) IS NOT NULL;
SELECT is(pg_temp.claim_into('mb1', 'tc_min', 10), 0, 'fewer than min_batch fresh jobs: nothing');
UPDATE jobbuf.jobs SET staged_at = now() - interval '10 minutes', run_at = now() - interval '30 seconds' WHERE queue = 'tc_min';
SELECT is(pg_temp.claim_into('mb2', 'tc_min', 10), 0, 'max_wait counts from run_at when that is later than staged_at');
UPDATE jobbuf.jobs SET run_at = now() - interval '61 seconds' WHERE queue = 'tc_min';
SELECT is(pg_temp.claim_into('mb3', 'tc_min', 10), 3, 'after max_wait the small batch is claimed');
SELECT pg_temp.stage_n('tc_min', 6) IS NOT NULL;
SELECT is(pg_temp.claim_into('mb4', 'tc_min', 10), 6, 'min_batch ready jobs are claimed at once');
SELECT pg_temp.stage_n('tc_min', 3) IS NOT NULL;
SELECT is(pg_temp.claim_into('mb5', 'tc_min', 2), 2, 'a batch_size below min_batch lowers the minimum to batch_size');

------------------------------------------------------------------ paused queue
SELECT jobbuf_create_queue('tc_paused', 'none');
SELECT pg_temp.stage_n('tc_paused', 2) IS NOT NULL;
SELECT jobbuf_pause('tc_paused');
SELECT is(pg_temp.claim_into('pz1', 'tc_paused'), 0, 'a paused queue hands out nothing');
SELECT jobbuf_resume('tc_paused');
SELECT is(pg_temp.claim_into('pz2', 'tc_paused'), 2, 'after resume it does');

------------------------------------------------------------------ stats
SELECT jobbuf_create_queue('tc_stats', 'none');
SELECT pg_temp.stage_n('tc_stats', 6) IS NOT NULL;
SELECT jobbuf_stage('tc_stats', '{}'::jsonb, now() + interval '1 hour') IS NOT NULL;
SELECT is(pg_temp.claim_into('st1', 'tc_stats', 2), 2, 'claim 2 of 6');
SELECT is(pg_temp.claim_into('st2', 'tc_stats', 1), 1, 'claim 1 more');
SELECT pg_temp.expire('st2');
INSERT INTO jobbuf.dead (id, queue, payload, staged_at, attempts) VALUES (-1, 'tc_stats', '{}', now(), 1);
SELECT results_eq($$ SELECT ready, scheduled, claimed, dead FROM jobbuf_stats() WHERE queue = 'tc_stats' $$,
                  $$ VALUES (4::bigint, 1::bigint, 2::bigint, 1::bigint) $$,
                  'jobbuf_stats: ready (incl. expired leases), scheduled, claimed, dead');

------------------------------------------------------------------ claim locks, per queue
-- A slot's row is made by the first claim that needs it: queues that are never claimed cost no
-- rows (1.1 made 257 per queue), and a database restored without them (pg_restore -j) claims.
SELECT jobbuf_create_queue('tc_slots', 'none', '{"max_in_flight": 5}');
SELECT is((SELECT count(*)::int FROM jobbuf.claim_locks WHERE queue = 'tc_slots'), 0,
          'a new queue has no claim-lock rows');
SELECT jobbuf_stage('tc_slots', '{"n": 1}'::jsonb, partition_key => 'P') IS NOT NULL;
SELECT is(pg_temp.claim_into('sl0', 'tc_slots', 10, 'P'), 1, 'a partition claim of a max_in_flight queue');
SELECT results_eq($$ SELECT count(*)::int, min(slot), max(slot) FROM jobbuf.claim_locks WHERE queue = 'tc_slots' $$,
                  $$ VALUES (257, -1, 255) $$, 'it made the queue''s own slot and 256 partition slots');
-- Slot rows lost (a restore that did not bring them, or emptied by hand): claims make them again.
DELETE FROM jobbuf.claim_locks WHERE queue = 'tc_slots';
SELECT jobbuf_stage('tc_slots', '{"n": 2}'::jsonb, partition_key => 'Q') IS NOT NULL;
SELECT is(pg_temp.claim_into('sl1', 'tc_slots', 10, 'Q'), 1, 'a claim works without the slot rows');
SELECT is((SELECT count(*)::int FROM jobbuf.claim_locks WHERE queue = 'tc_slots'), 257, 'and makes the slots again');
SELECT jobbuf_stage('tc_slots', '{"n": 3}'::jsonb, partition_key => 'R') IS NOT NULL;
SELECT is(pg_temp.claim_into('sl2', 'tc_slots', 10, NULL), 1, 'a claim without partition key too');
SELECT jobbuf_create_queue('tc_slots_none', 'none');
SELECT is(pg_temp.claim_into('sl3', 'tc_slots_none', 10, 'nobody-stages-here'), 0, 'a claim of a partition without jobs returns nothing');
SELECT is((SELECT count(*)::int FROM jobbuf.claim_locks WHERE queue = 'tc_slots_none'), 0, 'and makes no slots');
SELECT jobbuf_drop_queue('tc_slots_none', true);
SELECT jobbuf_drop_queue('tc_slots', true);
SELECT is((SELECT count(*)::int FROM jobbuf.claim_locks WHERE queue = 'tc_slots'), 0, 'a dropped queue takes its claim slots along');

------------------------------------------------------------------ bounded claims
-- A claim without partition key reads a bounded number of index entries, whatever the number of
-- partitions (1.1 walked every partition's first entry: 5,000 partitions, 5,000 probes). The
-- counts are this transaction's own statistics of the indexes of jobbuf.jobs.
CREATE FUNCTION pg_temp.index_work() RETURNS TABLE (scans bigint, entries bigint) LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_numscans(i.indexrelid))::bigint, sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::bigint
    FROM pg_index i WHERE i.indrelid = 'jobbuf.jobs'::regclass;
$$;
CREATE TEMP TABLE work_before AS SELECT * FROM pg_temp.index_work();
CREATE FUNCTION pg_temp.work_since() RETURNS text LANGUAGE sql AS $$
    SELECT format('%s scans, %s entries', w.scans - b.scans, w.entries - b.entries)
    FROM pg_temp.index_work() w, work_before b;
$$;
CREATE FUNCTION pg_temp.bounded() RETURNS boolean LANGUAGE sql AS $$
    SELECT w.scans - b.scans < 1000 AND w.entries - b.entries < 3000 FROM pg_temp.index_work() w, work_before b;
$$;
SELECT jobbuf_create_queue('tc_many', 'none');
INSERT INTO jobbuf.jobs (queue, payload, partition_key)
SELECT 'tc_many', jsonb_build_object('n', g), 'k' || g FROM generate_series(1, 5000) g;
UPDATE work_before SET scans = w.scans, entries = w.entries FROM pg_temp.index_work() w;
SELECT is(pg_temp.claim_into('mn0', 'tc_many', 1), 1, 'a claim among 5,000 partitions takes a group');
SELECT ok(pg_temp.bounded(), 'with a bounded number of index scans and entries: ' || pg_temp.work_since());
SELECT is((SELECT string_agg(payload->>'n', ',') FROM claims WHERE tag = 'mn0'), '1', 'the oldest job''s partition');
-- 5,000 partitions with a group in flight each (inserted as claimed), and a job waiting in each.
SELECT jobbuf_create_queue('tc_busy', 'none');
INSERT INTO jobbuf.jobs (queue, payload, partition_key, group_id, lease_until)
SELECT 'tc_busy', jsonb_build_object('n', g), 'k' || g, gen_random_uuid(), now() + interval '1 hour'
FROM generate_series(1, 5000) g;
INSERT INTO jobbuf.jobs (queue, payload, partition_key)
SELECT 'tc_busy', jsonb_build_object('n', g), 'k' || (g - 5000) FROM generate_series(5001, 10000) g;
UPDATE work_before SET scans = w.scans, entries = w.entries FROM pg_temp.index_work() w;
SELECT is(pg_temp.claim_into('mn1', 'tc_busy', 1), 0, 'every partition has a group in flight: nothing to claim');
SELECT ok(pg_temp.bounded(), 'found out with a bounded number of index scans and entries: ' || pg_temp.work_since());
SELECT jobbuf_drop_queue('tc_busy', true);
SELECT jobbuf_drop_queue('tc_many', true);
-- A partition in flight whose 1,500 waiting jobs are the oldest: the claim looks further.
SELECT jobbuf_create_queue('tc_hot', 'none');
INSERT INTO jobbuf.jobs (queue, payload, partition_key)
SELECT 'tc_hot', jsonb_build_object('n', g), 'hot' FROM generate_series(1, 1501) g;
SELECT jobbuf_stage('tc_hot', '{"n": "cold"}'::jsonb, partition_key => 'cold') IS NOT NULL;
SELECT is(pg_temp.claim_into('ht0', 'tc_hot', 1), 1, 'a claim takes the oldest job''s partition');
SELECT is(pg_temp.claim_into('ht1', 'tc_hot', 1), 1, 'the next claim finds the partition behind its 1,500 jobs');
SELECT is((SELECT string_agg(partition, ',') FROM claims WHERE tag IN ('ht0', 'ht1')), 'hot,cold', 'hot, then cold');
SELECT jobbuf_drop_queue('tc_hot', true);

------------------------------------------------------------------ error texts are bounded
SELECT jobbuf_create_queue('tc_errors', 'none', '{"max_attempts": 2}');
SELECT jobbuf_stage('tc_errors', '{"n": 1}'::jsonb) IS NOT NULL;
SELECT is(pg_temp.claim_into('er1', 'tc_errors'), 1, 'claim a job');
SELECT is(jobbuf_fail(pg_temp.gid('er1'), repeat('é', 100000)), 1, 'fail it with a 100,000-character error');
SELECT is((SELECT length(last_error) FROM jobbuf.jobs WHERE queue = 'tc_errors'),
          8192 + length(' [jobbuf: error truncated, 100000 characters]'),
          'last_error keeps 8,192 characters and a marker');
SELECT is((SELECT right(last_error, 46) FROM jobbuf.jobs WHERE queue = 'tc_errors'),
          'é [jobbuf: error truncated, 100000 characters]', 'the marker says how long the error was');
SELECT is((SELECT payload FROM jobbuf.jobs WHERE queue = 'tc_errors'), '{"n": 1}'::jsonb, 'a failure leaves the payload as staged');
-- An error of 2^28 bytes, longer than a jsonb string can be: the job is buried by the next claim
-- after its lease expired (1.1: every claim of the queue failed from then on).
UPDATE jobbuf.jobs SET run_at = now() WHERE queue = 'tc_errors';
SELECT is(pg_temp.claim_into('er2', 'tc_errors'), 1, 'claim it again');
UPDATE jobbuf.jobs SET last_error = repeat('x', 268435456) WHERE queue = 'tc_errors';
SELECT pg_temp.expire('er2');
SELECT jobbuf_stage('tc_errors', '{"n": 2}'::jsonb) IS NOT NULL;
SELECT is(pg_temp.claim_into('er3', 'tc_errors'), 1, 'a claim after a 256 MB error was stored works');
SELECT is((SELECT length(errors->0->>'error') FROM jobbuf.dead WHERE queue = 'tc_errors'),
          8192 + length(' [jobbuf: error truncated, 268435456 characters]'), 'the dead letter keeps the bounded error');
SELECT is(jobbuf_fail(pg_temp.gid('er3'), repeat('x', 268435456)), 1, 'jobbuf_fail of a 256 MB error');
SELECT is((SELECT length(last_error) FROM jobbuf.jobs WHERE queue = 'tc_errors'),
          8192 + length(' [jobbuf: error truncated, 268435456 characters]'), 'keeps the bounded error');
SELECT jobbuf_drop_queue('tc_errors', true);

SELECT * FROM finish();
ROLLBACK;

#!/usr/bin/env bash
# A paused queue is skipped by the worker (staging continues); other queues keep flowing;
# jobbuf_resume wakes the worker and the held jobs are delivered in order.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_create_queue('held', 'list');
SELECT jobbuf_pause('held');
COMMIT;
SELECT jobbuf_create_queue('flowing', 'list');
SELECT jobbuf_stage('held', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SELECT jobbuf_stage('flowing', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SQL

jb_wait_until '[ "$(jb_redis LLEN jobbuf:flowing)" = 20 ]' 15
expect_eq "the other queue is delivered" "$(jb_redis LLEN jobbuf:flowing)" 20
sleep 1.5  # several poll intervals and wake-ups
jb_sql "SELECT jobbuf_stage('held', '{\"n\": 21}'::jsonb)" >/dev/null
jb_sql "SELECT jobbuf_stage('flowing', '{\"n\": 21}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:flowing)" = 21 ]' 15
sleep 0.5
expect_eq "paused queue: nothing in Redis" "$(jb_redis EXISTS jobbuf:held)" 0
wait_census || fail "no census of the worker"
expect_eq "paused queue: jobbuf_stats paused, ready" \
  "$(jb_sql "SELECT paused || ' ' || ready || ' ' || delivered_total FROM jobbuf_stats() WHERE queue = 'held'")" "true 21 0"
expect_eq "jobbuf.queues.paused" "$(jb_sql "SELECT paused FROM jobbuf.queues WHERE name = 'held'")" t

# Resume with a 30 s poll interval: only the resume's own wake-up can deliver promptly.
set_and_reload jobbuf.poll_interval 30s || fail "poll_interval = 30s was not reloaded"
jb_sql "SELECT jobbuf_resume('held')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:held)" = 21 ]' 15; then
  pass "resumed queue delivered at once (poll_interval 30 s)"
else
  fail "resumed queue: $(jb_redis LLEN jobbuf:held) of 21 jobs in Redis 15 s after jobbuf_resume"
fi
wait_staged 0 "WHERE queue = 'held'" || fail "the worker did not commit the held queue's delivery"
expect_eq "held jobs arrive in order" \
  "$(jb_redis LRANGE jobbuf:held 0 -1 | ruby -rjson -ne 'print JSON.parse($_)["n"], " "')" "$(seq -s ' ' 1 21) "
wait_census || fail "no census of the worker"
expect_eq "resumed queue: jobbuf_stats" \
  "$(jb_sql "SELECT paused || ' ' || ready || ' ' || delivered_total FROM jobbuf_stats() WHERE queue = 'held'")" "false 0 21"

# Pausing again holds new jobs again.
jb_sql "SELECT jobbuf_pause('held')" >/dev/null
jb_sql "SELECT jobbuf_stage('held', '{\"n\": 22}'::jsonb)" >/dev/null
sleep 1
expect_eq "paused again: new job held" "$(jb_redis LLEN jobbuf:held) $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" "21 1"

# A pause takes effect while the queue drains: the worker must not finish a backlog of a queue
# that was paused meanwhile (the pause is a stop button for a misbehaving consumer). The queue is
# kept draining on purpose, whatever the machine's speed: an owner's DELETE trigger (which makes
# the worker take batches with its SQL statement, running the trigger per job) sleeps 2 ms for
# each job of the slowed queues, so a batch of 20 lasts at least 40 ms.
set_and_reload jobbuf.batch_size 20 || fail "batch_size = 20 was not reloaded"
jb_psql -q -o /dev/null <<'SQL'
CREATE TABLE public.slowed (queue text PRIMARY KEY);
CREATE FUNCTION public.slow_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.slowed s WHERE s.queue = OLD.queue) THEN
        PERFORM pg_sleep(0.002);
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER slow_delivery BEFORE DELETE ON jobbuf.jobs
    FOR EACH ROW EXECUTE FUNCTION public.slow_delivery();
INSERT INTO public.slowed VALUES ('backlog'), ('busy1'), ('busy2'), ('busy3');
SELECT jobbuf_create_queue('backlog', 'list');
SELECT count(jobbuf_stage('backlog', jsonb_build_object('n', n))) FROM generate_series(1, 5000) n;
SQL
jb_wait_until '[ "$(jb_redis LLEN jobbuf:backlog)" -gt 0 ]' 10
jb_sql "SELECT jobbuf_pause('backlog')" >/dev/null
at_pause=$(jb_redis LLEN jobbuf:backlog)
sleep 1.5
after=$(jb_redis LLEN jobbuf:backlog)
say "backlog: $at_pause of 5000 in Redis when jobbuf_pause committed, $after 1.5 s later"
expect_le "paused mid-drain: at most one more batch of 20 after the pause committed" "$(( after - at_pause ))" 20
wait_census || fail "no census of the worker"
expect_eq "paused mid-drain: the rest stays staged" "$(jb_sql "SELECT ready FROM jobbuf_stats() WHERE queue = 'backlog'")" "$(( 5000 - after ))"
check "paused mid-drain: most of the backlog was still staged ($(( 5000 - after )))" [ "$after" -lt 2500 ]

# A pause is exact for later commits: a batch whose snapshot sees a job staged after
# jobbuf_pause returned also sees the pause, even when the worker read its queue list before the
# pause (mid-pass, busy with other queues' backlogs). Resume-pause-stage cycles: a resume may
# deliver the jobs of the cycles before, none may deliver its own cycle's job.
# toggle_cycles <n> <take path> [refill]: sets early (own-cycle jobs delivered) and busy_cycles
# (cycles that started with all three busy queues non-empty). With refill, each cycle first tops
# up a busy queue that holds fewer than 200 jobs, so the worker stays busy however slow the machine.
toggle_cycles() {
  local first=$toggled_n
  busy_cycles=0
  early=0
  for _ in $(seq 1 "$1"); do
    toggled_n=$((toggled_n + 1))
    [ -z "${3:-}" ] || jb_sql "SELECT count(jobbuf_stage(q, jsonb_build_object('refill', n)))
                              FROM unnest('{busy1,busy2,busy3}'::text[]) q, generate_series(1, 400) n
                              WHERE (SELECT count(*) FROM jobbuf.jobs j WHERE j.queue = q) < 200" >/dev/null
    [ "$(jb_sql "SELECT count(DISTINCT queue) = 3 FROM jobbuf.jobs WHERE queue LIKE 'busy_'")" = t ] &&
      busy_cycles=$((busy_cycles + 1))
    jb_psql -q -o /dev/null -c "SELECT jobbuf_resume('toggled')" -c "SELECT jobbuf_pause('toggled')" \
      -c "SELECT jobbuf_stage('toggled', jsonb_build_object('n', $toggled_n))"
    sleep 0.05
    jb_redis LRANGE jobbuf:toggled 0 -1 | grep -qx "{\"n\": $toggled_n}" && early=$((early + 1))
  done
  expect_eq "$2: no job staged after jobbuf_pause returned was delivered before the next resume (of $1)" "$early" 0
  # (A resume lasts a millisecond here: the cycle before's job may or may not have gone in it.)
  expect_eq "$2: the last cycle's job stays staged" \
    "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'toggled' AND payload->>'n' = '$toggled_n'")" 1
}
toggled_n=0
jb_psql -q -o /dev/null -c "SELECT jobbuf_create_queue(q, 'list') FROM unnest('{busy1,busy2,busy3,toggled}'::text[]) q" \
  -c "SELECT jobbuf_pause(q) FROM unnest('{busy1,busy2,busy3,toggled}'::text[]) q"

# The direct take (no trigger): as busy as three backlogs of 60,000 keep it on this machine.
jb_psql -q -o /dev/null -c "ALTER TABLE jobbuf.jobs DISABLE TRIGGER slow_delivery" \
  -c "SELECT count(jobbuf_stage(q, jsonb_build_object('n', n))) FROM unnest('{busy1,busy2,busy3}'::text[]) q, generate_series(1, 60000) n" \
  -c "SELECT jobbuf_resume(q) FROM unnest('{busy1,busy2,busy3}'::text[]) q"
toggle_cycles 20 "direct take"
say "direct take: $busy_cycles of 20 cycles began with all three backlogs waiting"
jb_psql -q -o /dev/null -c "SELECT jobbuf_pause(q) FROM unnest('{busy1,busy2,busy3}'::text[]) q" \
  -c "DELETE FROM jobbuf.jobs WHERE queue LIKE 'busy_'"

# The SQL take, kept busy by construction: 3 x 2,000 slowed jobs, topped up whenever a queue runs low.
jb_psql -q -o /dev/null -c "ALTER TABLE jobbuf.jobs ENABLE TRIGGER slow_delivery" \
  -c "SELECT count(jobbuf_stage(q, jsonb_build_object('n', n))) FROM unnest('{busy1,busy2,busy3}'::text[]) q, generate_series(1, 2000) n" \
  -c "SELECT jobbuf_resume(q) FROM unnest('{busy1,busy2,busy3}'::text[]) q"
delivered_before=$(jb_sql "SELECT sum(delivered_total) FROM jobbuf_stats() WHERE queue LIKE 'busy_'")
toggle_cycles 60 "SQL take, worker kept busy" refill
expect_eq "SQL take: the worker was busy with three backlogs during every cycle" "$busy_cycles" 60
check "SQL take: the busy queues were being delivered meanwhile" \
  [ "$(jb_sql "SELECT sum(delivered_total) FROM jobbuf_stats() WHERE queue LIKE 'busy_'")" -gt "$delivered_before" ]

e2e_done

#!/usr/bin/env bash
# How the worker takes a batch. While jobbuf.jobs is as the extension created it, it deletes the
# jobs directly (src/job_taker.h): a job another transaction holds locked is skipped, as FOR
# UPDATE SKIP LOCKED would skip it, and delivered (after the others) once released. When the
# owner has added a DELETE trigger or a
# foreign key with ON DELETE CASCADE to jobbuf.jobs, the worker takes batches with its SQL
# statement, and the trigger and the cascade run for every delivered job.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '1s'"
jb_psql -q -o /dev/null -c "SELECT jobbuf_create_queue('t', 'list')" -c "SELECT jobbuf_pause('t')" \
  -c "SELECT jobbuf_stage('t', jsonb_build_object('n', n)) FROM generate_series(1, 5) n"

# A transaction locks job 3 until the test commits it; the worker delivers the other four
# meanwhile. The lock is seen taken when SKIP LOCKED no longer finds the row.
tx_open
tx_run "BEGIN; SELECT id FROM jobbuf.jobs WHERE queue = 't' AND payload->>'n' = '3' FOR UPDATE;" \
  || fail "the locking transaction did not run"
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM (SELECT 1 FROM jobbuf.jobs WHERE queue = 't' AND payload->>'n' = '3' FOR UPDATE SKIP LOCKED) s\")\" = 0 ]" 5 \
  || fail "the locking transaction did not start"
jb_sql "SELECT jobbuf_resume('t')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:t)" = 4 ]' 15; then
  pass "the four unlocked jobs are delivered while job 3 is locked"
else
  fail "the unlocked jobs were not delivered while job 3 was locked (Redis has $(jb_redis LLEN jobbuf:t))"
fi
wait_staged 1 "WHERE queue = 't'" || fail "the worker did not commit the four"
sleep 0.5   # a window for a delivery of job 3 that should not happen
expect_eq "job 3 is still staged, not delivered" "$(jb_sql "SELECT payload->>'n' FROM jobbuf.jobs WHERE queue = 't'")" "3"
expect_eq "Redis got the four" "$(jb_redis LRANGE jobbuf:t 0 -1 | tr '\n' ' ')" \
  '{"n": 1} {"n": 2} {"n": 4} {"n": 5} '
tx_close || fail "the locking transaction did not commit"
expect_list_reaches jobbuf:t 5 15 "job 3 is delivered once its lock is released"
expect_eq "it is job 3" "$(jb_redis LINDEX jobbuf:t -1)" '{"n": 3}'
expect_all_delivered_once jobbuf:t 5

# The owner's DELETE trigger and a foreign key with ON DELETE CASCADE pointing at jobbuf.jobs.
jb_psql -q -o /dev/null <<'SQL'
CREATE TABLE public.delivered_audit (job_id bigint, queue text);
CREATE FUNCTION public.audit_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.delivered_audit VALUES (OLD.id, OLD.queue);
  RETURN OLD;
END $$;
CREATE TRIGGER audit_delivery AFTER DELETE ON jobbuf.jobs FOR EACH ROW EXECUTE FUNCTION public.audit_delivery();
CREATE TABLE public.job_notes (job_id bigint REFERENCES jobbuf.jobs (id) ON DELETE CASCADE, note text);
SQL
jb_psql -q -o /dev/null -c "BEGIN" \
  -c "INSERT INTO public.job_notes SELECT jobbuf_stage('t', jsonb_build_object('m', m)), 'note' FROM generate_series(1, 30) m" \
  -c "COMMIT"
expect_list_reaches jobbuf:t 35 15 "with an owner's DELETE trigger and a cascading foreign key, the 30 jobs are delivered"
wait_staged 0 || fail "the worker did not commit the 30"
expect_eq "the owner's DELETE trigger ran for each delivered job" \
  "$(jb_sql "SELECT count(*) FROM public.delivered_audit WHERE queue = 't'")" 30
expect_eq "the cascade removed their notes" "$(jb_sql "SELECT count(*) FROM public.job_notes")" 0
expect_eq "in id order" "$(jb_redis LRANGE jobbuf:t 5 -1 | tr -dc '0-9\n' | paste -sd' ')" "$(seq -s' ' 1 30)"

e2e_done

#!/usr/bin/env bash
# One queue's persistent Postgres error costs that queue alone. A trigger makes every batch of
# queue "bad" raise an error (each attempt counted by a sequence, which a rollback does not undo);
# meanwhile queue "good" drains 40 full batches. Before, each failing batch ended the worker's
# round and held every queue back a second: "good" got at most one batch per attempt at "bad".
# Now "bad" backs off alone: "good" is delivered while "bad" was tried only a few times, the log
# says it once (one WARNING), and once the trigger is gone "bad" is delivered with one LOG line.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '1s'"
mark=$(log_mark)
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('bad', 'list');
SELECT jobbuf_create_queue('good', 'list', '{"batch_size": 50}');
CREATE SEQUENCE public.bad_attempts;
CREATE FUNCTION public.refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.nextval('public.bad_attempts');
  RAISE EXCEPTION 'queue bad refuses its jobs';
END $$;
CREATE TRIGGER refuse_bad BEFORE DELETE ON jobbuf.jobs FOR EACH ROW
  WHEN (OLD.queue = 'bad') EXECUTE FUNCTION public.refuse_bad();
SELECT jobbuf_stage('bad', '{"n": 0}');
SQL
attempts() { jb_sql "SELECT last_value - CASE WHEN is_called THEN 0 ELSE 1 END FROM public.bad_attempts"; }
jb_wait_until '[ "$(attempts)" -ge 1 ]' 15 || fail "the worker never tried queue bad"

before=$(attempts)
jb_sql "SELECT jobbuf_stage('good', jsonb_build_object('n', n)) FROM generate_series(1, 2000) n" >/dev/null
# Until good is delivered, or until bad was tried 20 times more (before: good got at most one
# batch of 50 per attempt at bad, so 40 batches needed 40 attempts or more).
jb_wait_until "[ \"\$(jb_redis LLEN jobbuf:good)\" = 2000 ] || [ \"\$(attempts)\" -ge $((before + 20)) ]" 120
expect_eq "queue good is delivered while queue bad fails" "$(jb_redis LLEN jobbuf:good)" 2000
expect_le "attempts at queue bad meanwhile" "$(( $(attempts) - before ))" 5
expect_eq "queue bad's job is still staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bad'")" 1

log=$(log_since "$mark")
expect_eq "one WARNING for queue bad" "$(count_lines 'WARNING: .*queue "bad" is not delivered: queue bad refuses its jobs' "$log")" 1
expect_eq "no other jobbuf WARNING" "$(count_lines 'WARNING: .*jobbuf' "$log")" 1
expect_match "jobbuf_worker_status shows it" "$(worker_status_value last_error)" "queue bad refuses its jobs"

# The error ends: a change of the queue (here a pause and resume) retries it at once.
jb_psql -q -o /dev/null -c "DROP TRIGGER refuse_bad ON jobbuf.jobs" \
  -c "SELECT jobbuf_pause('bad')" -c "SELECT jobbuf_resume('bad')"
expect_list_reaches jobbuf:bad 1 15 "queue bad is delivered once the error is gone"
jb_wait_until "log_since $mark | grep -q 'queue \"bad\" is delivered again'" 5
log=$(log_since "$mark")
expect_eq "one LOG line when it ends" "$(count_lines 'LOG: .*queue "bad" is delivered again' "$log")" 1
expect_eq "still one WARNING" "$(count_lines 'WARNING: .*jobbuf' "$log")" 1
e2e_done

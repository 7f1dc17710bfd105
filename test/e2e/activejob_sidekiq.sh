#!/usr/bin/env bash
# End-to-end: Rails' ActiveJob through the jobbuf gem's :jobbuf adapter, run by an unmodified
# Sidekiq server (Debian's ruby-sidekiq) with the application loaded (test/consumers/rails).
# 100 transactions each create a Widget and call RecordJob.perform_later(widget, n, string, hash);
# 10 roll back, 3 are scheduled with set(wait: 4.seconds); one more transaction enqueues a job
# that fails once. Sidekiq must perform exactly the 90 committed jobs once, the scheduled ones
# not before their time, none of the rolled-back ones, with their arguments intact (the widget
# found again through its GlobalID), and retry the failing job through its own retry set.
# Every perform writes a row into job_runs; the counts printed come from those rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
export JB_SIDEKIQ_APP=$PWD/test/consumers/rails/app.rb
source test/e2e/tools/lib.sh
source test/consumers/sidekiq/sidekiq.sh

cleanup() {
  jb_stop_sidekiq_reporting "$CHECKS_FAILURES"
  e2e_cleanup
}

e2e_start
trap cleanup EXIT
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('default', 'sidekiq');
CREATE TABLE widgets (id bigserial PRIMARY KEY, n integer NOT NULL, name text NOT NULL);
CREATE TABLE job_runs (id bigserial PRIMARY KEY, kind text NOT NULL, n integer, widget_id bigint,
                       widget_n integer, str text, hash_arg jsonb, provider_job_id text,
                       sidekiq jsonb NOT NULL, ran_at float8 NOT NULL);
SQL

RUN_LOG=$JB_RUN/ran.jsonl   # unused by this app; jb_start_sidekiq wants one
jb_start_sidekiq "$RUN_LOG" default
check "sidekiq $(ruby -e 'require "sidekiq"; print Sidekiq::VERSION') started with the application and registered" \
  jb_wait_sidekiq_ready 30

EXPECTED=$JB_RUN/expected.json
check "producer: 100 transactions with perform_later, then the failing job" \
  ruby test/consumers/rails/produce.rb "$EXPECTED"

# done: the 90 committed jobs and the failing job's successful retry have run. Sidekiq's retry
# comes 1-10 s after the failure; then a little longer for a duplicate to show up.
done_runs() {
  [ "$(jb_sql "SELECT count(*) FILTER (WHERE kind = 'record') >= 90 AND count(*) FILTER (WHERE str = 'succeeded') >= 1 FROM job_runs")" = t ]
}
jb_wait_until done_runs 60 || say "not every job ran within 60 s"
sleep 2
counts=$(ruby test/consumers/rails/check.rb "$EXPECTED")
echo "$counts" | sed 's/^/  /'
count() { sed -n "s/^$1=//p" <<<"$counts"; }

expect_eq "RecordJob performed (rows written)" "$(count record_runs)" 90
expect_eq "distinct jobs performed" "$(count distinct_n)" 90
expect_eq "committed jobs performed exactly once" "$(count committed_ran_once)" 90
expect_eq "rolled-back jobs performed" "$(count rolled_back_ran)" 0
expect_eq "performed jobs that were never committed" "$(count unexpected_runs)" 0
expect_eq "jobs whose GlobalID argument found their own record" "$(count globalid_record_found)" 90
expect_eq "jobs whose integer, string and hash arguments arrived intact" "$(count arguments_intact)" 90
expect_eq "jobs Sidekiq ran as ActiveJob's JobWrapper (wrapped RecordJob, queue default, retry true)" \
  "$(count sidekiq_activejob_shape)" 90
expect_eq "jobs whose Sidekiq jid ends with their jobbuf id (provider_job_id) in hex" "$(count jid_from_jobbuf_id)" 90
expect_eq "scheduled jobs performed" "$(count scheduled_ran)" 3
expect_eq "scheduled jobs performed before their time" "$(count scheduled_early)" 0
expect_eq "failing job: failed attempts" "$(count flaky_failed)" 1
expect_eq "failing job: successful attempts" "$(count flaky_succeeded)" 1
expect_eq "failing job: retried by Sidekiq (same jid, retry_count 0)" "$(count flaky_retried_by_sidekiq)" 1
wait_staged 0 || true
expect_eq "jobbuf.jobs is empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "Sidekiq's queue, schedule and retry sets are empty" \
  "$(jb_redis LLEN queue:default) $(jb_redis ZCARD schedule) $(jb_redis ZCARD retry)" "0 0 0"
e2e_done

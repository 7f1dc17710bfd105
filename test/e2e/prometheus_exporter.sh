#!/usr/bin/env bash
# contrib/prometheus/queries.yaml with the real exporter (Debian's prometheus-postgres-exporter):
# started on a free loopback port with one DSN per database, as a login role that has only
# pg_monitor and jobbuf_monitor. Its /metrics carries the SPEC's metric names with labels datname
# and queue, and their values follow what happens: jobs delivered while a producer stages (the
# totals grow, a rate and a time in queue appear), a paused queue's backlog (ready, scheduled,
# the oldest ready job's age), consumer failures in failed_total, and while Redis is down
# jobbuf_worker_redis_connected 0 and the staged jobs counted as ready; then all delivered. A
# database with jobbuf but no worker shows jobbuf_worker_running 0. The scraping role cannot read
# jobbuf's tables.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT

command -v prometheus-postgres-exporter >/dev/null || { fail "prometheus-postgres-exporter is not installed (make deps)"; e2e_done; }
e2e_start "jobbuf.batch_size = 50"
jb_psql_db postgres -q -c "CREATE DATABASE other"
jb_psql_db other -q -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('idle', 'list')" \
  -c "SELECT jobbuf_stage('idle', '{}'::jsonb) FROM generate_series(1, 3)" >/dev/null
jb_psql -q -o /dev/null \
  -c "CREATE ROLE scraper LOGIN" -c "GRANT pg_monitor, jobbuf_monitor TO scraper" \
  -c "SELECT jobbuf_create_queue('flow', 'list')" \
  -c "SELECT jobbuf_create_queue('parked', 'list')" -c "SELECT jobbuf_pause('parked')" \
  -c "SELECT jobbuf_create_queue('claims', 'none', '{\"backoff_base\": 3600}')"
wait_redis_connected || fail "the worker did not connect to Redis"

# The paused queue's backlog: 7 ready, 2 due in an hour. Five claimed jobs that the consumer fails.
jb_sql "SELECT jobbuf_stage('parked', jsonb_build_object('n', n)) FROM generate_series(1, 7) n" >/dev/null
jb_sql "SELECT jobbuf_stage('parked', '{}'::jsonb, now() + interval '1 hour') FROM generate_series(1, 2)" >/dev/null
jb_sql "SELECT jobbuf_stage('claims', jsonb_build_object('n', n)) FROM generate_series(1, 5) n" >/dev/null
expect_eq "a consumer fails the 5 jobs it claimed" \
  "$(jb_sql "SELECT jobbuf_fail(g, 'broken') FROM (SELECT DISTINCT group_id g FROM jobbuf_claim('claims', 10)) c")" 5
jb_sql "SELECT jobbuf_stage('flow', jsonb_build_object('n', n)) FROM generate_series(1, 200) n" >/dev/null
expect_list_reaches jobbuf:flow 200 30 "200 jobs delivered before the exporter starts"
wait_delivered 200 || fail "the worker did not count the 200 deliveries"
wait_census || fail "no census after the deliveries"   # what publishes the minute's rate and times

# The exporter, on a free port, one DSN per database, as docs/operations.md runs it: only jobbuf's
# queries (the server-wide ones would be collected once per DSN of the same server, which 0.11
# refuses with HTTP 500).
exporter_on() {  # PORT: returns once this exporter listens there
  local pid from
  from=$(jb_log_size "$JB_RUN/exporter.log")
  DATA_SOURCE_NAME="postgresql://scraper@127.0.0.1:$JB_PGPORT/$JB_DB?sslmode=disable,postgresql://scraper@127.0.0.1:$JB_PGPORT/other?sslmode=disable" \
    prometheus-postgres-exporter --web.listen-address="127.0.0.1:$1" \
    --disable-default-metrics --disable-settings-metrics --no-collector.database --no-collector.bgwriter \
    --extend.query-path="$ROOT/contrib/prometheus/queries.yaml" >>"$JB_RUN/exporter.log" 2>&1 &
  pid=$!
  E2E_EXTRA_PIDS+=("$pid")
  jb_wait_until "jb_listening $pid $1 || ! kill -0 $pid 2>/dev/null" 15
  jb_listening "$pid" "$1" && return 0
  jb_port_taken "$JB_RUN/exporter.log" "$from" && return "$JB_PORT_TAKEN"
  return 1
}
jb_on_free_port EXPORTER_PORT exporter_on || { fail "the exporter did not start"; cat "$JB_RUN/exporter.log"; e2e_done; }
scrape() { curl -fsS "http://127.0.0.1:$EXPORTER_PORT/metrics" >"$JB_RUN/metrics.txt" 2>/dev/null; }
# metric NAME DATNAME [QUEUE]: the value of that series in the last scrape ("" when absent).
metric() {
  grep -E "^$1\{" "$JB_RUN/metrics.txt" | grep -F "datname=\"$2\"" | { if [ -n "${3:-}" ]; then grep -F "queue=\"$3\""; else cat; fi; } \
    | awk '{print $NF}' | head -n1
}
# until_metric "NAME DATNAME [QUEUE]" EXPECTED SECONDS: scrapes until the series has that value.
until_metric() {
  local args=$1 want=$2
  # shellcheck disable=SC2086
  jb_wait_until "scrape && [ \"\$(metric $args)\" = '$want' ]" "$3"
}
jb_wait_until scrape 15 || { fail "the exporter did not answer on port $EXPORTER_PORT"; cat "$JB_RUN/exporter.log"; e2e_done; }

check "delivered_total of flow is 200" until_metric "jobbuf_queue_delivered_total $JB_DB flow" 200 10
say "first scrape: $(grep -c '^jobbuf_' "$JB_RUN/metrics.txt") jobbuf series"
for name in jobbuf_queue_ready jobbuf_queue_scheduled jobbuf_queue_claimed jobbuf_queue_held jobbuf_queue_dead \
            jobbuf_queue_oldest_ready_seconds jobbuf_queue_delivered_total jobbuf_queue_failed_total \
            jobbuf_queue_queue_time_p99_seconds; do
  expect_eq "$name: one series per queue of both databases" \
    "$(grep -E "^$name\{" "$JB_RUN/metrics.txt" | grep -oE 'datname="[^"]*",.*queue="[^"]*"|queue="[^"]*"' | wc -l)" 4
done
check "paused queue: 7 ready" until_metric "jobbuf_queue_ready $JB_DB parked" 7 10
expect_eq "paused queue: 2 scheduled" "$(metric jobbuf_queue_scheduled "$JB_DB" parked)" 2
check "paused queue: its oldest ready job has waited (> 0 s)" \
  awk -v v="$(metric jobbuf_queue_oldest_ready_seconds "$JB_DB" parked)" 'BEGIN { exit !(v > 0) }'
expect_eq "failed_total counts the 5 consumer failures" "$(metric jobbuf_queue_failed_total "$JB_DB" claims)" 5
expect_eq "the failed jobs wait for their retry: scheduled 5, claimed 0" \
  "$(metric jobbuf_queue_scheduled "$JB_DB" claims) $(metric jobbuf_queue_claimed "$JB_DB" claims)" "5 0"
p99=$(metric jobbuf_queue_queue_time_p99_seconds "$JB_DB" flow)
check "flow: a time in queue p99 over the last minute ($p99 s)" awk -v v="$p99" 'BEGIN { exit !(v > 0 && v < 60) }'
expect_eq "parked: no delivery, no time in queue (NaN)" "$(metric jobbuf_queue_queue_time_p99_seconds "$JB_DB" parked)" NaN
expect_eq "worker of $JB_DB: running, connected" \
  "$(metric jobbuf_worker_running "$JB_DB") $(metric jobbuf_worker_redis_connected "$JB_DB")" "1 1"
expect_eq "database other (no worker): running 0, redis_connected 0" \
  "$(metric jobbuf_worker_running other) $(metric jobbuf_worker_redis_connected other)" "0 0"
# Schedules: one on time here (0), one in the database without a worker whose tick is 90 s due.
jb_sql "SELECT jobbuf_schedule('yearly_report', '@yearly', 'parked', '{}')" >/dev/null
jb_psql_db other -qtAX -c "SELECT jobbuf_create_queue('reports', 'list')" \
  -c "SET client_min_messages = error" -c "SELECT jobbuf_schedule('minutely', '* * * * *', 'reports', '{}')" \
  -c "UPDATE jobbuf.schedules SET next_run_at = now() - interval '90 seconds'" >/dev/null
scrape
expect_eq "jobbuf_schedule_lateness_seconds: on time here" "$(metric jobbuf_schedule_lateness_seconds "$JB_DB")" 0
check "jobbuf_schedule_lateness_seconds: 90 s late where no worker runs ($(metric jobbuf_schedule_lateness_seconds other))" \
  awk -v v="$(metric jobbuf_schedule_lateness_seconds other)" 'BEGIN { exit !(v >= 90 && v < 600) }'

# While a producer stages: the total grows from scrape to scrape, the rate is positive.
( for i in $(seq 1 20); do jb_sql "SELECT jobbuf_stage('flow', jsonb_build_object('i', $i, 'n', n)) FROM generate_series(1, 10) n" >/dev/null; sleep 0.1; done ) &
producer=$!
jb_wait_until "scrape && [ \"\$(metric jobbuf_queue_delivered_total $JB_DB flow)\" -gt 200 ]" 15
during=$(metric jobbuf_queue_delivered_total "$JB_DB" flow)
wait "$producer"
expect_list_reaches jobbuf:flow 400 30 "the producer's 200 jobs delivered"
check "delivered_total reaches 400 (seen $during while jobs flowed)" until_metric "jobbuf_queue_delivered_total $JB_DB flow" 400 10
check "delivered_total grew while jobs flowed (200 < $during)" [ "$during" -gt 200 ]
# Flow control: one series per queue and state, 1 for the current one; the paused queue shows it.
flow_state() {  # QUEUE STATE: the value of that queue's series for STATE in the last scrape
  grep -E '^jobbuf_queue_flow_state\{' "$JB_RUN/metrics.txt" | grep -F "datname=\"$JB_DB\"" | grep -F "queue=\"$1\"" |
    grep -F "state=\"$2\"" | awk '{print $NF}' | head -n1
}
expect_eq "jobbuf_queue_flow_state: flow is flowing (1), not paused (0)" "$(flow_state flow flowing) $(flow_state flow paused)" "1 0"
expect_eq "jobbuf_queue_flow_state: parked is paused" "$(flow_state parked paused) $(flow_state parked flowing)" "1 0"
expect_eq "jobbuf_queue_flow_state: seven states per queue" \
  "$(grep -E '^jobbuf_queue_flow_state\{' "$JB_RUN/metrics.txt" | grep -F "datname=\"$JB_DB\"" | grep -cF 'queue="flow"')" 7

wait_census || fail "no census after the deliveries"
scrape
rate=$(metric jobbuf_queue_delivered_per_second "$JB_DB" flow)
check "delivered_per_second over the last minute is positive ($rate)" awk -v v="$rate" 'BEGIN { exit !(v > 0) }'

# Redis down: the worker says so, staged jobs are counted as ready and age.
stop_redis
check "Redis down: jobbuf_worker_redis_connected 0" until_metric "jobbuf_worker_redis_connected $JB_DB" 0 20
jb_sql "SELECT jobbuf_stage('flow', jsonb_build_object('n', n)) FROM generate_series(1, 30) n" >/dev/null
check "Redis down: the 30 staged jobs are ready" until_metric "jobbuf_queue_ready $JB_DB flow" 30 10
expect_eq "Redis down: delivered_total stays 400" "$(metric jobbuf_queue_delivered_total "$JB_DB" flow)" 400
expect_eq "Redis down: the worker still runs" "$(metric jobbuf_worker_running "$JB_DB")" 1
jb_restart_redis || fail "redis-server did not restart"
check "Redis back: jobbuf_worker_redis_connected 1" until_metric "jobbuf_worker_redis_connected $JB_DB" 1 30
check "Redis back: the 30 jobs delivered (delivered_total 430)" until_metric "jobbuf_queue_delivered_total $JB_DB flow" 430 30
check "Redis back: nothing ready" until_metric "jobbuf_queue_ready $JB_DB flow" 0 10
expect_eq "Redis back: no oldest ready age" "$(metric jobbuf_queue_oldest_ready_seconds "$JB_DB" flow)" 0

# Least privilege: the scraping role reads the metrics, not the jobs.
check "the scraping role cannot read jobbuf.jobs" \
  bash -c "! psql -X -h '$JB_PGHOST' -p '$JB_PGPORT' -U scraper -d '$JB_DB' -qtAc 'SELECT count(*) FROM jobbuf.jobs' 2>/dev/null"
check "nor call jobbuf_stage" \
  bash -c "! psql -X -h '$JB_PGHOST' -p '$JB_PGPORT' -U scraper -d '$JB_DB' -qtAc \"SELECT jobbuf_stage('flow', '{}'::jsonb)\" 2>/dev/null"
expect_eq "the exporter logged no error of jobbuf's queries" "$(grep -ci 'jobbuf.*error\|error.*jobbuf' "$JB_RUN/exporter.log")" 0
e2e_done

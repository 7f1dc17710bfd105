#!/usr/bin/env bash
# jobbuf benchmark driver (`make bench`). Starts a private Postgres cluster with the jobbuf worker
# and a private redis-server (test/harness/servers.sh, free loopback ports), runs every
# measurement, prints the raw figures as it goes and ONE summary table at the end, and stops
# everything on exit, whatever the outcome. Method and how to read the table: bench/README.md.
#
# Environment (defaults in brackets):
#   BENCH_JOBS [1000000]           pre-staged jobs per drain measurement (200000 for a quick run)
#   BENCH_BATCH [1000]             jobbuf.batch_size, the SQL ceiling's and the enqueuer's batch
#   BENCH_DRAIN_ROUNDS [2]         rounds of every drain measurement; the table shows the best
#   BENCH_STAGE_SECONDS [10]       each pgbench run of the staging cost
#   BENCH_STAGE_ROUNDS [2]         rounds of (plain, jobbuf, jobbuf, plain); the table shows the best
#   BENCH_LAT_SECONDS [10]         each latency scenario (idle, 2000/s, 5000/s)
#   BENCH_SUSTAIN_SECONDS [60]     each sustained run (normal, then with a held transaction; 600 for the full run)
#   BENCH_SUSTAIN_RATE []          jobs/s offered in the sustained runs [70% of what staging and drain sustain together]
#   BENCH_FSYNC [off]              fsync of the benchmark cluster (synchronous_commit is always on)
#   BENCH_SNAPSHOT_SECONDS [60]    each run of the "snapshot" phase, with and without a snapshot held (600: the 10-minute runs)
#   BENCH_SNAPSHOT_RUNS [800:120 2000:all 2000:dump 70%:all]   RATE:HOLD pairs of the "snapshot" phase: single-job
#                                  transactions at RATE jobs/s (70%: of the measured single-job staging rate),
#                                  HOLD a REPEATABLE READ snapshot held for N s at a time, the whole run (all),
#                                  or pg_dump's lock on jobbuf.jobs (dump: ACCESS SHARE held with the snapshot)
#   BENCH_SNAPSHOT_BASELINE [0]    rounds of the "snapshot" phase against release 1.2: each round runs its loads on
#                                  this build and on 1.2 (commit 6738a34) installed in turn, as the baseline phase does
#                                  (current, 1.2, then 1.2, current, ...); 0: the current build only
#   BENCH_CAPPED_BACKLOG [100000]  the "snapshot_capped" phase: jobs held back (staged) by a depth cap while the
#                                  snapshot phase's loads run, without and with their snapshot
#   BENCH_CAPPED_MAX [1000]        that queue's max_in_redis (no consumer: the cap's worth sits in Redis)
#   BENCH_CAPPED_RUNS [BENCH_SNAPSHOT_RUNS]  RATE:HOLD pairs of the "snapshot_capped" phase
#   BENCH_PHASES [baseline drain staging latency sustain snapshot snapshot_capped activejob redisprod cluster frameworks databases clients scrape queues schedules flow fair]
#                                  a subset to run; add "profile" for a perf profile
#   BENCH_BASELINE_ROUNDS [2]      rounds of the "baseline" phase: this build and release 1.2 (commit 6738a34) installed in
#                                  turn (current, 1.2, then 1.2, current, ...), each measured with the drain phase's list
#                                  drain and the latency phase's idle and 5000/s probes
#   BENCH_REDIS_MAXMEMORY [1gb]    the maxmemory the redis-server is restarted with for the "baseline" phase (0: none)
#   BENCH_DOCS []                  1: write docs/performance.md from this run even when it ran a subset of the phases;
#                                  0: never (by default it is written when every default phase ran)
#   BENCH_AJ_SECONDS [5] BENCH_AJ_ROUNDS [2]   each run and the rounds of the activejob phase
#   BENCH_REDISPROD_JOBS [BENCH_JOBS/4]  jobs per drain of the redisprod phase (TLS vs plain, min_replicas)
#   BENCH_CLUSTER_JOBS [BENCH_JOBS/4]    jobs per drain of the cluster phase (3-master Redis Cluster vs one Redis)
#   BENCH_FW_JOBS [100000]         jobs of the frameworks phase (BENCH_PHASES=frameworks: jobbuf into
#                                  BullMQ and Celery vs Queue.addBulk and apply_async)
#   BENCH_CLIENTS_SECONDS [5] BENCH_CLIENTS_ROUNDS [2]   each run and the rounds of the clients phase
#   BENCH_DB_JOBS [500000]         jobs per database in the "databases" phase (one vs two databases draining)
#   BENCH_DB_COUNT [50]            databases with the extension for the "databases" phase's wake-up latency
#   BENCH_SCRAPE_JOBS [1000000]   the backlog (a paused queue) of the "scrape" phase: what one metrics scrape
#                                  costs, 1.1's jobbuf_stats (counts jobs) vs 1.2's (reads the worker's census)
#   BENCH_SCRAPE_CALLS [20]        calls of each query in the "scrape" phase (the table shows the mean)
#   BENCH_SCRAPE_PROBE_SECONDS [20] the "scrape" phase's latency probe of a live queue while the worker
#                                  counts the backlog (its longest pause: one census step vs the census in one step)
#   BENCH_QUEUES [10 10000]        queue counts of the "queues" phase (idle worker CPU, commit -> Redis latency)
#   BENCH_QUEUES_SECONDS [10]      each idle CPU measurement of the "queues" phase
#   BENCH_SCHEDULES [10000]        schedules of the "schedules" phase, none due (idle worker CPU with
#                                  them against none, and the commit -> Redis latency)
#   BENCH_BUILD [1]                0: skip `make && make install` (use the installed extension)
#   BENCH_PG_CONF []               extra postgresql.conf lines (diagnostics, e.g. auto_explain)
#   BENCH_RESULTS []               also copy the key=value results file there (bench/majors.sh)
#   JB_KEEP [] (harness)           keep the run directory (logs, perf data) after the run
#   JB_REDIS [redis] (harness)     valkey: run Valkey's server under the Redis names
set -Eeuo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BENCH_JOBS=${BENCH_JOBS:-1000000}
BENCH_BATCH=${BENCH_BATCH:-1000}
BENCH_DRAIN_ROUNDS=${BENCH_DRAIN_ROUNDS:-2}
BENCH_STAGE_SECONDS=${BENCH_STAGE_SECONDS:-10}
BENCH_STAGE_ROUNDS=${BENCH_STAGE_ROUNDS:-2}
BENCH_LAT_SECONDS=${BENCH_LAT_SECONDS:-10}
BENCH_SUSTAIN_SECONDS=${BENCH_SUSTAIN_SECONDS:-60}
BENCH_SUSTAIN_RATE=${BENCH_SUSTAIN_RATE:-}
BENCH_FSYNC=${BENCH_FSYNC:-off}
BENCH_DEFAULT_PHASES="baseline drain staging latency sustain snapshot snapshot_capped activejob redisprod cluster frameworks databases clients scrape queues schedules flow fair"
BENCH_PHASES=${BENCH_PHASES:-$BENCH_DEFAULT_PHASES}
BENCH_BASELINE_ROUNDS=${BENCH_BASELINE_ROUNDS:-2}
BENCH_REDIS_MAXMEMORY=${BENCH_REDIS_MAXMEMORY:-1gb}
BENCH_DOCS=${BENCH_DOCS:-}
BENCH_SCRAPE_JOBS=${BENCH_SCRAPE_JOBS:-1000000}
BENCH_SCRAPE_PROBE_SECONDS=${BENCH_SCRAPE_PROBE_SECONDS:-20}
BENCH_SCRAPE_CALLS=${BENCH_SCRAPE_CALLS:-20}
BENCH_QUEUES=${BENCH_QUEUES:-10 10000}
BENCH_QUEUES_SECONDS=${BENCH_QUEUES_SECONDS:-10}
BENCH_SCHEDULES=${BENCH_SCHEDULES:-10000}
BENCH_SNAPSHOT_SECONDS=${BENCH_SNAPSHOT_SECONDS:-60}
BENCH_SNAPSHOT_RUNS=${BENCH_SNAPSHOT_RUNS:-800:120 2000:all 2000:dump 70%:all}
BENCH_SNAPSHOT_BASELINE=${BENCH_SNAPSHOT_BASELINE:-0}
BENCH_CAPPED_BACKLOG=${BENCH_CAPPED_BACKLOG:-100000}
BENCH_CAPPED_MAX=${BENCH_CAPPED_MAX:-1000}
BENCH_CAPPED_RUNS=${BENCH_CAPPED_RUNS:-$BENCH_SNAPSHOT_RUNS}
BENCH_DB_JOBS=${BENCH_DB_JOBS:-500000}
BENCH_DB_COUNT=${BENCH_DB_COUNT:-50}
BENCH_BUILD=${BENCH_BUILD:-1}
BENCH_AJ_SECONDS=${BENCH_AJ_SECONDS:-5} BENCH_AJ_ROUNDS=${BENCH_AJ_ROUNDS:-2}
BENCH_CLIENTS_SECONDS=${BENCH_CLIENTS_SECONDS:-5} BENCH_CLIENTS_ROUNDS=${BENCH_CLIENTS_ROUNDS:-2}
BENCH_REDISPROD_JOBS=${BENCH_REDISPROD_JOBS:-$((BENCH_JOBS / 4))} BENCH_CLUSTER_JOBS=${BENCH_CLUSTER_JOBS:-$((BENCH_JOBS / 4))}
BENCH_FW_JOBS=${BENCH_FW_JOBS:-100000}
export BENCH_AJ_SECONDS BENCH_AJ_ROUNDS  # bench/activejob.rb reads them

# settings_used: the BENCH_* settings of the phases this run runs, as NAME=value; ...
settings_used() {
  local knobs="BENCH_JOBS BENCH_BATCH BENCH_FSYNC BENCH_BUILD" p v
  for p in $BENCH_PHASES; do
    case $p in
      baseline) knobs+=" BENCH_BASELINE_ROUNDS BENCH_REDIS_MAXMEMORY BENCH_LAT_SECONDS" ;;
      drain) knobs+=" BENCH_DRAIN_ROUNDS" ;;
      staging) knobs+=" BENCH_STAGE_SECONDS BENCH_STAGE_ROUNDS" ;;
      latency) knobs+=" BENCH_LAT_SECONDS" ;;
      sustain) knobs+=" BENCH_SUSTAIN_SECONDS BENCH_SUSTAIN_RATE" ;;
      snapshot) knobs+=" BENCH_SNAPSHOT_SECONDS BENCH_SNAPSHOT_RUNS BENCH_SNAPSHOT_BASELINE" ;;
      snapshot_capped) knobs+=" BENCH_SNAPSHOT_SECONDS BENCH_CAPPED_RUNS BENCH_CAPPED_BACKLOG BENCH_CAPPED_MAX" ;;
      activejob) knobs+=" BENCH_AJ_SECONDS BENCH_AJ_ROUNDS" ;;
      redisprod) knobs+=" BENCH_REDISPROD_JOBS BENCH_DRAIN_ROUNDS" ;;
      cluster) knobs+=" BENCH_CLUSTER_JOBS BENCH_DRAIN_ROUNDS" ;;
      frameworks) knobs+=" BENCH_FW_JOBS" ;;
      databases) knobs+=" BENCH_DB_JOBS BENCH_DB_COUNT BENCH_LAT_SECONDS" ;;
      clients) knobs+=" BENCH_CLIENTS_SECONDS BENCH_CLIENTS_ROUNDS" ;;
      scrape) knobs+=" BENCH_SCRAPE_JOBS BENCH_SCRAPE_CALLS BENCH_SCRAPE_PROBE_SECONDS" ;;
      queues) knobs+=" BENCH_QUEUES BENCH_QUEUES_SECONDS BENCH_LAT_SECONDS" ;;
      schedules) knobs+=" BENCH_SCHEDULES BENCH_QUEUES_SECONDS BENCH_LAT_SECONDS" ;;
    esac
  done
  [ -z "${BENCH_PG_CONF:-}" ] || knobs+=" BENCH_PG_CONF"
  for v in $(tr ' ' '\n' <<<"$knobs" | awk '!seen[$0]++'); do
    case $v in
      BENCH_SUSTAIN_RATE) printf '%s=%s; ' "$v" "${!v:-70% of what staging and drain sustain together}" ;;
      *) printf '%s=%s; ' "$v" "${!v}" ;;
    esac
  done | tr '\n' ' ' | sed 's/; $//'
}

say() { printf '\n== %s  [%s]\n' "$*" "$(date +%T)"; }
fail() { printf '\nbench: FAILED: %s\n' "$*" >&2; exit 1; }
has_phase() { [[ " $BENCH_PHASES " == *" $1 "* ]]; }

source "$ROOT/test/harness/redis_flavor.sh"
for tool in pgbench psql redis-server redis-cli ruby gcc; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (run: bash scripts/install-deps.sh)"
done
ruby -e 'require "pg"; require "redis"' 2>/dev/null || fail "ruby-pg and ruby-redis are needed (bash scripts/install-deps.sh)"

# Background processes this script starts; stopped (by pid) before the servers on any exit.
BG_PIDS=()
HELD_FD_OPEN=0
# 1 while the baseline phase may have left another build than the current one installed:
# bench_cleanup installs the current build again, whatever the outcome.
BASELINE_SWAPPED=0
bench_cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ "$HELD_FD_OPEN" = 1 ]; then exec 9>&- || true; fi
  for pid in "${BG_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ $status -ne 0 ] && [ -f "${JB_RUN:-/nonexistent}/postgres.log" ]; then
    echo "bench: last lines of the Postgres log:" >&2
    tail -n 15 "$JB_RUN/postgres.log" >&2
    JB_KEEP=1
    echo "bench: kept $JB_RUN (logs, data directory) for inspection; remove it when done" >&2
  fi
  if declare -F jb_stop_redis_cluster >/dev/null; then jb_stop_redis_cluster 2>/dev/null || true; fi
  jb_stop_all 2>/dev/null || true
  if [ "$BASELINE_SWAPPED" = 1 ]; then
    if install_current; then echo "bench: the current build is installed again (the baseline phase had installed 1.2)" >&2
    else echo "bench: could not install the current build again: run make install" >&2; fi
  fi
  [ $status -eq 0 ] || echo "bench: exited with status $status; servers stopped" >&2
  exit $status
}
trap 'fail "line $LINENO: $BASH_COMMAND"' ERR

RUN_STARTED=$(date -u '+%Y-%m-%d %H:%M UTC')
say "machine"
echo "uptime: $(uptime)"
echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "other processes using CPU now (other engineers' test runs load this machine too):"
ps -eo pcpu=,comm= --sort=-pcpu | head -5 | sed 's/^/  /'

if [ "$BENCH_BUILD" = 1 ]; then
  say "build and install jobbuf"
  make -s >/dev/null && make -s install >/dev/null || fail "make / make install failed"
fi

# --- servers ---------------------------------------------------------------------------------
source "$ROOT/test/harness/servers.sh"
jb_init_run_dir
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PG_CONF="# jobbuf benchmark settings (bench/run.sh)
shared_buffers = 1GB
work_mem = 16MB
maintenance_work_mem = 256MB
fsync = $BENCH_FSYNC
synchronous_commit = on
full_page_writes = on
wal_buffers = 16MB
max_wal_size = 8GB
checkpoint_timeout = 30min
max_connections = 50
jobbuf.batch_size = $BENCH_BATCH
log_min_messages = warning
log_autovacuum_min_duration = 0
${BENCH_PG_CONF:-}"
if has_phase databases; then  # a drain worker per database: '*', and room for BENCH_DB_COUNT + 3 of them
  PG_CONF="$PG_CONF
jobbuf.database = '*'
jobbuf.max_workers = $((BENCH_DB_COUNT + 6))
max_worker_processes = $((BENCH_DB_COUNT + 16))"
fi
say "start private redis-server and Postgres"
jb_start_redis >/dev/null || fail "redis-server did not start"
jb_start_postgres "$PG_CONF" || fail "Postgres did not start (log: $JB_RUN/postgres.log)"
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB REDIS_PORT=$JB_REDIS_PORT
echo "run dir $JB_RUN; Postgres $(jb_sql 'SHOW server_version') on port $JB_PGPORT; redis $(redis-server --version | awk '{print $3}') on port $JB_REDIS_PORT"
echo "cluster: $(jb_sql "SELECT string_agg(name || '=' || setting || coalesce(unit, ''), ', ' ORDER BY name) FROM pg_settings WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit', 'max_wal_size', 'autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'jobbuf.batch_size', 'jobbuf.poll_interval')")"
jb_psql -q -f bench/sql/setup.sql >/dev/null || fail "loading bench/sql/setup.sql"

LATENCY_PROBE=$JB_RUN/latency_probe
gcc -O2 -Wall -o "$LATENCY_PROBE" bench/latency_probe.c -I"$(pg_config --includedir)" -lpq -lhiredis \
  || fail "compiling bench/latency_probe.c (needs libpq-dev and libhiredis-dev)"

jb_wait_until '[ -n "$(jb_sql "SELECT pid FROM jobbuf_worker_status() WHERE running")" ]' 30 \
  || fail "the jobbuf drain worker did not start"
WORKER_PID=$(jb_sql "SELECT pid FROM jobbuf_worker_status()")
echo "jobbuf drain worker: pid $WORKER_PID ($(cat /proc/$WORKER_PID/comm 2>/dev/null || echo '?'))"

RESULTS=$JB_RUN/results
: >"$RESULTS"
result() { echo "$1=$2" >>"$RESULTS"; }
result server_versions "PostgreSQL $(jb_sql 'SHOW server_version'), $(redis-server --version | sed -E 's/^([A-Za-z]+) server v=([^ ]+).*/\1 \2/')"
# The run itself, for the summary and docs/performance.md (bench/performance_page.rb).
result run_started "$RUN_STARTED"
result run_cpus "$(nproc)"
result run_cpu_model "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
result run_ram "$(awk '/^MemTotal:/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)"
result run_kernel "$(uname -sr)"
result run_os "$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")"
result run_load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
result run_phases "$BENCH_PHASES"
result run_settings "$(settings_used)"
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print 0; else printf "%.1f", a / b }'; }

cpu_ticks() {  # utime + stime of a process, in clock ticks
  awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

worker_enabled() {
  jb_sql "ALTER SYSTEM SET jobbuf.enabled = $1" >/dev/null
  jb_sql "SELECT pg_reload_conf()" >/dev/null
  sleep 0.3
}

settle() {  # a clean starting point: statistics, hint bits and visibility map set, WAL flushed
  jb_sql "VACUUM (ANALYZE) $1" >/dev/null
  jb_sql "CHECKPOINT" >/dev/null
}

# prestage TABLE QUEUE COUNT: COUNT jobs of the benchmark payload in one transaction.
# PRESTAGE_PARTITION, when set, is the SQL for each job's partition_key (of g, 1..COUNT).
prestage() {
  if [ -n "${PRESTAGE_PARTITION:-}" ]; then
    jb_sql "INSERT INTO $1 (queue, payload, partition_key)
            SELECT '$2', bench.payload(g), $PRESTAGE_PARTITION FROM generate_series(1, $3) g" >/dev/null
  else
    jb_sql "INSERT INTO $1 (queue, payload) SELECT '$2', bench.payload(g) FROM generate_series(1, $3) g" >/dev/null
  fi
  settle "$1"
}

wait_queue_empty() {  # wait_queue_empty QUEUE TIMEOUT
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE queue = '$1'\")\" = 0 ]" "$2"
}

# --- 1. drain throughput ---------------------------------------------------------------------
# Redis's own ingest of list jobs on the same server, what the list drain is held against:
# redis-benchmark, 50 connections (its default), LPUSH of 100 values of 105 bytes per command (the benchmark
# payload's size as a list entry), 20,000 commands; jobs/s = commands/s x 100.
redis_ingest() {
  local values out rps
  values=$(for i in $(seq 1 100); do printf '%0105d ' "$i"; done)
  say "drain list, round $1: Redis's own ingest (redis-benchmark, LPUSH of 100 values of 105 bytes)"
  # shellcheck disable=SC2086 # the 100 values are 100 arguments
  out=$(redis-benchmark -p "$JB_REDIS_PORT" -c 50 -n 20000 -q LPUSH bench:ingest $values | tr '\r' '\n' | grep 'requests per second' | tail -n 1)
  rps=$(sed -E 's/.*: ([0-9.]+) requests per second.*/\1/' <<<"$out")
  [ -n "$rps" ] || fail "redis-benchmark printed no rate: $out"
  echo "$rps commands/s: $(div "$(awk -v r="$rps" 'BEGIN { printf "%.0f", r * 100 }')" 1) jobs/s"
  result drain_list_redis_ingest "$(awk -v r="$rps" 'BEGIN { printf "%.0f", r * 100 }')"
  jb_redis unlink bench:ingest >/dev/null
}

# jobbuf_drain QUEUE KEY: BENCH_JOBS jobs staged into QUEUE while the worker is disabled, then
# timed from enabling it until KEY holds them all (drain_timer.rb); prints the rate and the CPU
# the worker and redis-server spent, sets DRAIN_RATE (jobs/s) and DRAIN_CPU_PCT (the worker's
# CPU, % of the wall time). The drain phase's jobbuf rows and the baseline phase's drains.
jobbuf_drain() {
  local queue=$1 key=$2 out n s w0 r0 w1 r1
  worker_enabled off
  prestage jobbuf.jobs "$queue" "$BENCH_JOBS"
  jb_redis del "$key" >/dev/null
  w0=$(cpu_ticks "$WORKER_PID"); r0=$(cpu_ticks "$JB_REDIS_PID")
  out=$(ruby bench/drain_timer.rb jobbuf "$key" "$BENCH_JOBS" 900) || fail "jobbuf drain ($queue)"
  w1=$(cpu_ticks "$WORKER_PID"); r1=$(cpu_ticks "$JB_REDIS_PID")
  read -r n s <<<"$out"
  wait_queue_empty "$queue" 30 || fail "jobbuf.jobs still holds jobs of $queue after the drain"
  echo "$n jobs in ${s}s: $(div "$n" "$s") jobs/s"
  awk -v w=$((w1 - w0)) -v r=$((r1 - r0)) -v hz="$(getconf CLK_TCK)" -v s="$s" -v n="$n" 'BEGIN {
    printf "  CPU during the drain: worker %.2f s (%.0f%% of wall, %.1f us/job), redis-server %.2f s (%.1f us/job)\n",
           w / hz, 100 * w / hz / s, 1e6 * w / hz / n, r / hz, 1e6 * r / hz / n }'
  DRAIN_CPU_PCT=$(awk -v w=$((w1 - w0)) -v hz="$(getconf CLK_TCK)" -v s="$s" 'BEGIN { printf "%.0f", 100 * w / hz / s }')
  DRAIN_RATE=$(div "$n" "$s")
  jb_redis unlink "$key" >/dev/null
}

phase_drain() {
  local target queue key ext_key n s n_redis out round
  for round in $(seq 1 "$BENCH_DRAIN_ROUNDS"); do
  for target in list sidekiq; do
    if [ $target = list ]; then queue=bench_list; key=jobbuf:bench_list; ext_key=ext:bench_list
    else queue=bench_sq; key=queue:bench_sq; ext_key=queue:bench_sq; fi

    say "drain $target, round $round: SQL-only ceiling ($BENCH_JOBS jobs, batches of $BENCH_BATCH)"
    worker_enabled off
    prestage jobbuf.jobs $queue "$BENCH_JOBS"
    out=$(ruby bench/drain_timer.rb ceiling $queue $target "$BENCH_BATCH") || fail "SQL ceiling ($target)"
    read -r n s <<<"$out"
    [ "$n" = "$BENCH_JOBS" ] || fail "SQL ceiling drained $n of $BENCH_JOBS jobs"
    echo "$n jobs in ${s}s: $(div "$n" "$s") jobs/s"
    result drain_${target}_ceiling "$(div "$n" "$s")"

    say "drain $target, round $round: jobbuf worker ($BENCH_JOBS jobs)"
    jobbuf_drain $queue "$key"
    result drain_${target}_worker_cpu_pct "$DRAIN_CPU_PCT"
    result drain_${target}_jobbuf "$DRAIN_RATE"
    [ $target = list ] && redis_ingest "$round"

    say "drain $target, round $round: external Ruby enqueuer ($BENCH_JOBS jobs)"
    prestage bench.staged_jobs $queue "$BENCH_JOBS"
    jb_redis del "$ext_key" >/dev/null
    out=$(ruby bench/external_enqueuer.rb $target $queue "$BENCH_BATCH") || fail "external enqueuer ($target)"
    read -r n s <<<"$out"
    n_redis=$(jb_redis llen "$ext_key")
    [ "$n" = "$BENCH_JOBS" ] && [ "$n_redis" = "$BENCH_JOBS" ] || fail "external enqueuer moved $n jobs, Redis has $n_redis"
    echo "$n jobs in ${s}s: $(div "$n" "$s") jobs/s"
    result drain_${target}_external "$(div "$n" "$s")"
    jb_redis unlink "$ext_key" >/dev/null

    [ $target = list ] || continue
    # The worker's SQL path: what it runs when the table's owner has added a DELETE trigger, a
    # rule, a cascading foreign key or row security (src/delivery/job_taker.h). Row security forces it here
    # without adding any work of its own (the worker is a superuser, whom row security lets by).
    jb_sql "ALTER TABLE jobbuf.jobs ENABLE ROW LEVEL SECURITY" >/dev/null
    say "drain list, round $round: jobbuf worker, SQL path ($BENCH_JOBS jobs)"
    worker_enabled off
    prestage jobbuf.jobs $queue "$BENCH_JOBS"
    jb_redis del "$key" >/dev/null
    out=$(ruby bench/drain_timer.rb jobbuf "$key" "$BENCH_JOBS" 900) || fail "jobbuf drain (SQL path)"
    read -r n s <<<"$out"
    wait_queue_empty $queue 30 || fail "jobbuf.jobs still holds jobs of $queue after the drain"
    echo "$n jobs in ${s}s: $(div "$n" "$s") jobs/s"
    result drain_list_sql "$(div "$n" "$s")"
    jb_redis unlink "$key" >/dev/null

    # The same when the SQL path's cached plan was made while jobbuf.jobs was nearly empty (the
    # usual state of a job table) and no ANALYZE ran since the burst arrived. Capped at 100000
    # jobs: the cost per batch grows with the backlog.
    local n_stale=$(( BENCH_JOBS < 100000 ? BENCH_JOBS : 100000 ))
    say "drain list, round $round: jobbuf worker, SQL path, plan made while the table was empty ($n_stale jobs, no ANALYZE after staging)"
    worker_enabled on
    settle jobbuf.jobs
    jb_sql "SELECT jobbuf_stage('$queue', bench.payload(0))" >/dev/null
    wait_queue_empty $queue 30 || fail "the worker did not deliver one job"
    sleep 3  # a few idle rounds (poll_interval 1s), each running the batch statement per queue
    worker_enabled off
    jb_redis del "$key" >/dev/null
    jb_sql "INSERT INTO jobbuf.jobs (queue, payload) SELECT '$queue', bench.payload(g) FROM generate_series(1, $n_stale) g" >/dev/null
    jb_sql "CHECKPOINT" >/dev/null
    out=$(ruby bench/drain_timer.rb jobbuf "$key" "$n_stale" 900) || fail "jobbuf drain (stale plan)"
    read -r n s <<<"$out"
    wait_queue_empty $queue 30 || fail "jobbuf.jobs still holds jobs of $queue after the drain"
    echo "$n jobs in ${s}s: $(div "$n" "$s") jobs/s"
    result drain_list_stale "$(div "$n" "$s")"
    result drain_list_stale_n "$n_stale"
    jb_redis unlink "$key" >/dev/null
    jb_sql "ALTER TABLE jobbuf.jobs DISABLE ROW LEVEL SECURITY" >/dev/null
  done
  done
  worker_enabled on
}

# --- 2. staging cost -------------------------------------------------------------------------
pgbench_tps() {  # pgbench_tps SCRIPT [pgbench options]: prints tps (excluding connection time)
  local script=$1 out; shift
  out=$(pgbench -n -M prepared -c 8 -j 2 -T "$BENCH_STAGE_SECONDS" "$@" -f "$script" 2>&1) \
    || { echo "$out" >&2; fail "pgbench $script"; }
  echo "$out" | awk '/^tps = / { printf "%.1f\n", $3; exit }'
}

# worker_during_staging "W B D" "W B D" TICKS: what the worker did while pgbench ran (wake-ups,
# batches, jobs) and its CPU per job: the part of the staging cost that is the drain's.
worker_during_staging() {
  local w0 b0 d0 w1 b1 d1
  read -r w0 b0 d0 <<<"${1//|/ }"; read -r w1 b1 d1 <<<"${2//|/ }"
  local hz; hz=$(getconf CLK_TCK)
  awk -v w=$((w1 - w0)) -v b=$((b1 - b0)) -v d=$((d1 - d0)) -v t="$3" -v hz="$hz" 'BEGIN {
    printf "  worker while staging: %d wake-ups, %d batches, %.1f jobs/batch, CPU %.1f us/job\n",
      w, b, (b ? d / b : 0), (d ? t / hz * 1e6 / d : 0) }'
}

staging_reset() {
  jb_sql "TRUNCATE bench.plain_jobs, bench.pk_jobs" >/dev/null
  wait_queue_empty bench_stage 60 || fail "the worker did not drain bench_stage"
  jb_redis unlink jobbuf:bench_stage >/dev/null
  settle jobbuf.jobs
  settle bench.plain_jobs
  settle bench.pk_jobs
}

phase_staging() {
  worker_enabled on
  local form plain_script jobbuf_script r order side tps
  for form in one batch; do
    plain_script=bench/pgbench/insert_$form.sql
    jobbuf_script=bench/pgbench/stage_$form.sql
    for r in $(seq 1 "$BENCH_STAGE_ROUNDS"); do
      local sides="plain jobbuf paused paused jobbuf plain"
      [ $form = one ] && sides="plain pk jobbuf orm paused paused orm jobbuf pk plain"
      for side in $sides; do
        staging_reset
        local before ticks0 after
        before=$(jb_sql "SELECT wakeups, batches, delivered FROM jobbuf_worker_status()")
        ticks0=$(cpu_ticks "$WORKER_PID")
        case $side in
          plain) tps=$(pgbench_tps $plain_script) ;;
          pk) tps=$(pgbench_tps bench/pgbench/insert_one_pk.sql) ;;
          jobbuf) tps=$(pgbench_tps $jobbuf_script) ;;
          orm) tps=$(pgbench_tps bench/pgbench/orm_insert_one.sql) ;;
          paused) worker_enabled off; tps=$(pgbench_tps $jobbuf_script); worker_enabled on ;;
        esac
        echo "staging $form, round $r, $side: $tps tps"
        if [ "$side" = jobbuf ] || [ "$side" = orm ]; then
          after=$(jb_sql "SELECT wakeups, batches, delivered FROM jobbuf_worker_status()")
          worker_during_staging "$before" "$after" $(( $(cpu_ticks "$WORKER_PID") - ticks0 ))
        fi
        result stage_${form}_$side "$tps"
      done
    done
  done
  staging_reset
}

# --- 3. commit-to-Redis latency --------------------------------------------------------------
# latency_run idle|RATE: the latency probe (one single-job transaction every 2 ms for
# BENCH_LAT_SECONDS, commit -> BLPOP) on an otherwise idle server, or under RATE commits/s of
# background single-job staging into another queue (pgbench --rate, 4 clients); prints the
# figures, sets LAT_N LAT_P50 LAT_P99 LAT_MAX (ms) and LAT_TPS (the background's achieved rate).
# The latency phase and the baseline phase's probes.
latency_run() {
  local rate=$1 out pgb_out pgb_pid
  LAT_TPS=
  if [ "$rate" = idle ]; then
    out=$("$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_LAT_SECONDS" --interval-ms 2) || fail "latency probe (idle)"
    read -r LAT_N LAT_P50 LAT_P99 LAT_MAX <<<"$out"
    echo "$LAT_N samples: p50 ${LAT_P50} ms, p99 ${LAT_P99} ms, max ${LAT_MAX} ms"
    return 0
  fi
  pgb_out=$JB_RUN/pgbench_bg_$rate.out
  pgbench -n -M prepared -c 4 -j 2 -R "$rate" -T $((BENCH_LAT_SECONDS + 4)) -f bench/pgbench/bg_stage.sql >"$pgb_out" 2>&1 &
  pgb_pid=$!; BG_PIDS+=("$pgb_pid")
  sleep 2
  out=$("$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_LAT_SECONDS" --interval-ms 2) || fail "latency probe ($rate/s)"
  read -r LAT_N LAT_P50 LAT_P99 LAT_MAX <<<"$out"
  wait "$pgb_pid" || { cat "$pgb_out" >&2; fail "background pgbench at $rate/s"; }
  LAT_TPS=$(awk '/^tps = / { printf "%.0f\n", $3; exit }' "$pgb_out")
  echo "$LAT_N samples: p50 ${LAT_P50} ms, p99 ${LAT_P99} ms, max ${LAT_MAX} ms (background achieved $LAT_TPS commits/s)"
  wait_queue_empty bench_bg 60 || true
  jb_redis unlink jobbuf:bench_bg >/dev/null
}

phase_latency() {
  worker_enabled on
  local rate
  say "latency: idle server (${BENCH_LAT_SECONDS}s, one single-job transaction every 2 ms)"
  latency_run idle
  result lat_idle_p50 "$LAT_P50"; result lat_idle_p99 "$LAT_P99"; result lat_idle_max "$LAT_MAX"; result lat_idle_n "$LAT_N"
  for rate in 2000 5000; do
    say "latency: under $rate commits/s of background staging (pgbench --rate, 4 clients)"
    latency_run "$rate"
    result lat_${rate}_p50 "$LAT_P50"; result lat_${rate}_p99 "$LAT_P99"; result lat_${rate}_max "$LAT_MAX"; result lat_${rate}_tps "$LAT_TPS"
  done
}

# --- baseline: this build against release 1.2, in one run, interleaved -----------------------
# SPEC 1.3, "Flow control at the drain" (Cost): the list drain and the commit -> Redis latency no
# worse than 1.2's, built and run in the same make bench, interleaved. Each round installs both
# builds in turn (current, 1.2; the next round 1.2, current; ...): 1.2 as
# test/upgrade/tools/releases.sh builds it (once per machine, major and compat patch), the current
# one with make install. For each: restart Postgres so that library is loaded, DROP EXTENSION
# jobbuf CASCADE / CREATE EXTENSION jobbuf (VERSION '1.2' for 1.2), the fixtures of
# bench/sql/setup.sql again, then the drain phase's jobbuf list drain (BENCH_JOBS jobs) and the
# latency phase's idle and 5000/s probes. Redis runs with maxmemory BENCH_REDIS_MAXMEMORY
# meanwhile. At the end (bench_cleanup too, on any failure) the current build is installed again.
# shellcheck disable=SC2034 # read by releases.sh
E2E_ROOT=$ROOT
# shellcheck source=../test/upgrade/tools/releases.sh
source "$ROOT/test/upgrade/tools/releases.sh"

# baseline_redis [redis-server options...]: the benchmark's redis-server restarted on its port with them.
baseline_redis() {
  kill "$JB_REDIS_PID" 2>/dev/null || true
  wait "$JB_REDIS_PID" 2>/dev/null || true
  JB_REDIS_ARGS=("$@")
  jb_restart_redis >/dev/null || fail "redis-server did not start again on port $JB_REDIS_PORT with: $*"
}

# baseline_use cur|12: that build installed and loaded, the extension and the benchmark fixtures
# (bench/sql/setup.sql: the bench schema and the queues) created afresh; WORKER_PID is its drain worker.
baseline_use() {
  local build=$1 version="" want
  # Dropped while the library that created them is still loaded. The bench schema goes first: its
  # tables copy jobbuf.jobs's column defaults (LIKE ... INCLUDING DEFAULTS), which the CASCADE would
  # take from them; bench/sql/setup.sql makes it again below, as at the start of the run.
  jb_psql -q -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS bench CASCADE" \
    -c "DROP EXTENSION IF EXISTS jobbuf CASCADE" >/dev/null
  if [ "$build" = 12 ]; then
    BASELINE_SWAPPED=1
    install_release 1.2 || fail "building or installing jobbuf 1.2 (commit $(release_commit 1.2))"
    version="VERSION '1.2'" want=1.2
  else
    install_current || fail "installing the current build (make install)"
    BASELINE_SWAPPED=0
    want=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/jobbuf.control")
  fi
  jb_pg_ctl restart || fail "restarting Postgres to load the $want library"
  jb_sql "CREATE EXTENSION jobbuf $version" >/dev/null
  jb_psql -q -f bench/sql/setup.sql >/dev/null || fail "loading bench/sql/setup.sql (jobbuf $want)"
  [ "$(jb_sql "SELECT jobbuf.library_version()")" = "$want" ] \
    || fail "the loaded library is $(jb_sql "SELECT jobbuf.library_version()"), not $want"
  worker_enabled on
  jb_wait_until '[ -n "$(jb_sql "SELECT pid FROM jobbuf_worker_status() WHERE running AND database = current_database()")" ]' 30 \
    || fail "the jobbuf $want drain worker did not start"
  WORKER_PID=$(jb_sql "SELECT pid FROM jobbuf_worker_status() WHERE running AND database = current_database()")
  echo "jobbuf $(jb_sql "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'") (library $want) loaded; drain worker pid $WORKER_PID"
}

# baseline_available WHAT: true when release 1.2 can be built here; otherwise says WHAT is NOT
# MEASURED (building 1.2 needs the git history) and is false.
baseline_available() {
  git -C "$ROOT" cat-file -e "$(release_commit 1.2)^{commit}" 2>/dev/null && return 0
  say "$1: NOT MEASURED: building 1.2 needs the git history with commit $(release_commit 1.2) (a shallow clone or an archive?)"
  return 1
}

# baseline_rounds ROUNDS WHAT MEASURE: ROUNDS rounds, each installing both builds in turn with
# baseline_use (current then 1.2 in odd rounds, 1.2 then current in even ones) and running
# MEASURE ROUND BUILD NAME (BUILD cur|12, NAME current|1.2) on each; the caller installs the
# current build again (baseline_use cur) after them. The baseline phase and the snapshot phase's
# BENCH_SNAPSHOT_BASELINE rounds.
baseline_rounds() {
  local rounds=$1 what=$2 measure=$3 round order build name
  for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then order="cur 12"; else order="12 cur"; fi
    for build in $order; do
      if [ "$build" = 12 ]; then name="1.2"; else name="current"; fi
      say "$what, round $round: $name build"
      baseline_use "$build"
      "$measure" "$round" "$build" "$name"
    done
  done
}

# baseline_measure ROUND BUILD NAME: the baseline phase's figures of one build in one round.
baseline_measure() {
  local round=$1 build=$2 name=$3
  say "baseline, round $round, $name: list drain ($BENCH_JOBS jobs)"
  jobbuf_drain bench_list jobbuf:bench_list
  result "base_drain_list_$build" "$DRAIN_RATE"
  worker_enabled on
  say "baseline, round $round, $name: latency, idle server (${BENCH_LAT_SECONDS}s, one single-job transaction every 2 ms)"
  latency_run idle
  result "base_lat_idle_p50_$build" "$LAT_P50"; result "base_lat_idle_p99_$build" "$LAT_P99"; result "base_lat_idle_max_$build" "$LAT_MAX"
  say "baseline, round $round, $name: latency under 5000 commits/s of background staging"
  latency_run 5000
  result "base_lat_5000_p50_$build" "$LAT_P50"; result "base_lat_5000_p99_$build" "$LAT_P99"
  result "base_lat_5000_max_$build" "$LAT_MAX"; result "base_lat_5000_tps_$build" "$LAT_TPS"
}

phase_baseline() {
  local t0=$SECONDS
  baseline_available baseline || return 0
  say "baseline: redis-server restarted with maxmemory $BENCH_REDIS_MAXMEMORY"
  baseline_redis --maxmemory "$BENCH_REDIS_MAXMEMORY"
  local maxmemory policy
  maxmemory=$(jb_redis config get maxmemory | sed -n 2p)
  policy=$(jb_redis config get maxmemory-policy | sed -n 2p)
  echo "redis-server maxmemory $maxmemory bytes ($BENCH_REDIS_MAXMEMORY), maxmemory-policy $policy"
  result base_redis_maxmemory "$maxmemory"; result base_redis_policy "$policy"
  result base_release "1.2 (commit $(release_commit 1.2))"
  baseline_rounds "$BENCH_BASELINE_ROUNDS" baseline baseline_measure
  say "baseline: redis-server without maxmemory again, the current build back for the other phases"
  baseline_redis
  baseline_use cur
  result base_rounds "$BENCH_BASELINE_ROUNDS"
  echo "baseline phase: $((SECONDS - t0)) s"
  result base_seconds "$((SECONDS - t0))"
  awk -F= '$1 ~ /^base_(drain|lat_idle_p50|lat_idle_p99|lat_5000_p99)_/ { v[$1] = v[$1] (v[$1] == "" ? "" : ", ") $2 }
    END { n = split("drain_list lat_idle_p50 lat_idle_p99 lat_5000_p99", f, " ")
          for (i = 1; i <= n; i++) printf "  %-14s current: %-26s 1.2: %s\n", f[i], v["base_" f[i] "_cur"], v["base_" f[i] "_12"] }' "$RESULTS"
}

# --- 4. sustained load -----------------------------------------------------------------------
sustain_run() {  # sustain_run LABEL RATE
  local label=$1 rate=$2 latfile=$JB_RUN/latency_$1.txt pgb_out=$JB_RUN/pgbench_$1.out
  local tx_rate lat_pid pgb_pid line tps
  tx_rate=$(awk -v r="$rate" 'BEGIN { printf "%.0f", r / 100 }')
  : >"$latfile"
  "$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_SUSTAIN_SECONDS" --interval-ms 20 --out "$latfile" >/dev/null &
  lat_pid=$!; BG_PIDS+=("$lat_pid")
  # The batch staging script (100 jobs per call), aimed at the sustained-load queue.
  sed "s/'bench_stage'/'bench_bg'/" bench/pgbench/stage_batch.sql >"$JB_RUN/sustain_batch.sql"
  pgbench -n -M prepared -c 2 -j 2 -R "$tx_rate" -T "$BENCH_SUSTAIN_SECONDS" -f "$JB_RUN/sustain_batch.sql" >"$pgb_out" 2>&1 &
  pgb_pid=$!; BG_PIDS+=("$pgb_pid")
  ruby bench/sustain_sampler.rb "$label" "$BENCH_SUSTAIN_SECONDS" 5 "$WORKER_PID" "$latfile" jobbuf:bench_bg | tee "$JB_RUN/sustain_$label.out"
  wait "$pgb_pid" || { cat "$pgb_out" >&2; fail "sustained pgbench ($label)"; }
  wait "$lat_pid" || fail "latency probe ($label)"
  tps=$(awk '/^tps = / { printf "%.1f\n", $3; exit }' "$pgb_out")
  echo "$label: offered $rate jobs/s ($tx_rate transactions/s of 100 jobs); pgbench achieved $(div "$(awk -v t="$tps" 'BEGIN{print t*100}')" 1) jobs/s"
  result sustain_${label}_offered "$(awk -v t="$tps" 'BEGIN{printf "%.1f", t*100}')"
  line=$(grep '^RESULT ' "$JB_RUN/sustain_$label.out" | sed 's/^RESULT //')
  for kv in $line; do echo "sustain_$kv" >>"$RESULTS"; done
}

phase_sustain() {
  worker_enabled on
  local rate=$BENCH_SUSTAIN_RATE max
  if [ -z "$rate" ]; then
    # The producers and the worker share this machine's cores: the rate both sides can sustain
    # together is 1 / (1/drain + 1/staging), from the best drain and batch-staging figures.
    local stage
    max=$(awk -F= '$1 == "drain_list_jobbuf" && $2 > m { m = $2 } END { print m }' "$RESULTS")
    stage=$(awk -F= '$1 == "stage_batch_jobbuf" && $2 * 100 > m { m = $2 * 100 } END { print m }' "$RESULTS")
    [ -n "$max" ] && [ -n "$stage" ] || fail "BENCH_SUSTAIN_RATE is needed when the drain and staging phases do not run"
    rate=$(awk -v d="$max" -v s="$stage" 'BEGIN { printf "%.0f", 0.7 / (1 / d + 1 / s) }')
    echo "drain $max jobs/s and batch staging $stage jobs/s on the same cores: together $(awk -v d="$max" -v s="$stage" 'BEGIN { printf "%.0f", 1 / (1 / d + 1 / s) }') jobs/s; 70% of it: $rate"
  fi
  result sustain_rate "$rate"
  say "sustained load: $rate jobs/s (100 per transaction) for ${BENCH_SUSTAIN_SECONDS}s, samples every 5 s"
  settle jobbuf.jobs
  sustain_run normal "$rate"
  wait_queue_empty bench_bg 120 || echo "(backlog not drained after 120 s)"
  jb_redis unlink jobbuf:bench_bg >/dev/null
  settle jobbuf.jobs

  say "sustained load with a transaction held open (REPEATABLE READ, idle in transaction) for the whole run"
  local fifo=$JB_RUN/held.fifo held_pid
  mkfifo "$fifo"
  psql -X -q -v ON_ERROR_STOP=1 <"$fifo" >"$JB_RUN/held.out" 2>&1 &
  held_pid=$!; BG_PIDS+=("$held_pid")
  exec 9>"$fifo"; HELD_FD_OPEN=1
  echo "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;" >&9
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'\")\" -ge 1 ]" 10 \
    || fail "the held transaction did not start"
  sustain_run held "$rate"
  echo "COMMIT;" >&9
  exec 9>&-; HELD_FD_OPEN=0
  wait "$held_pid" || true
  local t0=$SECONDS
  if wait_queue_empty bench_bg 300; then echo "backlog drained $((SECONDS - t0)) s after the held transaction ended"
  else echo "backlog not drained 300 s after the held transaction ended"; fi
  result sustain_held_catchup_s "$((SECONDS - t0))"
  jb_redis unlink jobbuf:bench_bg >/dev/null
}

# --- 4b. held snapshot: the same load with and without a snapshot held, side by side ----------
# hold_snapshots HOLD SECONDS (run in the background): REPEATABLE READ snapshots held HOLD seconds
# at a time, back to back (all: the whole run; dump: the whole run, with pg_dump's ACCESS SHARE on
# jobbuf.jobs) until SECONDS have passed.
hold_snapshots() {
  local hold=$1 seconds=$2 lock="" end left
  [ "$hold" = dump ] && lock="LOCK TABLE jobbuf.jobs IN ACCESS SHARE MODE;"
  if [ "$hold" = all ] || [ "$hold" = dump ]; then hold=$seconds; fi
  end=$((SECONDS + seconds))
  while [ $SECONDS -lt "$end" ]; do
    left=$((end - SECONDS)); [ "$left" -lt "$hold" ] && hold=$left
    psql -X -q -o /dev/null -v ON_ERROR_STOP=1 -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
      -c "SELECT count(*) FROM bench.analytics; $lock" -c "SELECT pg_sleep($hold)" -c "COMMIT" || return 1
  done
}

snapshot_run() {  # snapshot_run LABEL RATE HOLD (HOLD none: no snapshot)
  local label=$1 rate=$2 hold=$3 latfile=$JB_RUN/latency_$1.txt pgb_out=$JB_RUN/pgbench_$1.out
  local lat_pid pgb_pid hold_pid="" line tps t0
  : >"$latfile"
  "$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_SNAPSHOT_SECONDS" --interval-ms 20 --out "$latfile" >/dev/null &
  lat_pid=$!; BG_PIDS+=("$lat_pid")
  if [ "$hold" != none ]; then
    hold_snapshots "$hold" "$BENCH_SNAPSHOT_SECONDS" >"$JB_RUN/hold_$label.out" 2>&1 &
    hold_pid=$!; BG_PIDS+=("$hold_pid")
  fi
  pgbench -n -M prepared -c 4 -j 2 -R "$rate" -T "$BENCH_SNAPSHOT_SECONDS" -f bench/pgbench/bg_stage.sql >"$pgb_out" 2>&1 &
  pgb_pid=$!; BG_PIDS+=("$pgb_pid")
  ruby bench/sustain_sampler.rb "$label" "$BENCH_SNAPSHOT_SECONDS" 5 "$WORKER_PID" "$latfile" jobbuf:bench_bg | tee "$JB_RUN/snapshot_$label.out"
  wait "$pgb_pid" || { cat "$pgb_out" >&2; fail "snapshot pgbench ($label)"; }
  wait "$lat_pid" || fail "latency probe ($label)"
  [ -z "$hold_pid" ] || wait "$hold_pid" || { cat "$JB_RUN/hold_$label.out" >&2; fail "the held snapshot's session failed ($label)"; }
  t0=$(date +%s%N)
  wait_queue_empty bench_bg 300 || echo "(backlog not drained 300 s after the run)"
  tps=$(awk '/^tps = / { printf "%.0f\n", $3; exit }' "$pgb_out")
  echo "$label: offered $rate jobs/s, pgbench achieved $tps; caught up $(( ($(date +%s%N) - t0) / 1000000 )) ms after the run (and its snapshot) ended"
  result "snap_${label}_offered" "$tps"
  result "snap_${label}_catchup_ms" "$(( ($(date +%s%N) - t0) / 1000000 ))"
  line=$(grep '^RESULT ' "$JB_RUN/snapshot_$label.out" | sed 's/^RESULT //')
  for kv in $line; do echo "snap_$kv" >>"$RESULTS"; done
  jb_redis unlink jobbuf:bench_bg >/dev/null
}

compact_jobs() {  # every run starts from the same small table (the drain phase leaves it large)
  jb_sql "VACUUM (FULL, ANALYZE) jobbuf.jobs" >/dev/null
  jb_sql "CHECKPOINT" >/dev/null
}

# snapshot_rate RATE: jobs/s of a RATE:HOLD pair (70%: of the staging phase's single-job rate;
# empty when that phase did not run).
snapshot_rate() {
  if [ "$1" = "70%" ]; then
    awk -F= '$1 == "stage_one_jobbuf" && $2 > m { m = $2 } END { if (m != "") printf "%.0f", 0.7 * m }' "$RESULTS"
  else
    echo "$1"
  fi
}

# snapshot_loads PREFIX RUNS WHAT CHECK: each RATE:HOLD load of RUNS, without then with its snapshot
# (results snap_<PREFIX><k>none, snap_<PREFIX><k>held, snap_<PREFIX><k>_rate and _hold); CHECK (a
# command, or true) must hold after each run.
snapshot_loads() {
  local prefix=$1 runs=$2 what=$3 check=$4 run rate hold k=0 mode
  for run in $runs; do
    hold=${run#*:} k=$((k + 1))
    rate=$(snapshot_rate "${run%%:*}")
    [ -n "$rate" ] || { echo "$what run $run skipped: 70% needs the staging phase's single-job rate"; continue; }
    say "$what $k: $rate single-job transactions/s for ${BENCH_SNAPSHOT_SECONDS}s, without and with a snapshot held ($hold)"
    for mode in none held; do
      compact_jobs
      snapshot_run "${prefix}${k}${mode}" "$rate" "$([ $mode = none ] && echo none || echo "$hold")"
      $check || fail "$what: the precondition changed during run ${prefix}${k}${mode}"
    done
    result "snap_${prefix}${k}_rate" "$rate"
    result "snap_${prefix}${k}_hold" "$hold"
  done
}

snapshot_setup() {  # the worker on, and the table the held snapshots read
  worker_enabled on
  jb_sql "CREATE TABLE IF NOT EXISTS bench.analytics AS SELECT 1 AS n" >/dev/null
}

# snapshot_measure ROUND BUILD NAME: the snapshot phase's loads on one build in one round of
# BENCH_SNAPSHOT_BASELINE (results snap_b<ROUND>cur_<k>... for the current build,
# snap_b<ROUND>r12_<k>... for 1.2).
snapshot_measure() {
  local round=$1 build=$2 name=$3
  snapshot_setup
  snapshot_loads "b${round}$([ "$build" = 12 ] && echo r12 || echo cur)_" "$BENCH_SNAPSHOT_RUNS" "held snapshot (round $round, $name)" true
}

# With BENCH_SNAPSHOT_BASELINE rounds, the loads run on this build and on release 1.2 in turn
# (baseline_rounds), and not again on their own.
phase_snapshot() {
  if [ "$BENCH_SNAPSHOT_BASELINE" -gt 0 ] && baseline_available "held snapshot against 1.2"; then
    local t0=$SECONDS
    result snap_b_release "1.2 (commit $(release_commit 1.2))"
    baseline_rounds "$BENCH_SNAPSHOT_BASELINE" "held snapshot against 1.2" snapshot_measure
    say "held snapshot against 1.2: the current build back for the other phases"
    baseline_use cur
    result snap_b_rounds "$BENCH_SNAPSHOT_BASELINE"
    result snap_b_seconds "$((SECONDS - t0))"
    return 0
  fi
  snapshot_setup
  snapshot_loads s "$BENCH_SNAPSHOT_RUNS" "held snapshot" true
}

# --- 4c. held snapshot with a capped backlog: the snapshot phase's loads beside 100,000 jobs ------
# held back by a depth cap (SPEC 1.3, "Storage rotation keeps PostgreSQL's promises"): a list
# queue with max_in_redis BENCH_CAPPED_MAX and no consumer gets BENCH_CAPPED_BACKLOG + the cap's
# worth of jobs; the cap's worth is pushed, the rest stays staged (live rows of jobbuf.jobs, more
# than rotation's 10,000-row limit) through every run. Each load of BENCH_CAPPED_RUNS then runs
# as in the snapshot phase, without and with its snapshot; the table puts the figures beside the
# snapshot phase's for the same load.
phase_snapshot_capped() {
  worker_enabled on
  jb_sql "CREATE TABLE IF NOT EXISTS bench.analytics AS SELECT 1 AS n" >/dev/null
  jb_sql "SELECT jobbuf_create_queue('bench_capped', 'list', '{\"max_in_redis\": $BENCH_CAPPED_MAX}', if_not_exists => true)" >/dev/null
  jb_redis unlink jobbuf:bench_capped >/dev/null
  say "capped backlog: $((BENCH_CAPPED_BACKLOG + BENCH_CAPPED_MAX)) jobs staged in a list queue with max_in_redis $BENCH_CAPPED_MAX, no consumer"
  prestage jobbuf.jobs bench_capped $((BENCH_CAPPED_BACKLOG + BENCH_CAPPED_MAX))
  capped_held() {
    [ "$(jb_redis LLEN jobbuf:bench_capped)" = "$BENCH_CAPPED_MAX" ] &&
      [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bench_capped'")" = "$BENCH_CAPPED_BACKLOG" ]
  }
  jb_wait_until capped_held 120 ||
    fail "the capped backlog: $(jb_redis LLEN jobbuf:bench_capped) in Redis (want $BENCH_CAPPED_MAX), $(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bench_capped'") staged (want $BENCH_CAPPED_BACKLOG)"
  echo "$BENCH_CAPPED_MAX in Redis, $BENCH_CAPPED_BACKLOG staged; jobbuf_flow_status(): $(jb_sql "SELECT state || ' (' || coalesce(reason, '') || ')' FROM jobbuf_flow_status() WHERE queue = 'bench_capped'")"
  result snap_c_backlog "$BENCH_CAPPED_BACKLOG"
  result snap_c_max_in_redis "$BENCH_CAPPED_MAX"
  snapshot_loads c "$BENCH_CAPPED_RUNS" "held snapshot beside $BENCH_CAPPED_BACKLOG capped jobs" capped_held
  # The phases after this one start without the backlog.
  jb_sql "SELECT jobbuf_drop_queue('bench_capped', force => true)" >/dev/null
  jb_redis unlink jobbuf:bench_capped >/dev/null
  compact_jobs
}

# --- optional: perf profile of the worker during a drain --------------------------------------
phase_profile() {
  command -v perf >/dev/null && perf stat -e instructions true >/dev/null 2>&1 \
    || { echo "perf is not usable here (apt-get install linux-perf; kernel.perf_event_paranoid)"; return 0; }
  local target queue key perf_pid
  for target in list sidekiq; do
    if [ $target = list ]; then queue=bench_list; key=jobbuf:bench_list; else queue=bench_sq; key=queue:bench_sq; fi
    say "profile: perf record -g -p $WORKER_PID while the worker drains $BENCH_JOBS $target jobs"
    worker_enabled off
    prestage jobbuf.jobs $queue "$BENCH_JOBS"
    jb_redis del "$key" >/dev/null
    perf record -F 999 -g -p "$WORKER_PID" -o "$JB_RUN/perf_$target.data" >/dev/null 2>&1 &
    perf_pid=$!; BG_PIDS+=("$perf_pid")
    sleep 0.5
    ruby bench/drain_timer.rb jobbuf "$key" "$BENCH_JOBS" 900
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    local rep=$JB_RUN/perf_$target
    perf report -i "$rep.data" --stdio --no-children --sort dso -g none >"$rep.dso" 2>/dev/null || true
    perf report -i "$rep.data" --stdio --children --sort sym -g none --percent-limit 2 >"$rep.incl" 2>/dev/null || true
    perf report -i "$rep.data" --stdio --no-children --sort dso,sym -g none --percent-limit 0.8 >"$rep.self" 2>/dev/null || true
    echo "-- samples by binary (self time):"
    grep -v '^#' "$rep.dso" | grep -v '^$' | sed -n 1,8p
    echo "-- inclusive time (children) by function, >= 2%:"
    grep -v '^#' "$rep.incl" | grep -v '^$' | sed -n 1,60p
    echo "-- self time by function, >= 0.8%:"
    grep -v '^#' "$rep.self" | grep -v '^$' | sed -n 1,40p
    [ -n "${BENCH_PERF_KEEP:-}" ] && cp "$JB_RUN/perf_$target.data" "$BENCH_PERF_KEEP.$target" || true
    jb_redis unlink "$key" >/dev/null
  done
  worker_enabled on
}

# --- activejob: perform_later in a transaction, the jobbuf gem vs ActiveJob's Sidekiq adapter ---
phase_activejob() {
  worker_enabled on
  say "activejob: perform_later inside a transaction, one Ruby process (${BENCH_AJ_SECONDS}s per run)"
  BENCH_RESULTS=$RESULTS ruby bench/activejob.rb || fail "bench/activejob.rb"
}

# --- production Redis: TLS vs plain TCP, and WAIT for a replica ----------------------------
# The same redis-server takes a TLS port too (CONFIG SET, certificates from
# test/harness/tls_certs.sh): each pair of drains differs only in what it measures.
redisprod_drain() {  # redisprod_drain LABEL: one list drain of BENCH_REDISPROD_JOBS jobs, the figure in results
  local key=jobbuf:bench_list n s out
  worker_enabled off
  prestage jobbuf.jobs bench_list "$BENCH_REDISPROD_JOBS"
  jb_redis del "$key" >/dev/null
  out=$(ruby bench/drain_timer.rb jobbuf "$key" "$BENCH_REDISPROD_JOBS" 900) || fail "drain ($1)"
  read -r n s <<<"$out"
  wait_queue_empty bench_list 60 || fail "jobbuf.jobs still holds jobs after the drain ($1)"
  echo "$1: $n jobs in ${s}s: $(div "$n" "$s") jobs/s"
  result "drain_$1" "$(div "$n" "$s")"
  jb_redis unlink "$key" >/dev/null
}
redisprod_url() {
  jb_sql "ALTER SYSTEM SET jobbuf.redis_url = '$1'" >/dev/null
}
phase_redisprod() {
  local certs=$JB_RUN/tls tls_port replica_port round
  source "$ROOT/test/harness/tls_certs.sh"
  jb_make_tls_certs "$certs" || fail "making TLS certificates"
  tls_port=$(jb_free_port)
  jb_redis CONFIG SET tls-cert-file "$certs/server.crt" tls-key-file "$certs/server.key" \
    tls-ca-cert-file "$certs/ca.crt" tls-auth-clients no >/dev/null || fail "redis TLS settings"
  jb_redis CONFIG SET tls-port "$tls_port" >/dev/null || fail "redis TLS port"
  jb_sql "ALTER SYSTEM SET jobbuf.redis_tls_ca_file = '$certs/ca.crt'" >/dev/null
  for round in $(seq 1 "$BENCH_DRAIN_ROUNDS"); do
    say "redisprod, round $round: list drain over plain TCP, then over TLS ($BENCH_REDISPROD_JOBS jobs each)"
    redisprod_url "redis://127.0.0.1:$JB_REDIS_PORT/0"
    redisprod_drain plain
    redisprod_url "rediss://localhost:$tls_port/0"
    redisprod_drain tls
  done
  redisprod_url "redis://127.0.0.1:$JB_REDIS_PORT/0"

  replica_port=$(jb_free_port)
  mkdir -p "$JB_RUN/replica"
  redis-server --port "$replica_port" --bind 127.0.0.1 --dir "$JB_RUN/replica" --save '' --appendonly no \
    --replicaof 127.0.0.1 "$JB_REDIS_PORT" --logfile "$JB_RUN/replica/redis.log" --daemonize no &
  BG_PIDS+=($!)
  jb_wait_until "redis-cli -p $replica_port INFO replication 2>/dev/null | grep -q master_link_status:up" 30 \
    || fail "the replica did not sync"
  for round in $(seq 1 "$BENCH_DRAIN_ROUNDS"); do
    say "redisprod, round $round: list drain with a replica attached, jobbuf.redis_min_replicas = 0 then 1"
    jb_sql "ALTER SYSTEM SET jobbuf.redis_min_replicas = 0" >/dev/null
    redisprod_drain replicas_0
    jb_sql "ALTER SYSTEM SET jobbuf.redis_min_replicas = 1" >/dev/null
    redisprod_drain replicas_1
  done
  jb_sql "ALTER SYSTEM RESET jobbuf.redis_min_replicas" >/dev/null
  jb_sql "ALTER SYSTEM RESET jobbuf.redis_url" >/dev/null
  jb_sql "ALTER SYSTEM RESET jobbuf.redis_tls_ca_file" >/dev/null
  jb_redis CONFIG SET tls-port 0 >/dev/null
  worker_enabled on
}

# --- Redis Cluster: the same drain into a 3-master cluster and into the single Redis -----------
# Six list queues (their keys on all three masters) share BENCH_CLUSTER_JOBS jobs staged while
# the worker is disabled; timed from enabling it until jobbuf.jobs is empty. The cluster has three
# replicas (test/harness/redis_cluster.sh), without append-only files here, like the single Redis;
# jobbuf.redis_min_replicas stays 0 in both.
cluster_drain() {  # cluster_drain LABEL
  local n=$BENCH_CLUSTER_JOBS out s
  worker_enabled off
  jb_sql "INSERT INTO jobbuf.jobs (queue, payload) SELECT 'bench_c' || (g % 6 + 1), bench.payload(g)
          FROM generate_series(1, $n) g" >/dev/null
  settle jobbuf.jobs
  out=$(ruby bench/drain_timer.rb emptied "$n" 900) || fail "cluster drain ($1)"
  read -r n s <<<"$out"
  echo "cluster phase, $1: $n jobs over 6 queues in ${s}s: $(div "$n" "$s") jobs/s"
  result "drain_cluster_$1" "$(div "$n" "$s")"
}
phase_cluster() {
  local round port q
  source "$ROOT/test/harness/redis_cluster.sh"
  jb_start_redis_cluster --appendonly no || fail "starting the Redis Cluster"   # persistence as the single Redis
  for q in 1 2 3 4 5 6; do
    jb_sql "SELECT jobbuf_create_queue('bench_c$q', 'list') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_c$q')" >/dev/null
  done
  for round in $(seq 1 "$BENCH_DRAIN_ROUNDS"); do
    say "cluster, round $round: $BENCH_CLUSTER_JOBS jobs over 6 list queues into one Redis, then into a 3-master cluster"
    redisprod_url "redis://127.0.0.1:$JB_REDIS_PORT/0"
    cluster_drain single
    for q in 1 2 3 4 5 6; do jb_redis unlink "jobbuf:bench_c$q" >/dev/null; done
    redisprod_url "$JB_CLUSTER_URL"
    cluster_drain cluster
    for port in "${JB_CLUSTER_PORTS[@]}"; do
      for q in 1 2 3 4 5 6; do redis-cli -p "$port" unlink "jobbuf:bench_c$q" >/dev/null 2>&1 || true; done
    done
  done
  jb_sql "ALTER SYSTEM RESET jobbuf.redis_url" >/dev/null
  worker_enabled on
  jb_stop_redis_cluster
}

# --- frameworks: draining into BullMQ and Celery vs the frameworks' own producers -------------
# The same jobs (BullMQ: name + data {id, user, amount}; Celery: task with args [id, user, 42])
# moved into Redis by jobbuf's worker from jobs pre-staged while it was disabled (timed until the
# framework's list holds them all), and by the framework's own producer from Node / Python.
phase_frameworks() {
  local n=$BENCH_FW_JOBS out count s own
  bash test/consumers/install.sh >/dev/null || fail "installing the Node test consumers (bullmq)"
  result fw_jobs "$n"
  jb_sql "SELECT jobbuf_create_queue('bench_bq', 'bullmq') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_bq')" >/dev/null
  jb_sql "SELECT jobbuf_create_queue('bench_cq', 'celery', '{\"celery_queue\": \"bench_cq\"}') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_cq')" >/dev/null

  say "frameworks: jobbuf worker into BullMQ ($n jobs)"
  worker_enabled off
  jb_sql "INSERT INTO jobbuf.jobs (queue, payload) SELECT 'bench_bq', jsonb_build_object('name', 'bench',
            'data', jsonb_build_object('id', g, 'user', 'user-' || g, 'amount', 42)) FROM generate_series(1, $n) g" >/dev/null
  settle jobbuf.jobs
  jb_redis --scan --pattern 'bull:bench_bq:*' | xargs -r -n 1000 redis-cli -p "$JB_REDIS_PORT" unlink >/dev/null
  out=$(ruby bench/drain_timer.rb jobbuf bull:bench_bq:wait "$n" 900) || fail "jobbuf drain (bullmq)"
  read -r count s <<<"$out"
  wait_queue_empty bench_bq 30 || fail "jobbuf.jobs still holds jobs of bench_bq after the drain"
  echo "$count jobs in ${s}s: $(div "$count" "$s") jobs/s"
  result fw_bullmq_jobbuf "$(div "$count" "$s")"
  jb_redis --scan --pattern 'bull:bench_bq:*' | xargs -r -n 1000 redis-cli -p "$JB_REDIS_PORT" unlink >/dev/null

  say "frameworks: BullMQ's own Queue.addBulk, chunks of 1000 ($n jobs)"
  out=$(node bench/frameworks/bullmq_addbulk.js "redis://127.0.0.1:$JB_REDIS_PORT/0" "$n" 1000) || fail "bullmq_addbulk.js"
  echo "$out"
  own=$(sed -n 's/.*jobs_per_s=\([0-9]*\).*/\1/p' <<<"$out")
  result fw_bullmq_own "$own"
  jb_redis --scan --pattern 'bull:bench:*' | xargs -r -n 1000 redis-cli -p "$JB_REDIS_PORT" unlink >/dev/null

  say "frameworks: jobbuf worker into Celery ($n jobs)"
  worker_enabled off
  jb_sql "INSERT INTO jobbuf.jobs (queue, payload) SELECT 'bench_cq', jsonb_build_object('task', 'bench.record',
            'args', jsonb_build_array(g, 'user-' || g, 42)) FROM generate_series(1, $n) g" >/dev/null
  settle jobbuf.jobs
  jb_redis unlink bench_cq >/dev/null
  out=$(ruby bench/drain_timer.rb jobbuf bench_cq "$n" 900) || fail "jobbuf drain (celery)"
  read -r count s <<<"$out"
  wait_queue_empty bench_cq 30 || fail "jobbuf.jobs still holds jobs of bench_cq after the drain"
  echo "$count jobs in ${s}s: $(div "$count" "$s") jobs/s"
  result fw_celery_jobbuf "$(div "$count" "$s")"
  jb_redis unlink bench_cq >/dev/null

  say "frameworks: Celery's own apply_async loop ($n tasks)"
  out=$(/usr/bin/python3 bench/frameworks/celery_apply_async.py "redis://127.0.0.1:$JB_REDIS_PORT/0" "$n") \
    || fail "celery_apply_async.py"
  echo "$out"
  own=$(sed -n 's/.*tasks_per_s=\([0-9]*\).*/\1/p' <<<"$out")
  result fw_celery_own "$own"
  jb_redis unlink bench >/dev/null
  worker_enabled on
  printf '\n%-10s %14s %16s\n' framework "jobbuf jobs/s" "own producer"
  printf '%-10s %14s %16s\n' BullMQ "$(sed -n 's/^fw_bullmq_jobbuf=//p' "$RESULTS")" "$(sed -n 's/^fw_bullmq_own=//p' "$RESULTS")"
  printf '%-10s %14s %16s\n' Celery "$(sed -n 's/^fw_celery_jobbuf=//p' "$RESULTS")" "$(sed -n 's/^fw_celery_own=//p' "$RESULTS")"
}

# --- clients: each client's enqueue inside a transaction vs the framework's own producer -------
# One process each (bench/clients/): a transaction inserting a row and enqueuing, through the
# client (staged; the worker, running, delivers after the commit) or the framework's own producer
# (pushed to Redis from inside the transaction).
phase_clients() {
  local s=$BENCH_CLIENTS_SECONDS rounds=$BENCH_CLIENTS_ROUNDS out python
  bash test/clients/install_node.sh >/dev/null || fail "installing the Node client's dependencies"
  worker_enabled on
  jb_psql -q >/dev/null <<'SQL'
CREATE TABLE IF NOT EXISTS bench_clients_users (id bigserial PRIMARY KEY, email text NOT NULL);
SELECT jobbuf_create_queue('bench_clients_bq', 'bullmq', '{"bullmq_queue": "bench_clients"}') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_clients_bq');
SELECT jobbuf_create_queue('bench_clients_cq', 'celery', '{"celery_queue": "bench_clients"}') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_clients_cq');
SELECT jobbuf_create_queue('bench_clients_sq', 'sidekiq', '{"sidekiq_queue": "bench_clients"}') WHERE NOT EXISTS (SELECT FROM jobbuf.queues WHERE name = 'bench_clients_sq');
SQL
  source test/clients/pick_python.sh
  python=$(pick_python "celery, psycopg2")
  export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
  say "clients: Node, BullMQ Queue.add / addBulk(100) in a transaction, jobbuf vs BullMQ (${s}s per run)"
  out=$(node bench/clients/node_bullmq.cjs "redis://127.0.0.1:$JB_REDIS_PORT/0" "$s" "$rounds") || fail "bench/clients/node_bullmq.cjs"
  grep -v = <<<"$out"; grep = <<<"$out" >>"$RESULTS"
  say "clients: Python, Celery apply_async in a transaction, jobbuf vs Celery (${s}s per run)"
  out=$(PYTHONPATH=$PWD/clients/python "$python" bench/clients/python_celery.py "redis://127.0.0.1:$JB_REDIS_PORT/0" "$s" "$rounds") \
    || fail "bench/clients/python_celery.py"
  grep -v = <<<"$out"; grep = <<<"$out" >>"$RESULTS"
  say "clients: Ruby, Sidekiq perform_async in a transaction, jobbuf vs Sidekiq (${s}s per run)"
  out=$(REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0" ruby bench/clients/sidekiq_plain.rb "$s" "$rounds") || fail "bench/clients/sidekiq_plain.rb"
  grep -v = <<<"$out"; grep = <<<"$out" >>"$RESULTS"
  wait_queue_empty bench_clients_bq 60; wait_queue_empty bench_clients_cq 60; wait_queue_empty bench_clients_sq 60
  jb_redis --scan --pattern 'bull:bench_clients*' | xargs -r -n 1000 redis-cli -p "$JB_REDIS_PORT" unlink >/dev/null
  jb_redis unlink bench_clients queue:bench_clients >/dev/null
  jb_sql "DROP TABLE bench_clients_users" >/dev/null
}

# --- 6. every database: one drain worker per database ------------------------------------------
# drain_databases DB...: the jobs staged (worker disabled) in each DB's queue bench_db, drained at
# once; prints the jobs/s of all of them together.
drain_databases() {
  local db t0 t1 total=0 cond=""
  for db in "$@"; do
    jb_psql_db "$db" -qtAX -c "INSERT INTO jobbuf.jobs (queue, payload) SELECT 'bench_db', '$BENCH_PAYLOAD'::jsonb FROM generate_series(1, $BENCH_DB_JOBS)" >/dev/null
    jb_psql_db "$db" -qtAX -c "VACUUM (ANALYZE) jobbuf.jobs" >/dev/null
    redis-cli -p "$JB_REDIS_PORT" -n "$(db_index "$db")" unlink jobbuf:bench_db >/dev/null
    cond="$cond [ \"\$(redis-cli -p $JB_REDIS_PORT -n $(db_index "$db") LLEN jobbuf:bench_db)\" = $BENCH_DB_JOBS ] &&"
    total=$((total + BENCH_DB_JOBS))
  done
  jb_sql "CHECKPOINT" >/dev/null
  for db in "$@"; do
    echo "  $db before the start: $(jb_psql_db "$db" -qtAX -c "SELECT count(*) FROM jobbuf.jobs") staged, $(redis-cli -p "$JB_REDIS_PORT" -n "$(db_index "$db")" LLEN jobbuf:bench_db) in Redis" >&2
  done
  jb_sql "ALTER SYSTEM SET jobbuf.enabled = on" >/dev/null
  t0=$(date +%s%N)
  jb_sql "SELECT pg_reload_conf()" >/dev/null
  jb_wait_until "$cond true" 600 || fail "the databases' jobs were not drained in 600 s"
  t1=$(date +%s%N)
  worker_enabled off
  awk -v n="$total" -v ns="$((t1 - t0))" 'BEGIN { printf "%.0f\n", n / (ns / 1e9) }'
}
db_index() { echo "${1#bench_db}"; }  # bench_db1 drains into Redis database 1, bench_db2 into 2

phase_databases() {
  BENCH_PAYLOAD='{"class": "InvoiceMailer", "args": [1000042, "customer-42@example.com", {"plan": "pro", "locale": "en"}]}'
  say "databases: one drain worker per database, each with its own Redis database (ALTER DATABASE ... SET jobbuf.redis_url)"
  local db i one two out n p50 p99 max
  for db in bench_db1 bench_db2; do
    jb_psql_db postgres -q -c "CREATE DATABASE $db" \
      -c "ALTER DATABASE $db SET jobbuf.redis_url = 'redis://127.0.0.1:$JB_REDIS_PORT/$(db_index "$db")'"
    jb_psql_db "$db" -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('bench_db', 'list')"
  done
  worker_enabled off
  one=$(drain_databases bench_db1)
  echo "one database draining: $one jobs/s ($BENCH_DB_JOBS jobs)"
  two=$(drain_databases bench_db1 bench_db2)
  echo "two databases draining at once: $two jobs/s together ($BENCH_DB_JOBS jobs each)"
  result db_drain_one "$one"; result db_drain_two "$two"
  worker_enabled on

  say "databases: commit wake-up latency with $BENCH_DB_COUNT databases having the extension (${BENCH_LAT_SECONDS}s, one single-job transaction every 2 ms)"
  for i in $(seq 1 "$BENCH_DB_COUNT"); do
    jb_psql_db postgres -q -c "CREATE DATABASE bench_many$i"
    jb_psql_db "bench_many$i" -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('bench_lat_many', 'list')"
  done
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf_worker_status() WHERE running AND database LIKE 'bench_many%'\")\" = $BENCH_DB_COUNT ]" 60 \
    || fail "not every one of the $BENCH_DB_COUNT databases got its drain worker"
  echo "drain workers running: $(jb_sql "SELECT count(*) FROM jobbuf_worker_status() WHERE running")"
  out=$(PGDATABASE=bench_many1 "$LATENCY_PROBE" bench_lat_many jobbuf:bench_lat_many "$JB_REDIS_PORT" --seconds "$BENCH_LAT_SECONDS" --interval-ms 2) \
    || fail "latency probe ($BENCH_DB_COUNT databases)"
  read -r n p50 p99 max <<<"$out"
  echo "$n samples in bench_many1: p50 ${p50} ms, p99 ${p99} ms, max ${max} ms"
  result db_lat_p50 "$p50"; result db_lat_p99 "$p99"; result db_lat_max "$max"; result db_lat_count "$BENCH_DB_COUNT"
}

# --- 7. what a metrics scrape costs -------------------------------------------------------------
# query_ms SQL: the mean latency of SQL over BENCH_SCRAPE_CALLS calls (one pgbench client).
query_ms() {
  local file=$JB_RUN/scrape_query.sql out
  printf '%s\n' "$1" >"$file"
  out=$(pgbench -n -c 1 -t "$BENCH_SCRAPE_CALLS" -f "$file" 2>&1) || { echo "$out" >&2; fail "pgbench: $1"; }
  echo "$out" | awk '/^latency average = / { print $4; exit }'
}

phase_scrape() {
  say "scrape: one metrics scrape with a backlog of $BENCH_SCRAPE_JOBS jobs (a paused queue), ${BENCH_SCRAPE_CALLS} calls each"
  local old_sql before after prom census every step out n p50 p99 max over
  worker_enabled on
  jb_psql -q -o /dev/null -c "SELECT jobbuf_create_queue('bench_scrape', 'list')" -c "SELECT jobbuf_pause('bench_scrape')"
  prestage jobbuf.jobs bench_scrape "$BENCH_SCRAPE_JOBS"
  jb_wait_until "[ \"\$(jb_sql \"SELECT ready FROM jobbuf_stats() WHERE queue = 'bench_scrape'\")\" = $BENCH_SCRAPE_JOBS ]" 120 \
    || fail "the worker's census did not count the backlog in 120 s"
  # 1.1's jobbuf_stats(), run as SQL: it classifies and counts every job at each call.
  old_sql=$(awk '/^CREATE FUNCTION jobbuf_stats\(\)/ { f = 1 } f && /AS \$\$$/ { body = 1; next } body && /^\$\$;/ { exit } body { print }' sql/jobbuf--1.1.sql)
  [ -n "$old_sql" ] || fail "no jobbuf_stats() in sql/jobbuf--1.1.sql"
  before=$(query_ms "$old_sql;")
  after=$(query_ms "SELECT * FROM jobbuf_stats();")
  prom=$(query_ms "SELECT * FROM jobbuf_prometheus_queues(); SELECT * FROM jobbuf_prometheus_worker();")
  census=$(query_ms "SELECT jobbuf.take_census();")
  echo "1.1 jobbuf_stats (counts $BENCH_SCRAPE_JOBS jobs): $before ms; 1.2 jobbuf_stats: $after ms; exporter queries: $prom ms"
  # The worker's pause for a census: 1.1-style, the whole census in one statement (what
  # take_census() does by hand); 1.2's worker walks it in steps of 5000 jobs between its rounds,
  # each a jobbuf.census_step in the middle of the backlog, and a live queue's commit → Redis
  # latency shows what the walk costs its deliveries.
  step=$(query_ms "SELECT count(*) FROM jobbuf.census_step((SELECT min(id) + $BENCH_SCRAPE_JOBS / 2 FROM jobbuf.jobs WHERE queue = 'bench_scrape'), 5000);")
  echo "the census in one statement: $census ms; one step of 5000 jobs (by hand): $step ms"
  # The worker says, at DEBUG1, how many steps each census took and its longest step.
  local logged walks longest
  logged=$(wc -l <"$JB_RUN/postgres.log")
  jb_sql "ALTER SYSTEM SET log_min_messages = debug1" >/dev/null; jb_sql "SELECT pg_reload_conf()" >/dev/null
  out=$("$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_SCRAPE_PROBE_SECONDS" --interval-ms 2 \
    --out "$JB_RUN/latency_scrape.txt") || fail "latency probe (scrape)"
  jb_sql "ALTER SYSTEM RESET log_min_messages" >/dev/null; jb_sql "SELECT pg_reload_conf()" >/dev/null
  read -r n p50 p99 max <<<"$out"
  over=$(awk '$2 > 20000' "$JB_RUN/latency_scrape.txt" | wc -l)
  # "census of N jobs in K steps of T ms in all, the longest X ms", censuses of the whole backlog
  walks=$({ tail -n +"$logged" "$JB_RUN/postgres.log" | grep -o 'census of [0-9]* jobs in .* ms$' || true; } \
    | awk -v n="$BENCH_SCRAPE_JOBS" '$3 >= n { print $6, $9, $15 }')
  [ -n "$walks" ] || fail "no census of the backlog logged during the probe"
  longest=$(echo "$walks" | awk '$3 > m { m = $3 } END { print m }')
  every=$(echo "$walks" | awk -v p="$(jb_sql "SELECT setting FROM pg_settings WHERE name = 'jobbuf.poll_interval'")" \
    '{ t = $2 } END { i = p < 1000 ? p : 1000; if (10 * t > i) i = 10 * t; printf "%.1f", i / 1000 }')
  echo "the worker's censuses meanwhile (steps, ms in all, longest step ms): $(echo "$walks" | paste -sd ';'); taken every $every s"
  echo "a live queue meanwhile ($n samples over ${BENCH_SCRAPE_PROBE_SECONDS}s): p50 ${p50} ms, p99 ${p99} ms, max ${max} ms, $over over 20 ms"
  result scrape_step_ms "$longest"; result scrape_census_every_s "$every"
  result scrape_lat_p99 "$p99"; result scrape_lat_max "$max"; result scrape_lat_over20 "$over"
  result scrape_jobs "$BENCH_SCRAPE_JOBS"; result scrape_before_ms "$before"; result scrape_after_ms "$after"
  result scrape_prom_ms "$prom"; result scrape_census_ms "$census"
  jb_sql "SELECT jobbuf_drop_queue('bench_scrape', force => true)" >/dev/null 2>&1 || jb_sql "DELETE FROM jobbuf.jobs WHERE queue = 'bench_scrape'" >/dev/null
}

# idle_probe WHAT: the idle worker's CPU over BENCH_QUEUES_SECONDS (after the last changes' dead
# rows, statistics and reloads are out of the way), then the commit -> Redis latency of single-job
# transactions into bench_lat, one every 20 ms for BENCH_LAT_SECONDS. Sets cpu, n, p50, p99, max.
idle_probe() {
  local ticks0 ticks1 out hz
  hz=$(getconf CLK_TCK)
  wait_queue_empty bench_lat 60 || true
  settle ""
  sleep 2   # the worker reloaded what the changes touched
  ticks0=$(cpu_ticks "$WORKER_PID")
  sleep "$BENCH_QUEUES_SECONDS"
  ticks1=$(cpu_ticks "$WORKER_PID")
  cpu=$(awk -v t=$((ticks1 - ticks0)) -v hz="$hz" -v s="$BENCH_QUEUES_SECONDS" 'BEGIN { printf "%.1f", 100 * t / hz / s }')
  echo "idle worker: ${cpu}% of a core ($((ticks1 - ticks0)) ticks in ${BENCH_QUEUES_SECONDS}s)"
  out=$("$LATENCY_PROBE" bench_lat jobbuf:bench_lat "$JB_REDIS_PORT" --seconds "$BENCH_LAT_SECONDS" --interval-ms 20) \
    || fail "latency probe ($1)"
  read -r n p50 p99 max <<<"$out"
  echo "$n samples: p50 ${p50} ms, p99 ${p99} ms, max ${max} ms"
}

# --- queues: what many idle queues cost ------------------------------------------------------
# The worker idle (nothing staged) with N active list queues: its CPU time over
# BENCH_QUEUES_SECONDS (a full pass every poll_interval, 1 s), then the commit -> Redis latency of
# single-job transactions into one of them. Queues are added up to each count in turn.
phase_queues() {
  worker_enabled on
  local count have cpu n p50 p99 max
  for count in $BENCH_QUEUES; do
    have=$(jb_sql "SELECT count(*) FROM jobbuf.queues WHERE NOT paused AND target <> 'none'")
    if [ "$have" -lt "$count" ]; then
      jb_sql "SELECT count(jobbuf_create_queue('bench_idle_' || g, 'list')) FROM generate_series($have + 1, $count) g" >/dev/null
    fi
    have=$(jb_sql "SELECT count(*) FROM jobbuf.queues WHERE NOT paused AND target <> 'none'")
    say "queues: $have active queues, worker idle for ${BENCH_QUEUES_SECONDS}s, then commit -> Redis latency (${BENCH_LAT_SECONDS}s, one single-job transaction every 20 ms)"
    idle_probe "$have queues"
    result "queues_${count}_active" "$have"; result "queues_${count}_idle_cpu" "$cpu"
    result "queues_${count}_p50" "$p50"; result "queues_${count}_p99" "$p99"; result "queues_${count}_max" "$max"
  done
  result queues_counts "${BENCH_QUEUES// /,}"
}

# --- schedules: what periodic jobs cost while none is due ------------------------------------------
# The worker idle with no schedule, then with BENCH_SCHEDULES yearly schedules whose next tick is
# months away: its CPU time over BENCH_QUEUES_SECONDS and the commit -> Redis latency of
# single-job transactions, each time. The worker keeps the next due tick and reads it again only
# when jobbuf.schedules changes: the count should not show.
phase_schedules() {
  worker_enabled on
  local count cpu n p50 p99 max
  jb_sql "SELECT jobbuf_create_queue('bench_ticks', 'list', if_not_exists => true)" >/dev/null
  jb_sql "SELECT count(jobbuf_unschedule(name)) FROM jobbuf_schedules() WHERE name LIKE 'bench_tick_%'" >/dev/null
  for count in 0 "$BENCH_SCHEDULES"; do
    if [ "$count" -gt 0 ]; then
      jb_psql -q -o /dev/null -c "SET client_min_messages = warning" \
        -c "SELECT count(jobbuf_schedule('bench_tick_' || g, '0 0 1 1 *', 'bench_ticks', '{}')) FROM generate_series(1, $count) g"
    fi
    say "schedules: $count, none due; worker idle for ${BENCH_QUEUES_SECONDS}s, then commit -> Redis latency (${BENCH_LAT_SECONDS}s)"
    idle_probe "$count schedules"
    result "sched_${count}_idle_cpu" "$cpu"; result "sched_${count}_p99" "$p99"
  done
  result sched_count "$BENCH_SCHEDULES"
  jb_sql "SELECT count(jobbuf_unschedule(name)) FROM jobbuf_schedules() WHERE name LIKE 'bench_tick_%'" >/dev/null
}

# --- flow: what flow control costs the drain when it does not bind ------------------------------
# The list drain of BENCH_JOBS jobs three ways in one round, interleaved: no option; max_in_redis
# above the backlog (a depth read before every batch); max_rate far above the drain (the token
# bucket). A cap that binds is consumers' speed, not jobbuf's: that is test/e2e/flow_caps.sh.
phase_flow() {
  local round opts name
  local -A best=()
  jb_sql "SELECT jobbuf_create_queue('bench_flow', 'list', if_not_exists => true)" >/dev/null
  for round in 1 2; do
    for name in plain cap rate; do
      case $name in
        plain) opts='{}' ;;
        cap) opts="{\"max_in_redis\": $((BENCH_JOBS * 2))}" ;;
        rate) opts='{"max_rate": 100000000}' ;;
      esac
      jb_sql "SELECT jobbuf_alter_queue('bench_flow', '$opts')" >/dev/null
      say "flow, round $round: list drain ($BENCH_JOBS jobs), options $opts"
      jobbuf_drain bench_flow jobbuf:bench_flow
      best[$name]=$(awk -v a="$DRAIN_RATE" -v b="${best[$name]:-0}" 'BEGIN { print (a > b ? a : b) }')
      # options replace, not merge: the next run starts from none
      jb_sql "UPDATE jobbuf.queues SET options = '{}' WHERE name = 'bench_flow'" >/dev/null
    done
  done
  for name in plain cap rate; do result "flow_${name}" "${best[$name]}"; done
}

# --- fair: what fair_by costs the drain ----------------------------------------------------------
# The list drain of BENCH_JOBS jobs, interleaved in each round: no option (the queue's jobs in id
# order); fair_by "partition_key" with every job in one partition; fair_by with every job in a
# partition of its own (BENCH_JOBS partitions: a million by default).
# BENCH_FAIR_CASES [plain one many] a subset of the cases; BENCH_FAIR_PERF_DIR [] a directory
# (as this script sees it) where each drain asks for a perf profile of the worker from outside a
# Debian root (perf is not in the roots): the script writes "request" (LABEL PID) and waits for
# "started", writes "stop" after the drain and waits for "stopped" (see bench/README.md item 12).
fair_perf() {  # fair_perf start|stop LABEL
  local dir=${BENCH_FAIR_PERF_DIR:-}
  [ -n "$dir" ] || return 0
  if [ "$1" = start ]; then
    rm -f "$dir/started" "$dir/stop" "$dir/stopped"
    echo "$2 $WORKER_PID" >"$dir/request"
    jb_wait_until "[ -e '$dir/started' ]" 30 || fail "no perf started for $2 (is bench/fair_perf_host.sh running?)"
  else
    touch "$dir/stop"
    jb_wait_until "[ -e '$dir/stopped' ]" 60 || fail "perf did not stop for $2"
  fi
}
phase_fair() {
  local round name
  local -A best=()
  jb_sql "SELECT jobbuf_create_queue('bench_fair', 'list', if_not_exists => true)" >/dev/null
  for round in 1 2; do
    for name in ${BENCH_FAIR_CASES:-plain one many}; do
      case $name in
        plain) jb_sql "UPDATE jobbuf.queues SET options = '{}' WHERE name = 'bench_fair'" >/dev/null; PRESTAGE_PARTITION= ;;
        one) jb_sql "SELECT jobbuf_alter_queue('bench_fair', '{\"fair_by\": \"partition_key\"}')" >/dev/null; PRESTAGE_PARTITION="'p'" ;;
        many) jb_sql "SELECT jobbuf_alter_queue('bench_fair', '{\"fair_by\": \"partition_key\"}')" >/dev/null; PRESTAGE_PARTITION="'p' || g" ;;
      esac
      say "fair, round $round: list drain ($BENCH_JOBS jobs), $name"
      fair_perf start "$name-$round"
      jobbuf_drain bench_fair jobbuf:bench_fair
      fair_perf stop "$name-$round"
      best[$name]=$(awk -v a="$DRAIN_RATE" -v b="${best[$name]:-0}" 'BEGIN { print (a > b ? a : b) }')
    done
  done
  PRESTAGE_PARTITION=
  for name in ${BENCH_FAIR_CASES:-plain one many}; do result "fair_${name}" "${best[$name]}"; done
}

has_phase baseline && phase_baseline   # first: it restarts the cluster and recreates the extension
has_phase drain && phase_drain
has_phase staging && { say "staging cost (pgbench -M prepared, 8 clients, ${BENCH_STAGE_SECONDS}s per run, worker running)"; phase_staging; }
has_phase latency && phase_latency
has_phase sustain && phase_sustain
has_phase snapshot && phase_snapshot
has_phase snapshot_capped && phase_snapshot_capped
has_phase profile && phase_profile
has_phase activejob && phase_activejob
has_phase redisprod && phase_redisprod
has_phase cluster && phase_cluster
has_phase frameworks && phase_frameworks
has_phase databases && phase_databases
has_phase clients && phase_clients
has_phase scrape && phase_scrape
has_phase queues && phase_queues
has_phase schedules && phase_schedules
has_phase flow && phase_flow
has_phase fair && phase_fair

say "summary"
echo "uptime at end: $(uptime)"
result run_ended "$(date -u '+%Y-%m-%d %H:%M UTC')"
result run_load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "${BENCH_RESULTS:-}" ] || cp "$RESULTS" "$BENCH_RESULTS"
ruby bench/report.rb "$RESULTS" "BENCH_JOBS=$BENCH_JOBS fsync=$BENCH_FSYNC synchronous_commit=on shared_buffers=1GB batch=$BENCH_BATCH"

# docs/performance.md from this run: with BENCH_DOCS=1, or when every default phase ran.
missing=$(for p in $BENCH_DEFAULT_PHASES; do has_phase "$p" || printf '%s ' "$p"; done)
if [ "$BENCH_DOCS" = 0 ]; then
  echo "docs/performance.md not rewritten: BENCH_DOCS=0"
elif [ "$BENCH_DOCS" = 1 ] || [ -z "$missing" ]; then
  ruby bench/performance_page.rb "$RESULTS" docs/performance.md || fail "writing docs/performance.md (bench/performance_page.rb)"
  if [ "$BENCH_DOCS" = 1 ]; then echo "docs/performance.md rewritten from this run (BENCH_DOCS=1; phases: $BENCH_PHASES)"
  else echo "docs/performance.md rewritten from this run (the full default phase list ran)"; fi
else
  echo "docs/performance.md not rewritten: partial run (not run: ${missing% }; BENCH_DOCS=1 writes it anyway)"
fi

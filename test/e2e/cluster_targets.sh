#!/usr/bin/env bash
# End-to-end on a Redis Cluster (three masters, three replicas, started by the harness):
# - which targets a cluster takes, judged at jobbuf_create_queue / jobbuf_alter_queue by the URL
#   this database's worker uses: sidekiq and celery refused, bullmq refused without a {hash tag}
#   in prefix or bullmq_queue (also when jobbuf_alter_queue removes it), list and stream
#   delivered; with the database's own jobbuf.redis_url a single Redis, sidekiq is accepted;
# - after the database's URL changes to the cluster, that sidekiq queue's jobs stay staged with
#   one WARNING and a jobbuf_worker_status() note, while the other queues are delivered;
# - a real BullMQ Worker (ioredis Cluster) runs every committed job of a cluster-backed bullmq
#   queue exactly once, and no rolled-back one;
# - jobbuf_cluster_nodes() shows the masters, replicas and slot ranges.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/harness/servers.sh
source test/harness/redis_cluster.sh
source test/consumers/checks.sh

bash test/consumers/install.sh
NODE_DIR=$ROOT/test/consumers/node

WORKER_PIDS=()
cleanup() {
  jb_stop_pids "${WORKER_PIDS[@]}"
  jb_stop_redis_cluster
  jb_stop_all
}
jb_init_run_dir
trap cleanup EXIT
jb_start_redis   # a single Redis, for the database-level URL
SINGLE_URL=redis://127.0.0.1:$JB_REDIS_PORT/0
jb_start_redis_cluster
jb_start_postgres "jobbuf.redis_url = '$JB_CLUSTER_URL'
jobbuf.poll_interval = '200ms'"

# refused QUERY PATTERN: the statement fails with an error matching PATTERN.
refused() {
  local out
  out=$(jb_psql -v ON_ERROR_STOP=1 -c "$1" 2>&1) && return 1
  grep -q -- "$2" <<<"$out"
}
check "sidekiq is refused on a cluster" \
  refused "SELECT jobbuf_create_queue('sk', 'sidekiq')" 'the sidekiq target cannot be delivered to a Redis Cluster'
check "celery is refused on a cluster" \
  refused "SELECT jobbuf_create_queue('cel', 'celery')" 'the celery target cannot be delivered to a Redis Cluster'
check "bullmq without a {hash tag} is refused, saying how to set one" \
  refused "SELECT jobbuf_create_queue('bq', 'bullmq')" 'needs a {hash tag} in its prefix or bullmq_queue'
check "an empty {} is no hash tag" \
  refused "SELECT jobbuf_create_queue('bq', 'bullmq', '{\"prefix\": \"{}bull\"}')" 'needs a {hash tag}'
check "nothing of the refused queues was created" [ "$(jb_sql "SELECT count(*) FROM jobbuf.queues")" = 0 ]
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('bq', 'bullmq', '{"prefix": "{jb}"}');
SELECT jobbuf_create_queue('bq2', 'bullmq', '{"bullmq_queue": "{bq2}"}');
SELECT jobbuf_create_queue('events', 'stream');
SELECT jobbuf_create_queue('work', 'list');
SQL
ok "bullmq with a tag in prefix or bullmq_queue, stream and list are created"
check "jobbuf_alter_queue cannot remove the tag" \
  refused "SELECT jobbuf_alter_queue('bq2', '{\"bullmq_queue\": \"plain\"}')" 'needs a {hash tag}'

# The database's own URL is what counts: with a single Redis for this database, sidekiq is
# accepted; the worker restarts with each change of the database's settings.
worker_pid() { jb_sql "SELECT pid FROM jobbuf_worker_status() WHERE running AND redis_connected"; }
switch_url() {  # switch_url "SET jobbuf.redis_url = ..." | "RESET jobbuf.redis_url"
  local before
  before=$(worker_pid)
  jb_psql -q -o /dev/null -c "ALTER DATABASE $JB_DB $1" -c "SELECT pg_reload_conf()"
  jb_wait_until '[ -n "$(worker_pid)" ] && [ "$(worker_pid)" != "'"$before"'" ]' 20
}
check "the worker restarts with the database's own URL (a single Redis)" switch_url "SET jobbuf.redis_url = '$SINGLE_URL'"
check "with the database's jobbuf.redis_url a single Redis, sidekiq is accepted" \
  jb_psql -qtA -o /dev/null -c "SELECT jobbuf_create_queue('sk', 'sidekiq')"
MARK=$(wc -l <"$JB_RUN/postgres.log")
check "the worker restarts with the cluster again" switch_url "RESET jobbuf.redis_url"
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_stage('sk', '{"class": "HardWorker", "args": [1]}');
SELECT jobbuf_stage('work', jsonb_build_object('n', g)) FROM generate_series(1, 100) g;
SELECT jobbuf_stage('events', jsonb_build_object('n', g)) FROM generate_series(1, 100) g;
SQL
check "list jobs reach the master serving their key" \
  jb_wait_until '[ "$(redis-cli -p "$(jb_cluster_owner jobbuf:work)" LLEN jobbuf:work)" = 100 ]' 20
check "stream jobs reach the master serving their key" \
  jb_wait_until '[ "$(redis-cli -p "$(jb_cluster_owner jobbuf:events)" XLEN jobbuf:events)" = 100 ]' 20
sleep 1   # several passes of the worker
check "the sidekiq queue's job stays staged" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'sk'")" = 1 ]
warnings=$(tail -n +"$((MARK + 1))" "$JB_RUN/postgres.log" | grep -c 'WARNING: .*queue "sk" is not delivered' || true)
check "one WARNING names it ($warnings)" [ "$warnings" = 1 ] || { grep -i "jobbuf" "$JB_RUN/postgres.log" | tail -20; }
check "jobbuf_worker_status() says so" \
  [ -n "$(jb_sql "SELECT 1 FROM jobbuf_worker_status() WHERE last_error LIKE '%queue \"sk\" is not delivered%sidekiq%'")" ]
check "its jobbuf_stats() row says why" \
  jb_wait_until '[ -n "$(jb_sql "SELECT 1 FROM jobbuf_stats() WHERE queue = '"'sk'"' AND last_error LIKE '"'%sidekiq target cannot be delivered to a Redis Cluster%'"'")" ]' 5
check "nothing of it reached the cluster" \
  [ -z "$(for p in "${JB_CLUSTER_PORTS[@]}"; do redis-cli -p "$p" --scan --pattern '*queue*' ; done)" ]

# A real BullMQ Worker on the cluster (ioredis Cluster), prefix {jb}.
node "$NODE_DIR/bullmq_worker.js" --url "$JB_CLUSTER_URL" --queue bq --prefix '{jb}' --concurrency 8 \
  --out "$JB_RUN/bq.jsonl" >"$JB_RUN/bq.worker.out" 2>&1 </dev/null &
WORKER_PIDS+=($!)
check "the BullMQ Worker connected to the cluster" jb_wait_until 'grep -q ready "$JB_RUN/bq.worker.out"' 30
: >"$JB_RUN/committed"
for t in 1 2 3 4 5; do
  jb_psql -qtAX >>"$JB_RUN/committed" <<SQL
BEGIN;
SELECT jobbuf_stage('bq', jsonb_build_object('name', 'send', 'data', jsonb_build_object('t', $t, 'g', g)))
  FROM generate_series(1, 100) g;
COMMIT;
SQL
done
jb_psql -qtAX >"$JB_RUN/rolled_back" <<'SQL'
BEGIN;
SELECT jobbuf_stage('bq', jsonb_build_object('name', 'rolled-back', 'data', g)) FROM generate_series(1, 100) g;
ROLLBACK;
SQL
lines_in() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
check "the Worker ran 500 jobs" jb_wait_until '[ "$(lines_in "$JB_RUN/bq.jsonl")" -ge 500 ]' 60
sleep 1   # anything run twice would show up now
RUN_LOG=$JB_RUN/bq.jsonl
check "each committed job ran exactly once, no rolled-back one" ruby -rjson -e '
  runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }
  ids = runs.map { |r| r["id"][/\Ajb-[0-9a-f]{8}-(\d+)\z/, 1] }
  want = File.readlines(ARGV[1], chomp: true).reject(&:empty?)
  rb = File.readlines(ARGV[2], chomp: true).reject(&:empty?)
  exit(ids.sort == want.sort && (ids & rb).empty? && runs.all? { |r| r["name"] == "send" } ? 0 : 1)' \
  "$RUN_LOG" "$JB_RUN/committed" "$JB_RUN/rolled_back"
check "the queue's keys are all in one slot (the {jb} tag)" \
  [ -z "$(for p in "${JB_CLUSTER_PORTS[@]}"; do redis-cli -p "$p" --scan --pattern '*:bq:*' ; done | grep -v '^{jb}:bq:')" ]

nodes_seen() {
  jb_sql "SELECT count(*) FILTER (WHERE role = 'master'), count(*) FILTER (WHERE role = 'replica'),
                 sum(slot_last - slot_first + 1) FILTER (WHERE role = 'master'),
                 count(*) FILTER (WHERE health = 'online')
          FROM jobbuf_cluster_nodes()"
}
check "jobbuf_cluster_nodes() shows 3 masters, 3 replicas, 16384 slots, all online" \
  jb_wait_until '[ "$(nodes_seen)" = "3|3|16384|6" ]' 15

# CLUSTERDOWN: a master and its replica stopped, so that some slots have no node; the other
# masters answer CLUSTERDOWN. The list queue (on a live master) keeps its jobs staged, with one
# WARNING, and delivers them with one LOG once the two nodes are back.
# The master stopped serves neither the queue's key nor the delivery lease's (whose slot comes
# from the installation's identity: stopping its master makes the lease's refresh fail first,
# another problem with its own WARNING).
WORK_OWNER=$(jb_cluster_owner jobbuf:work)
LEASE_OWNER=$(jb_cluster_owner "jobbuf:lease:$(jb_sql "SELECT jobbuf.installation_id()")")
DOWN_MASTER=
DOWN_REPLICA=
for p in "${JB_CLUSTER_PORTS[@]}"; do
  role=$(redis-cli -p "$p" INFO replication | tr -d '\r')
  if grep -qx 'role:master' <<<"$role" && [ "$p" != "$WORK_OWNER" ] && [ "$p" != "$LEASE_OWNER" ] && [ -z "$DOWN_MASTER" ]; then DOWN_MASTER=$p; fi
done
for p in "${JB_CLUSTER_PORTS[@]}"; do
  if [ "$(redis-cli -p "$p" INFO replication | tr -d '\r' | sed -n 's/^master_port://p')" = "$DOWN_MASTER" ]; then DOWN_REPLICA=$p; fi
done
MARK=$(wc -l <"$JB_RUN/postgres.log")
for p in "$DOWN_REPLICA" "$DOWN_MASTER"; do redis-cli -p "$p" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
check "the cluster says it is down" jb_wait_until '[ "$(redis-cli -p "$WORK_OWNER" CLUSTER INFO | tr -d "\r" | sed -n "s/^cluster_state://p")" = fail ]' 30
jb_sql "SELECT count(jobbuf_stage('work', jsonb_build_object('down', g))) FROM generate_series(1, 10) g" >/dev/null
sleep 2   # several attempts of the worker
check "the jobs stay staged while the cluster is down" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'work'")" = 10 ]
down_warnings=$(tail -n +"$((MARK + 1))" "$JB_RUN/postgres.log" | grep -c 'WARNING: .*jobbuf: .*Redis Cluster is down' || true)
check "one WARNING says the cluster is down ($down_warnings)" [ "$down_warnings" = 1 ]
jb_cluster_start_node "$DOWN_MASTER"
jb_cluster_start_node "$DOWN_REPLICA"
check "the cluster is up again" jb_cluster_wait_ok 30
check "the jobs are delivered once it is up" \
  jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'work'"'")" = 0 ]' 30
check "once each" [ "$(redis-cli -p "$WORK_OWNER" LRANGE jobbuf:work 0 -1 | grep -c '"down"' || true)" = 10 ]
tail -n +"$((MARK + 1))" "$JB_RUN/postgres.log" | grep -E '(WARNING|LOG): +jobbuf:' | sed 's/^/# /' | cut -c1-200
check "one LOG says deliveries resumed" \
  [ "$(tail -n +"$((MARK + 1))" "$JB_RUN/postgres.log" | grep -c 'LOG: .*jobbuf: Redis at redis+cluster://.* accepts jobs again')" = 1 ]

echo "# cluster_targets: $failures failure(s)"
[ "$failures" = 0 ]

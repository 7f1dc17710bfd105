#!/usr/bin/env bash
# End-to-end: rediss+cluster:// — a Redis Cluster that speaks only TLS (clients, replication and
# cluster bus; certificates from test/harness/tls_certs.sh, full verification against the
# addresses the nodes announce): two list queues whose keys are on different masters are
# delivered to the masters that serve them, and jobbuf_cluster_nodes() reads the map over TLS.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh
source test/harness/redis_cluster.sh
source test/harness/tls_certs.sh
source test/consumers/checks.sh

cleanup() {
  jb_stop_redis_cluster
  jb_stop_all
}
jb_init_run_dir
trap cleanup EXIT
jb_make_tls_certs "$JB_RUN/tls"
JB_CLUSTER_TLS_DIR=$JB_RUN/tls
jb_start_redis_cluster
check "the cluster URL is rediss+cluster:// ($JB_CLUSTER_URL)" grep -q '^rediss+cluster://' <<<"$JB_CLUSTER_URL"
jb_start_postgres "jobbuf.redis_url = '$JB_CLUSTER_URL'
jobbuf.redis_tls_ca_file = '$JB_RUN/tls/ca.crt'
jobbuf.poll_interval = '200ms'"

# Two queues on two different masters.
first=; second=
for q in a b c d e f g h; do
  owner=$(jb_cluster_owner "jobbuf:tls_$q")
  if [ -z "$first" ]; then first=$q; first_owner=$owner
  elif [ "$owner" != "$first_owner" ]; then second=$q; second_owner=$owner; break; fi
done
jb_sql "SELECT jobbuf_create_queue('tls_$first', 'list'), jobbuf_create_queue('tls_$second', 'list')" >/dev/null
jb_sql "SELECT count(jobbuf_stage(CASE WHEN g % 2 = 0 THEN 'tls_$first' ELSE 'tls_$second' END, jsonb_build_object('n', g)))
        FROM generate_series(1, 400) g" >/dev/null
check "200 jobs on :$first_owner over TLS" \
  jb_wait_until '[ "$(jb_cluster_cli -p "$first_owner" LLEN "jobbuf:tls_$first")" = 200 ]' 20
check "200 jobs on :$second_owner over TLS" \
  jb_wait_until '[ "$(jb_cluster_cli -p "$second_owner" LLEN "jobbuf:tls_$second")" = 200 ]' 20
check "jobbuf.jobs is empty" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]
check "jobbuf_cluster_nodes() over TLS names the TLS ports" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf_cluster_nodes() WHERE node = '127.0.0.1:$first_owner' AND role = 'master'")" -ge 1 ]
check "no TLS or cluster WARNING" [ "$(grep -c 'WARNING: .*jobbuf: .*\(TLS\|certificate\|Cluster\)' "$JB_RUN/postgres.log" || true)" = 0 ]

echo "# cluster_tls: $failures failure(s)"
[ "$failures" = 0 ]

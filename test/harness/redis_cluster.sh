# Test harness (sourced by bash, after servers.sh): a private Redis Cluster of three masters and
# three replicas (redis-cli --cluster create), append-only files on, each node on a free loopback
# port in its own directory under $JB_RUN. Stopped by jb_stop_redis_cluster (the caller runs it
# from its EXIT cleanup).
#
#   jb_start_redis_cluster [redis-server options...]  # JB_CLUSTER_PORTS (6 ports), JB_CLUSTER_URL
#   jb_cluster_node_pid PORT                          # the pid of the node on PORT
#   jb_cluster_start_node PORT                        # (re)starts the node on PORT, same directory
#   jb_cluster_owner KEY                              # the port of the master that serves KEY's slot now
#   jb_cluster_wait_ok [seconds]                      # every live node says cluster_state:ok
#   jb_cluster_replicas_synced                        # every live replica's link is up
#   jb_stop_redis_cluster
# With JB_CLUSTER_TLS_DIR set (certificates of tls_certs.sh), the nodes speak only TLS (clients,
# replication and the cluster bus), and JB_CLUSTER_URL is rediss+cluster://.
#   jb_cluster_cli ARGS...                            # redis-cli, with TLS when the cluster has it

JB_CLUSTER_PORTS=()
declare -A JB_CLUSTER_PIDS=()
declare -A JB_CLUSTER_BUS=()  # the cluster bus port of each node (not port + 10000: that may be taken or past 65535)
JB_CLUSTER_ARGS=()

jb_cluster_cli() {
  if [ -n "${JB_CLUSTER_TLS_DIR:-}" ]; then
    redis-cli --tls --cacert "$JB_CLUSTER_TLS_DIR/ca.crt" "$@"
  else
    redis-cli "$@"
  fi
}

jb_cluster_start_node() {
  local port=$1 dir=$JB_RUN/cluster-$1 from
  mkdir -p "$dir"
  from=$(jb_log_size "$dir/redis.log")
  [ -n "${JB_CLUSTER_BUS[$port]:-}" ] || JB_CLUSTER_BUS[$port]=$(jb_free_port)
  local listen=(--port "$port")
  if [ -n "${JB_CLUSTER_TLS_DIR:-}" ]; then
    listen=(--port 0 --tls-port "$port" --tls-cert-file "$JB_CLUSTER_TLS_DIR/server.crt"
            --tls-key-file "$JB_CLUSTER_TLS_DIR/server.key" --tls-ca-cert-file "$JB_CLUSTER_TLS_DIR/ca.crt"
            --tls-auth-clients no --tls-cluster yes --tls-replication yes)
  fi
  redis-server "${listen[@]}" --bind 127.0.0.1 --dir "$dir" --logfile "$dir/redis.log" --daemonize no \
    --cluster-enabled yes --cluster-port "${JB_CLUSTER_BUS[$port]}" --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
    --appendonly yes --appendfsync always --save '' --repl-diskless-sync yes --repl-diskless-sync-delay 0 \
    --cluster-replica-validity-factor 0 "${JB_CLUSTER_ARGS[@]}" &
  JB_CLUSTER_PIDS[$port]=$!
  local cli=(-p "$port")
  [ -z "${JB_CLUSTER_TLS_DIR:-}" ] || cli+=(--tls --cacert "$JB_CLUSTER_TLS_DIR/ca.crt")
  jb_redis_started "${JB_CLUSTER_PIDS[$port]}" "$dir/redis.log" "$from" "${cli[@]}"
}

# jb_cluster_new_node PORT: a new node on PORT and a new bus port (jb_on_free_port's START: when
# either port was taken, both are chosen again).
jb_cluster_new_node() {
  unset "JB_CLUSTER_BUS[$1]"
  jb_cluster_start_node "$1"
}

jb_cluster_node_pid() { echo "${JB_CLUSTER_PIDS[$1]}"; }

# jb_cluster_all_ok: every live node says cluster_state:ok.
jb_cluster_all_ok() {
  local port
  for port in "${JB_CLUSTER_PORTS[@]}"; do
    kill -0 "${JB_CLUSTER_PIDS[$port]}" 2>/dev/null || continue
    jb_cluster_cli -p "$port" CLUSTER INFO 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok' || return 1
  done
}

# jb_cluster_replicas_synced: every live replica's link to its master is up.
jb_cluster_replicas_synced() {
  local port info
  for port in "${JB_CLUSTER_PORTS[@]}"; do
    kill -0 "${JB_CLUSTER_PIDS[$port]}" 2>/dev/null || continue
    info=$(jb_cluster_cli -p "$port" INFO replication 2>/dev/null | tr -d '\r')
    if grep -qx 'role:slave' <<<"$info"; then grep -qx 'master_link_status:up' <<<"$info" || return 1; fi
  done
}

jb_cluster_wait_ok() { jb_wait_until jb_cluster_all_ok "${1:-30}"; }

jb_start_redis_cluster() {
  jb_init_run_dir
  JB_CLUSTER_ARGS=("$@")
  JB_CLUSTER_PORTS=()
  local i port addrs=()
  for i in 1 2 3 4 5 6; do
    jb_on_free_port port jb_cluster_new_node || return 1
    JB_CLUSTER_PORTS+=("$port")
    addrs+=("127.0.0.1:$port")
  done
  jb_cluster_cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$JB_RUN/cluster-create.log" 2>&1 || {
    cat "$JB_RUN/cluster-create.log" >&2; return 1; }
  jb_cluster_wait_ok 30 || { echo "the cluster did not come up" >&2; return 1; }
  jb_wait_until jb_cluster_replicas_synced 30 || { echo "the replicas did not synchronise" >&2; return 1; }
  JB_CLUSTER_URL="redis${JB_CLUSTER_TLS_DIR:+s}+cluster://$(IFS=,; echo "${addrs[*]:0:3}")"
}

# The master serving KEY's slot, as the cluster says now (CLUSTER NODES of any live node): its port.
jb_cluster_owner() {
  local key=$1 port slot
  for port in "${JB_CLUSTER_PORTS[@]}"; do
    kill -0 "${JB_CLUSTER_PIDS[$port]}" 2>/dev/null || continue
    slot=$(jb_cluster_cli -p "$port" CLUSTER KEYSLOT "$key" 2>/dev/null) || continue
    jb_cluster_cli -p "$port" CLUSTER NODES 2>/dev/null | tr -d '\r' | awk -v s="$slot" '
      $3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) {
          if ($i ~ /^\[/) continue              # a migration in progress, not ownership
          n = split($i, r, "-"); lo = r[1] + 0; hi = (n > 1 ? r[2] : r[1]) + 0
          if (lo <= s && s <= hi) { split($2, a, "@"); sub(/.*:/, "", a[1]); print a[1]; exit }
        }
      }'
    return 0
  done
}

jb_stop_redis_cluster() {
  local port pid
  for port in "${!JB_CLUSTER_PIDS[@]}"; do
    pid=${JB_CLUSTER_PIDS[$port]}
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  for port in "${!JB_CLUSTER_PIDS[@]}"; do wait "${JB_CLUSTER_PIDS[$port]}" 2>/dev/null || true; done
}

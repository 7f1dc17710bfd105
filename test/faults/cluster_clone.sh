#!/usr/bin/env bash
# Two live clusters with one jobbuf identity on a Redis Cluster (redis+cluster://, three masters
# and three replicas): a pg_basebackup of the running original, started beside it with the copied
# postgresql.conf, while a stager commits one job per transaction on each side into three list
# queues whose keys ({hash tag}s) land on the three masters. The delivery lease lives in its own
# key's hash slot on one master: the original keeps delivering (its jobs arrive once each: lost 0,
# duplicated 0) and its links to every master live on; the clone finds the lease held before it
# fences, reads a marker or pushes on any node, delivers nothing, keeps its jobs staged and says
# so in one WARNING. After jobbuf_reset_identity() the clone delivers what it stages next.
# (Without a lease on a cluster, 1.3 before this fix: Redis got 20 of 40 jobs, both jobs tables
# were empty, the original lost 12 of its 20, and "already in Redis ... removed" was the only sign.)
source "$(dirname "$0")/tools/lib.sh"
source "$FAULTS_ROOT/test/harness/redis_cluster.sh"
CHECKS_NAME=cluster_clone
JOBS=${JB_FAULTS_CLONE_JOBS:-90}  # per side, spread over the three queues

jb_init_run_dir
trap faults_cleanup EXIT
on_exit jb_stop_redis_cluster
jb_start_redis_cluster || { fail "the cluster did not start"; faults_done; }
jb_start_postgres "jobbuf.redis_url = '$JB_CLUSTER_URL'
jobbuf.poll_interval = '200ms'" || exit 1
wait_worker_running 20 || fail "the drain worker did not start"
say "cluster: ${JB_CLUSTER_PORTS[*]} (seeds in the URL: $JB_CLUSTER_URL)"

# Any node, following redirections.
cr() { jb_cluster_cli -c -p "${JB_CLUSTER_PORTS[0]}" "$@"; }

QUEUES=(qa qb qc)
declare -A KEYS=([qa]='{t1}:jobs' [qb]='{t2}:jobs' [qc]='{t4}:jobs')
owners=()
for q in "${QUEUES[@]}"; do
  jb_sql "SELECT jobbuf_create_queue('$q', 'list', '{\"key\": \"${KEYS[$q]}\"}')" >/dev/null
  owners+=("$(jb_cluster_owner "${KEYS[$q]}")")
done
expect_eq "the three queues' keys land on the three masters" "$(printf '%s\n' "${owners[@]}" | sort -u | wc -l)" 3
jb_sql "SELECT jobbuf_stage(q, jsonb_build_object('side', 'original', 'n', -i))
        FROM unnest(ARRAY['qa', 'qb', 'qc']) WITH ORDINALITY AS t(q, i)" >/dev/null
wait_staged 0 || fail "the original's worker did not deliver its first jobs"
for q in "${QUEUES[@]}"; do
  expect_eq "queue $q's first job is on the master serving ${KEYS[$q]}" \
    "$(jb_cluster_cli -p "$(jb_cluster_owner "${KEYS[$q]}")" LLEN "${KEYS[$q]}")" 1
done

ID=$(jb_sql "SELECT jobbuf.installation_id()")
LEASE=jobbuf:lease:$ID
NAME=jobbuf-$ID
check "the lease is in its own key's slot, on the master serving it, naming the original" \
  jb_wait_until "jb_cluster_cli -p '$(jb_cluster_owner "$LEASE")' GET '$LEASE' | grep -q 'port $JB_PGPORT .*#[0-9;]*\$'" 10
# The original's links to the masters, as each master lists them ("port:id"; named by the fence,
# jobbuf-<identity>): a clone that fenced would kill them.
named_links() {
  local port
  for port in "${JB_CLUSTER_PORTS[@]}"; do
    jb_cluster_cli -p "$port" CLIENT LIST TYPE normal 2>/dev/null | tr -d '\r' |
      awk -v n="name=$NAME" -v p="$port" '{ for (i = 1; i <= NF; i++) if ($i == n) { sub(/^id=/, "", $1); print p ":" $1 } }'
  done | sort
}
links_before=$(named_links)
expect_eq "the original has a named (fenced) link to each master" \
  "$(cut -d: -f1 <<<"$links_before" | sort -u | grep -cxF -f <(printf '%s\n' "${owners[@]}"))" 3

mark=$(log_mark)
start_clone
expect_eq "the clone is a primary with the original's identity and Redis Cluster" \
  "$(clone_sql "SELECT pg_is_in_recovery() || ' ' || jobbuf.installation_id()") $(clone_sql "SHOW jobbuf.redis_url")" \
  "false $ID $JB_CLUSTER_URL"
check "the clone's worker finds the lease held and says so, naming both clusters" \
  jb_wait_until "grep -q 'WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity delivers its jobs to this Redis (host .* port $JB_PGPORT .*); this one (host .* port $CLONE_PORT' '$JB_RUN/clone.log'" 20

# One job per transaction on each side, at once; job i goes to queue i mod 3.
stager() {  # PSQL-FUNCTION SIDE
  "$1" "DO \$\$ BEGIN FOR i IN 1..$JOBS LOOP
          PERFORM jobbuf_stage((ARRAY['qa', 'qb', 'qc'])[i % 3 + 1], jsonb_build_object('side', '$2', 'n', i)); COMMIT;
          PERFORM pg_sleep(0.005);
        END LOOP; END \$\$" >/dev/null
}
stager jb_sql original & s1=$!
stager clone_sql clone & s2=$!
wait $s1 || fail "the original's stager"
wait $s2 || fail "the clone's stager"
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20
sleep 1   # the clone's worker runs several passes meanwhile
all_jobs() { local q; for q in "${QUEUES[@]}"; do cr LRANGE "${KEYS[$q]}" 0 -1; done; }
count_side() { all_jobs | ruby -rjson -e 'side = ARGV[0]; ns = STDIN.read.lines.map { |l| JSON.parse(l) }.select { |j| j["side"] == side }.map { |j| j["n"] }; puts "#{ns.size} #{ns.uniq.size}"' "$1"; }
read -r orig_total orig_distinct <<<"$(count_side original)"
say "original: $orig_total pushes, $orig_distinct distinct jobs of $(( JOBS + 3 )); clone: $(count_side clone | cut -d' ' -f1) pushes"
expect_eq "the original's jobs arrive once each (lost 0, duplicated 0)" "$orig_total $orig_distinct" "$(( JOBS + 3 )) $(( JOBS + 3 ))"
expect_eq "the clone delivered nothing" "$(count_side clone)" "0 0"
expect_eq "the clone keeps its jobs staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" "$JOBS"
expect_eq "one WARNING on the clone for the whole time" \
  "$(grep -c 'WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity' "$JB_RUN/clone.log")" 1
expect_eq "the clone never reconciled (no \"already in Redis\" on either side)" \
  "$(cat "$JB_RUN/clone.log" "$JB_RUN/postgres.log" | grep -c 'already in Redis' || true)" 0
expect_eq "the clone's status says it is not connected" \
  "$(clone_sql "SELECT redis_connected FROM jobbuf_worker_status()")" f
check "the lease still names the original" \
  jb_wait_until "jb_cluster_cli -p '$(jb_cluster_owner "$LEASE")' GET '$LEASE' | grep -q 'port $JB_PGPORT '" 5
links_after=$(named_links)
expect_eq "the clone fenced none of the original's links (each still listed by its master)" \
  "$(comm -23 <(echo "$links_before") <(echo "$links_after") | wc -l)" 0

# A clone meant to live on: a new identity, its carried jobs held, what it stages next delivered.
clone_sql "SELECT jobbuf_reset_identity()" >/dev/null
expect_eq "after jobbuf_reset_identity() the clone holds what it carried" \
  "$(clone_sql "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" "$JOBS"
clone_sql "SELECT jobbuf_stage('qb', '{\"side\": \"clone\", \"n\": \"new\"}')" >/dev/null
jb_sql "SELECT jobbuf_stage('qc', '{\"side\": \"original\", \"n\": \"after\"}')" >/dev/null
check "the clone delivers its new job, the original its own" \
  jb_wait_until '[ "$(count_side clone)" = "1 1" ] && [ "$(count_side original)" = "'$(( JOBS + 4 ))' '$(( JOBS + 4 ))'" ]' 20

expect_eq "the original was never disturbed (no jobbuf WARNING in its log since the clone started)" \
  "$(log_since "$mark" | grep -cE 'WARNING: +jobbuf:' || true)" 0

clone_ctl stop -m fast
faults_done

#!/usr/bin/env bash
# Redis Cluster (redis+cluster://) through a hand-made slot migration and a master's failover,
# with jobbuf.redis_min_replicas = 1:
#   three masters and three replicas (redis-cli --cluster create, append-only files on); sixteen
#   list queues whose keys land on all three masters; a backlog drains while a stager commits
#   one job per transaction; during the drain the slot of queue q01 (its list and its delivery
#   marker) is migrated to another master by hand (CLUSTER SETSLOT IMPORTING / MIGRATING,
#   MIGRATE, CLUSTER SETSLOT NODE): the worker follows ASK and TRYAGAIN, then MOVED; later
#   kill -9 of the master that serves queue q02, whose replica the cluster promotes; the killed
#   node comes back as a replica (its AOF replayed).
# Then every job committed in Postgres is compared with what each queue's key holds on the
# master that serves its slot now: lost, duplicated and phantom must all be 0.
source "$(dirname "$0")/tools/lib.sh"
source "$FAULTS_ROOT/test/harness/redis_cluster.sh"
CHECKS_NAME=cluster_resharding
BACKLOG=${JB_FAULTS_CLUSTER_BACKLOG:-100000}
QUEUES=16

jb_init_run_dir
trap faults_cleanup EXIT
on_exit jb_stop_redis_cluster
jb_start_redis_cluster || fail "the cluster did not start"
jb_start_postgres "jobbuf.redis_url = '$JB_CLUSTER_URL'
jobbuf.redis_min_replicas = 1
jobbuf.redis_timeout = '1s'
jobbuf.poll_interval = '200ms'
jobbuf.batch_size = 500" || exit 1
wait_worker_running 20 || fail "the drain worker did not start"
say "cluster: ${JB_CLUSTER_PORTS[*]} (seeds in the URL: $JB_CLUSTER_URL)"

queue() { printf 'q%02d' "$1"; }
owners=()
for i in $(seq 1 $QUEUES); do
  jb_sql "SELECT jobbuf_create_queue('$(queue "$i")', 'list')" >/dev/null
  owners+=("$(jb_cluster_owner "jobbuf:$(queue "$i")")")
done
expect_eq "the sixteen queues' keys land on the three masters" "$(printf '%s\n' "${owners[@]}" | sort -u | wc -l)" 3

jb_sql "SELECT jobbuf_stage('q01', '{\"n\": 0}')" >/dev/null
wait_staged 0 || fail "the worker did not deliver to the cluster"
expect_eq "delivered to the master serving q01's slot" "$(redis-cli -p "${owners[0]}" LLEN jobbuf:q01)" 1

# The committed jobs: 0, the backlog 1..BACKLOG (one transaction, spread over the queues), then
# the live stager's. Job n goes to queue q<(n mod 16) + 1>.
COMMITTED=$JB_RUN/committed
{ echo 0; seq 1 "$BACKLOG"; } >"$COMMITTED"
jb_sql "SELECT count(jobbuf_stage(pg_catalog.format('q%s', pg_catalog.lpad(((n % $QUEUES) + 1)::text, 2, '0')),
                                  jsonb_build_object('n', n)))
        FROM generate_series(1, $BACKLOG) n" >/dev/null
STOP=$JB_RUN/stop-stager
(
  n=$BACKLOG
  while [ ! -e "$STOP" ]; do
    n=$((n + 1))
    jb_sql "SELECT jobbuf_stage('q$(printf %02d $(( n % QUEUES + 1 )))', jsonb_build_object('n', $n, 'live', true))" \
      >/dev/null 2>&1 && echo "$n" >>"$COMMITTED.live"
  done
) &
track_pid $!

# Mid-drain: migrate q01's slot (its list and its marker) from its master to the next one.
SLOT=$(redis-cli -p "${owners[0]}" CLUSTER KEYSLOT jobbuf:q01)
SRC=${owners[0]}
DST=$(printf '%s\n' "${owners[@]}" | sort -u | grep -vx "$SRC" | head -n 1)
SRC_ID=$(redis-cli -p "$SRC" CLUSTER MYID); DST_ID=$(redis-cli -p "$DST" CLUSTER MYID)
jb_wait_until '[ "$(redis-cli -p "$SRC" LLEN jobbuf:q01)" -ge 1000 ]' 60 || fail "the drain did not start"
MARK=$(log_mark)
staged=$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'q01'")
say "migrating slot $SLOT (q01) from :$SRC to :$DST with $(redis-cli -p "$SRC" LLEN jobbuf:q01) jobs in its list, $staged still staged"
check "mid-drain (q01 still has staged jobs)" [ "$staged" -gt 0 ]
asking_calls() {
  local n
  n=$(redis-cli -p "$DST" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_asking:calls=\([0-9]*\).*/\1/p')
  echo "${n:-0}"
}
asked_before=$(asking_calls)
redis-cli -p "$DST" CLUSTER SETSLOT "$SLOT" IMPORTING "$SRC_ID" >/dev/null
redis-cli -p "$SRC" CLUSTER SETSLOT "$SLOT" MIGRATING "$DST_ID" >/dev/null
# One key at a time, so that the worker's units also meet the slot with its list on one node
# and its marker on the other (TRYAGAIN), then with both moved (ASK).
for _ in $(seq 1 50); do
  mapfile -t keys < <(redis-cli -p "$SRC" CLUSTER GETKEYSINSLOT "$SLOT" 1 | grep -v '^$')
  [ "${#keys[@]}" -gt 0 ] || break
  say "MIGRATE ${keys[*]} (list length $(redis-cli -p "$SRC" LLEN jobbuf:q01) on :$SRC)"
  redis-cli -p "$SRC" MIGRATE 127.0.0.1 "$DST" "" 0 5000 KEYS "${keys[@]}" >/dev/null
  sleep 0.3
done
# Everything moved, the slot still served by :$SRC: new jobs of q01 reach :$DST only by ASK.
jb_sql "SELECT count(jobbuf_stage('q01', jsonb_build_object('n', n))) FROM generate_series($BACKLOG + 1000000, $BACKLOG + 1000199) n" >/dev/null
seq $((BACKLOG + 1000000)) $((BACKLOG + 1000199)) >>"$COMMITTED"
jb_wait_until '[ "$(asking_calls)" -gt "$asked_before" ]' 30
check "the worker followed ASK to :$DST during the migration ($(asking_calls) ASKING)" [ "$(asking_calls)" -gt "$asked_before" ]
for port in "${JB_CLUSTER_PORTS[@]}"; do redis-cli -p "$port" CLUSTER SETSLOT "$SLOT" NODE "$DST_ID" >/dev/null 2>&1; done
expect_eq "q01's slot is served by :$DST now" "$(jb_cluster_owner jobbuf:q01)" "$DST"
# The worker's map still names :$SRC: the next units are answered MOVED.
jb_sql "SELECT count(jobbuf_stage('q01', jsonb_build_object('n', n))) FROM generate_series($BACKLOG + 2000000, $BACKLOG + 2000199) n" >/dev/null
seq $((BACKLOG + 2000000)) $((BACKLOG + 2000199)) >>"$COMMITTED"
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'q01'"' AND (payload->>'"'n'"')::bigint >= $BACKLOG + 2000000")" = 0 ]' 60 ||
  fail "q01 does not drain after its slot moved"

# Later: kill -9 of the master serving q02, mid-drain (a second backlog), with units in flight;
# the cluster promotes its replica.
VICTIM=${owners[1]}
q02_before=$(redis-cli -p "$VICTIM" LLEN jobbuf:q02)
jb_sql "SELECT count(jobbuf_stage(pg_catalog.format('q%s', pg_catalog.lpad(((n % $QUEUES) + 1)::text, 2, '0')),
                                  jsonb_build_object('n', n)))
        FROM generate_series($BACKLOG + 3000000, $BACKLOG + 3000000 + $BACKLOG / 2 - 1) n" >/dev/null
seq $((BACKLOG + 3000000)) $((BACKLOG + 3000000 + BACKLOG / 2 - 1)) >>"$COMMITTED"
jb_wait_until '[ "$(redis-cli -p "$VICTIM" LLEN jobbuf:q02)" -ge $((q02_before + 500)) ]' 60 || fail "the second drain did not start"
staged=$(jb_sql "SELECT count(*) FROM jobbuf.jobs")
say "kill -9 of master :$VICTIM (serves q02) with $staged jobs staged"
check "mid-drain (jobs still staged)" [ "$staged" -gt 0 ]
kill -9 "$(jb_cluster_node_pid "$VICTIM")"
promoted() { local o; o=$(jb_cluster_owner jobbuf:q02); [ -n "$o" ] && [ "$o" != "$VICTIM" ]; }
if jb_wait_until promoted 30; then
  pass "the cluster promoted a replica of :$VICTIM"
else
  fail "no replica of :$VICTIM was promoted"
fi
sleep 1
jb_cluster_start_node "$VICTIM" || fail "the killed node did not restart"
jb_wait_until jb_cluster_replicas_synced 30 || fail "the killed node did not rejoin as a replica"
jb_cluster_wait_ok 30 || fail "the cluster is not ok after the failover"
sleep 1   # the live stager keeps committing
touch "$STOP"
wait_for_drain() { [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]; }
jb_wait_until wait_for_drain 120 || fail "jobs still staged 120 s after the failover: $(jb_sql "SELECT count(*) FROM jobbuf.jobs")"
sleep 0.5
cat "$COMMITTED.live" >>"$COMMITTED" 2>/dev/null

# What each queue's key holds on the master that serves it now.
FOUND=$JB_RUN/found
: >"$FOUND"
for i in $(seq 1 $QUEUES); do
  key=jobbuf:$(queue "$i")
  owner=$(jb_cluster_owner "$key")
  redis-cli -p "$owner" LRANGE "$key" 0 -1 >>"$FOUND.json"
done
ruby -rjson -e 'STDIN.each_line { |l| puts JSON.parse(l)["n"] }' <"$FOUND.json" >"$FOUND"
count_delivery "$COMMITTED" "$FOUND"
say "committed $(wc -l <"$COMMITTED") jobs ($(wc -l <"$COMMITTED.live" 2>/dev/null || echo 0) by the live stager); the owners hold $(wc -l <"$FOUND")"
say "lost $lost, duplicated $duplicated, phantom $phantom"
say "jobbuf's WARNINGs: $(log_since "$MARK" | grep -E 'WARNING: +jobbuf:' | sed 's/.*WARNING: *jobbuf: //' | cut -c1-160 | paste -sd '|')"
expect_eq "lost" "$lost" 0
expect_eq "duplicated" "$duplicated" 0
expect_eq "phantom" "$phantom" 0
markers=$(for port in "${JB_CLUSTER_PORTS[@]}"; do redis-cli -p "$port" --scan --pattern 'jobbuf:marker:*' 2>/dev/null; done | sort -u | wc -l)
say "$markers delivery markers (one per slot a queue lives in), on the masters and their replicas"
expect_eq "the worker never restarted" \
  "$(count_lines 'jobbuf drain worker.*(exited|terminated)' "$(cat "$JB_RUN/postgres.log")")" 0
faults_done

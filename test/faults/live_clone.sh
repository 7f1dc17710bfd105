#!/usr/bin/env bash
# Two live clusters with one jobbuf identity, one Redis (docs/copies.md): a pg_basebackup of the
# running original, started beside it as a second primary with the copied postgresql.conf, while
# a stager commits one job per transaction on each side. The original keeps delivering (its jobs
# arrive once each: lost 0, duplicated 0); the clone sees the delivery lease held, delivers
# nothing, never fences or reconciles, and says so in one WARNING naming both clusters. After
# jobbuf_reset_identity() the clone holds what it carried and delivers what it stages next.
# (In 1.1 both fenced each other and deleted jobs whose ids the other delivered: 14 of 40 lost.)
source "$(dirname "$0")/tools/lib.sh"

JOBS=${JB_FAULTS_CLONE_JOBS:-150}
faults_start "" "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('twin', 'list')" >/dev/null
KEY=jobbuf:twin
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10
wait_staged 0 || fail "the original's worker did not commit job 0"

mark=$(log_mark)
start_clone
expect_eq "the clone is a primary with the original's identity and Redis" \
  "$(clone_sql "SELECT pg_is_in_recovery() || ' ' || jobbuf.installation_id()") $(clone_sql "SHOW jobbuf.redis_url")" \
  "false $(jb_sql "SELECT jobbuf.installation_id()") $(jb_sql "SHOW jobbuf.redis_url")"
check "the clone's worker finds the lease held and says so, naming both clusters" \
  jb_wait_until "grep -q 'WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity delivers its jobs to this Redis (host .* port $JB_PGPORT .*); this one (host .* port $CLONE_PORT' '$JB_RUN/clone.log'" 20

# One job per transaction on each side, at once.
stager() {  # PSQL-FUNCTION SIDE
  "$1" "DO \$\$ BEGIN FOR i IN 1..$JOBS LOOP
          PERFORM jobbuf_stage('twin', jsonb_build_object('side', '$2', 'n', i)); COMMIT;
          PERFORM pg_sleep(0.005);
        END LOOP; END \$\$" >/dev/null
}
stager jb_sql original & s1=$!
stager clone_sql clone & s2=$!
wait $s1 || fail "the original's stager"
wait $s2 || fail "the clone's stager"
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 20
sleep 1   # the clone's worker runs several passes meanwhile
count_side() { jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'side = ARGV[0]; ns = STDIN.read.lines.map { |l| JSON.parse(l) }.select { |j| j["side"] == side }.map { |j| j["n"] }; puts "#{ns.size} #{ns.uniq.size}"' "$1"; }
read -r orig_total orig_distinct <<<"$(count_side original)"
say "original: $orig_total pushes, $orig_distinct distinct jobs of $(( JOBS + 1 )); clone: $(count_side clone | cut -d' ' -f1) pushes"
expect_eq "the original's jobs arrive once each (lost 0, duplicated 0)" "$orig_total $orig_distinct" "$(( JOBS + 1 )) $(( JOBS + 1 ))"
expect_eq "the clone delivered nothing" "$(count_side clone)" "0 0"
expect_eq "the clone keeps its jobs staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" "$JOBS"
expect_eq "one WARNING on the clone for the whole time" \
  "$(grep -c 'WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity' "$JB_RUN/clone.log")" 1
expect_eq "the clone's status says it is not connected" \
  "$(clone_sql "SELECT redis_connected FROM jobbuf_worker_status()")" f

# A clone meant to live on: a new identity, its carried jobs held, what it stages next delivered.
clone_sql "SELECT jobbuf_reset_identity()" >/dev/null
expect_eq "after jobbuf_reset_identity() the clone holds what it carried" \
  "$(clone_sql "SELECT count(*) FROM jobbuf.jobs WHERE owner <> jobbuf.installation_id()")" "$JOBS"
clone_sql "SELECT jobbuf_stage('twin', '{\"side\": \"clone\", \"n\": \"new\"}')" >/dev/null
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": \"after\"}')" >/dev/null
check "the clone delivers its new job, the original its own" \
  jb_wait_until '[ "$(count_side clone)" = "1 1" ] && [ "$(count_side original)" = "'$(( JOBS + 2 ))' '$(( JOBS + 2 ))'" ]' 20

expect_eq "the original was never disturbed (no jobbuf WARNING in its log since the clone started)" \
  "$(log_since "$mark" | grep -cE 'WARNING: +jobbuf:' || true)" 0

clone_ctl stop -m fast
faults_done

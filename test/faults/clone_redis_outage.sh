#!/usr/bin/env bash
# A clone beside its original through a Redis outage longer than the delivery lease, with the
# original made to reconnect last (docs/copies.md): the lease lapses only while Redis is
# reachable, so the clone, back first, still finds the original's lease and stays held; the
# original refreshes it when it is back, keeps delivering (lost 0, duplicated 0), and the clone
# never reconciles (no "already in Redis ... removed"), never delivers. Redis keeps an
# append-only file, as in production; redis_timeout is 5 s (a lease of 10 s), the outage 12 s.
# (1.2: the lease's TTL ran out during the outage and the clone, reconnecting first, took it.)
source "$(dirname "$0")/tools/lib.sh"

faults_start "--appendonly yes --appendfsync always" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '5s'"
jb_sql "SELECT jobbuf_create_queue('twin', 'list')" >/dev/null
KEY=jobbuf:twin
jb_sql "SELECT jobbuf_stage('twin', '{\"side\": \"original\", \"n\": 0}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN "$KEY")" = 1 ]' 10 || fail "the original delivers job 0"
wait_staged 0 || fail "the original's worker did not commit job 0"

start_clone
check "the clone finds the lease held and says so" \
  jb_wait_until "grep -q 'WARNING: .*another PostgreSQL cluster with this database.s jobbuf installation identity' '$JB_RUN/clone.log'" 30
lease=$(jb_redis --scan --pattern 'jobbuf:lease:*' | head -n 1)
expect_match "the lease names the original" "$(jb_redis GET "$lease")" "port $JB_PGPORT "

# The original's drain worker is stopped (SIGSTOP) for the outage and until the clone has looked
# at the lease again after it: the original reconnects last.
original=$(worker_pid)
check "the original's drain worker ($original)" [ -n "$original" ]
kill -STOP "$original"
on_exit "kill -CONT $original 2>/dev/null"
kill -9 "$JB_REDIS_PID"; wait "$JB_REDIS_PID" 2>/dev/null
sleep 12   # longer than the lease's 10 s lifetime
jb_restart_redis || { fail "redis-server starts again"; faults_done; }
# The clone (the only script runner now: the original is stopped, the test runs none) looks at
# the lease every quarter of redis_timeout: wait for two looks.
evals() { jb_redis INFO commandstats | sed -n 's/^cmdstat_eval:calls=\([0-9]*\).*/\1/p'; }
check "the clone looked at the lease twice while the original was away" \
  jb_wait_until '[ "$(evals)" -ge 2 ] 2>/dev/null' 20
expect_match "... and left it to the original" "$(jb_redis GET "$lease")" "port $JB_PGPORT "
kill -CONT "$original"

# Both sides stage; the original delivers its own, the clone nothing.
jb_sql "SELECT count(jobbuf_stage('twin', jsonb_build_object('side', 'original', 'n', g))) FROM generate_series(1, 20) g" >/dev/null
clone_sql "SELECT count(jobbuf_stage('twin', jsonb_build_object('side', 'clone', 'n', g))) FROM generate_series(1, 20) g" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 30 || fail "the original delivers after the outage"
sleep 2   # the clone's worker looks at the lease several times meanwhile
count_side() { jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -e 'side = ARGV[0]; ns = STDIN.read.lines.map { |l| JSON.parse(l) }.select { |j| j["side"] == side }.map { |j| j["n"] }; puts "#{ns.size} #{ns.uniq.size}"' "$1"; }
expect_eq "the original's jobs arrive once each (lost 0, duplicated 0)" "$(count_side original)" "21 21"
expect_eq "the clone delivered nothing" "$(count_side clone)" "0 0"
expect_eq "the clone keeps its jobs staged" "$(clone_sql "SELECT count(*) FROM jobbuf.jobs")" 20
expect_match "the lease still names the original" "$(jb_redis GET "$lease")" "port $JB_PGPORT "
expect_eq "the clone never reconciled the original's unit" "$(grep -c 'already in Redis' "$JB_RUN/clone.log")" 0
faults_done

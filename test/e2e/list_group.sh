#!/usr/bin/env bash
# End-to-end: delivery 'group' on the `list` target (and a look at `stream`), consumed by a real
# Ruby batch consumer (test/consumers/ruby/list_group_consumer.rb: redis-rb + ruby-pg, two
# processes popping concurrently).
#
# Part 1, queue `lg` (key lg:groups, batch_size 50): 500 jobs committed in one transaction, next
# to rolled-back ones, become exactly 10 Redis list messages {"group_id": "...", "ids": [...]}
# (nothing else in them); each names exactly the jobs jobbuf_group returns, readable as soon as
# the message can be popped; the consumers complete them; every job exactly once, no rolled-back
# job, jobbuf.jobs empty, delivered_total 500.
# Part 2, queue `lgflaky` (visibility 60 s, batch_size 10): the consumer abandons the first delivery
# of each job; once the test expires the leases (an UPDATE of lease_until) the worker pushes a
# message with a NEW group id, attempts 1, and the jobs are completed exactly once.
# Part 3, queue `sg` (stream, visibility 60 s, no consumer): entries carry field payload
# {"group_id", "ids"}; an unfinished group is XADDed again with a new group id once the test
# expires its lease, and its entry's `id` field (the one consumers dedupe by) must then differ
# from the abandoned entry's. (Leases are expired on purpose, never waited out: a lease short
# enough to wait for could also run out while a slow machine is still working.)
# Part 4, queue `race`: with the worker's claim slow to commit, the group message must not be
# poppable before jobbuf_group can read the group.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh

CONSUMER=test/consumers/ruby/list_group_consumer.rb
source test/consumers/checks.sh

consumer_pids=()
stop_consumers() {
  [ -n "${JB_REDIS_PORT:-}" ] && jb_redis SET jobbuf_e2e:stop 1 >/dev/null 2>&1 || true
  for p in "${consumer_pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  consumer_pids=()
}
cleanup() {
  stop_consumers
  if [ "$failures" -ne 0 ] && [ -f "${JB_RUN:-/nonexistent}/consumer.err" ]; then
    echo "--- consumer stderr"; tail -n 30 "$JB_RUN/consumer.err"
  fi
  jb_stop_all
}

jb_start_redis
jb_start_postgres "jobbuf.poll_interval = '200ms'"
trap cleanup EXIT
trap 'exit 130' INT TERM

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('lg', 'list', '{"delivery": "group", "batch_size": 50, "key": "lg:groups"}');
SELECT jobbuf_create_queue('lgflaky', 'list', '{"delivery": "group", "batch_size": 10, "visibility": 60}');
SELECT jobbuf_create_queue('sg', 'stream', '{"delivery": "group", "batch_size": 5, "visibility": 60}');
SQL

RUN_LOG=$JB_RUN/consumed.jsonl
: >"$RUN_LOG"
for _ in 1 2; do
  REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0" PGHOST="$JB_PGHOST" PGPORT="$JB_PGPORT" PGUSER=postgres \
  PGDATABASE="$JB_DB" JOBBUF_CRASH_ONCE_KEYS=jobbuf:lgflaky \
    ruby "$CONSUMER" "$RUN_LOG" lg:groups jobbuf:lgflaky >>"$JB_RUN/consumer.out" 2>>"$JB_RUN/consumer.err" </dev/null &
  consumer_pids+=($!)
done
sleep 0.5
check "two consumer processes running" bash -c "kill -0 ${consumer_pids[0]} && kill -0 ${consumer_pids[1]}"


# ---------------------------------------------------------------- part 1
echo "# part 1: queue lg (list lg:groups), 500 committed jobs in one transaction, batch_size 50"
jb_psql -q >/dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('lg', jsonb_build_object('n', g, 'rolled_back', true)) FROM generate_series(1, 40) g;
ROLLBACK;
SQL
lg_ids=$JB_RUN/lg_ids
t0=$(date +%s.%N)
jb_psql -qtAX >"$lg_ids" <<'SQL'
BEGIN;
SELECT jobbuf_stage('lg', jsonb_build_object('n', g, 'text', 'job ' || g)) FROM generate_series(1, 250) g;
SAVEPOINT s;
SELECT jobbuf_stage('lg', jsonb_build_object('n', g, 'rolled_back', true)) FROM generate_series(3001, 3010) g \g /dev/null
ROLLBACK TO SAVEPOINT s;
SELECT jobbuf_stage('lg', ARRAY(SELECT jsonb_build_object('n', g, 'text', 'job ' || g) FROM generate_series(251, 500) g));
COMMIT;
SQL
jb_wait_until 'rb_log_check "runs.select { |r| r[\"key\"] == \"lg:groups\" && r[\"kind\"] == \"completed\" }.sum { |r| r[\"completed\"] } >= 500"' 20 || true
t1=$(date +%s.%N)
sleep 1   # a duplicate would show up here
echo "# 500 jobs completed in $(ruby -e 'printf("%.2f", ARGV[1].to_f - ARGV[0].to_f)' "$t0" "$t1") s;" \
     "messages: $(rb_log 'runs.count { |r| r["key"] == "lg:groups" }'), group sizes" \
     "$(rb_log 'runs.select { |r| r["key"] == "lg:groups" }.map { |r| r["jobs"].size }.join(",")'), by consumer" \
     "$(rb_log 'runs.select { |r| r["key"] == "lg:groups" }.group_by { |r| r["consumer"] }.map { |c, rs| rs.size }.join("+")')"
echo "# first message: $(rb_log 'r = runs.find { |r| r["key"] == "lg:groups" }; r ? r["raw"][0, 120] + "..." : "none"')"

check "staged ids read back (500)" [ "$(wc -l <"$lg_ids")" = 500 ]
check "exactly 10 messages for 500 jobs in one commit" rb_log_check 'runs.count { |r| r["key"] == "lg:groups" } == 10'
check "each message is a JSON object with exactly group_id (a uuid) and ids (50 ascending integers)" rb_log_check '
  m = runs.select { |r| r["key"] == "lg:groups" }.map { |r| JSON.parse(r["raw"]) }
  !m.empty? && m.all? { |x| x.keys.sort == %w[group_id ids] && x["group_id"].match?(/\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/) &&
    x["ids"].size == 50 && x["ids"].all?(Integer) && x["ids"] == x["ids"].sort }'
check "10 distinct group ids" rb_log_check 'runs.select { |r| r["key"] == "lg:groups" }.map { |r| r["group_id"] }.uniq.size == 10'
check "every message was readable at once: jobbuf_group non-empty on the first read (message not ahead of the claim commit)" \
  rb_log_check '!runs.any? { |r| r["key"] == "lg:groups" && r.key?("reread") }'
check "jobbuf_group returns exactly the message's ids, attempts 0" rb_log_check '
  m = runs.select { |r| r["key"] == "lg:groups" }
  !m.empty? && m.all? { |r| r["jobs"].map { |j| j["id"] } == r["ids"] && r["jobs"].all? { |j| j["attempts"] == 0 } }'
check "every committed job completed exactly once (ids and payloads)" ruby -rjson -e '
  runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }.select { |r| r["key"] == "lg:groups" }
  want = File.readlines(ARGV[1]).map(&:to_i)
  jobs = runs.select { |r| r["kind"] == "completed" }.flat_map { |r| r["jobs"] }
  problems = []
  problems << "completed counts differ from group sizes" unless runs.all? { |r| r["kind"] == "completed" && r["completed"] == r["jobs"].size }
  problems << "ids: #{jobs.size} processed, #{jobs.map { |j| j["id"] }.uniq.size} distinct" unless jobs.map { |j| j["id"] }.sort == want
  problems << "payloads differ" unless jobs.map { |j| j["payload"] }.sort_by { |p| p["n"] } == (1..500).map { |n| { "n" => n, "text" => "job #{n}" } }
  puts problems
  exit(problems.empty? ? 0 : 1)' "$RUN_LOG" "$lg_ids"
check "no job of a rolled-back transaction or savepoint was delivered" \
  rb_log_check '!runs.flat_map { |r| r["jobs"] }.any? { |j| j["payload"]["rolled_back"] }'
check "jobbuf.jobs empty for lg, nothing dead" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'lg'")/$(jb_sql "SELECT count(*) FROM jobbuf.dead")" = 0/0 ]
# (the worker counts a group's delivery after its push, in a transaction of its own)
jb_wait_until "[ \"\$(jb_sql \"SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'lg'\")\" -ge 500 ]" 15 || true
delivered=$(jb_sql "SELECT delivered_total FROM jobbuf_stats() WHERE queue = 'lg'")
check "jobbuf_stats: delivered_total 500 for lg (got $delivered)" [ "$delivered" = 500 ]
check "list lg:groups drained, default key jobbuf:lg unused" [ "$(jb_redis LLEN lg:groups)/$(jb_redis EXISTS jobbuf:lg)" = 0/0 ]

# ---------------------------------------------------------------- part 2
echo "# part 2: queue lgflaky (list jobbuf:lgflaky), 25 jobs, batch_size 10, visibility 60 s; first deliveries abandoned"
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_stage('lgflaky', jsonb_build_object('n', g)) FROM generate_series(1, 25) g;
SQL
jb_wait_until 'rb_log_check "runs.select { |r| r[\"key\"] == \"jobbuf:lgflaky\" && r[\"kind\"] == \"abandoned\" }.sum { |r| r[\"jobs\"].size } >= 25"' 20 || true
read -r expired_jobs expired_at <<<"$(jb_sql "WITH u AS (UPDATE jobbuf.jobs SET lease_until = now() WHERE queue = 'lgflaky' RETURNING 1)
  SELECT count(*) || ' ' || extract(epoch FROM now()) FROM u")"
check "the 25 abandoned jobs held their leases until the test expired them ($expired_jobs)" [ "$expired_jobs" = 25 ]
jb_wait_until 'rb_log_check "runs.select { |r| r[\"key\"] == \"jobbuf:lgflaky\" && r[\"kind\"] == \"completed\" }.sum { |r| r[\"completed\"] } >= 25"' 20 || true
sleep 1   # a third delivery would show up here
echo "# lgflaky: $(rb_log 'runs.count { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "abandoned" }') abandoned," \
     "$(rb_log 'runs.count { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "completed" }') completed," \
     "$(rb_log 'runs.count { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "empty" }') empty messages"
check "first deliveries: each of the 25 jobs once, attempts 0, abandoned" rb_log_check '
  a = runs.select { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "abandoned" }.flat_map { |r| r["jobs"] }
  a.map { |j| j["payload"]["n"] }.sort == (1..25).to_a && a.all? { |j| j["attempts"] == 0 }'
check "re-delivered under new group ids, attempts 1, last_error lease expired, completed exactly once" rb_log_check '
  a = runs.select { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "abandoned" }
  c = runs.select { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "completed" }
  jobs = c.flat_map { |r| r["jobs"] }
  (a.map { |r| r["group_id"] } & c.map { |r| r["group_id"] }).empty? &&
    jobs.map { |j| j["payload"]["n"] }.sort == (1..25).to_a && c.all? { |r| r["completed"] == r["jobs"].size } &&
    jobs.all? { |j| j["attempts"] == 1 && j["last_error"] == "lease expired" }'
check "no third delivery, no message for an empty group" rb_log_check '
  r = runs.select { |r| r["key"] == "jobbuf:lgflaky" }
  r.none? { |x| x["kind"] == "empty" } && r.flat_map { |x| x["jobs"] }.group_by { |j| j["id"] }.values.all? { |v| v.size == 2 }'
check "re-delivered only after the leases expired" rb_log_check "
  runs.select { |r| r['key'] == 'jobbuf:lgflaky' && r['kind'] == 'completed' }.all? { |r| r['at'] >= $expired_at }"
check "stale group ids fenced (jobbuf_complete 0, jobbuf_group empty)" rb_log_check '
  s = runs.select { |r| r["key"] == "jobbuf:lgflaky" && r["kind"] == "completed" }.flat_map { |r| r["stale"] || [] }
  !s.empty? && s.all? { |x| x["complete"] == 0 && x["group_rows"] == 0 }'
check "lgflaky: jobbuf.jobs empty, list drained" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'lgflaky'")/$(jb_redis LLEN jobbuf:lgflaky)" = 0/0 ]

stop_consumers
check "consumers exited on the stop key" true

# The entries of stream jobbuf:sg as JSON: [{"entry": "<stream id>", "id": "...", "payload": "..."}...]
stream_entries() {
  ruby -rjson -e '
    out = `redis-cli -p #{ARGV[0]} XRANGE jobbuf:sg - +`.lines.map(&:chomp)
    es = []; i = 0   # plain redis-cli output: the entry id, then field and value lines
    while i < out.size
      e = { "entry" => out[i] }; i += 1
      while i < out.size && out[i] !~ /\A\d+-\d+\z/
        e[out[i]] = out[i + 1]; i += 2
      end
      es << e
    end
    puts JSON.generate(es)' "$JB_REDIS_PORT"
}

# ---------------------------------------------------------------- part 3
echo "# part 3: queue sg (stream jobbuf:sg), 5 jobs, visibility 60 s, nobody completes the first group"
jb_sql "SELECT count(jobbuf_stage('sg', jsonb_build_object('n', g))) FROM generate_series(1, 5) g" >/dev/null
jb_wait_until '[ "$(jb_redis XLEN jobbuf:sg)" -ge 1 ]' 10 || true
entries=$(stream_entries)
echo "# jobbuf:sg first entry: $(ruby -rjson -e 'e = JSON.parse(ARGV[0]).first; puts e ? e.to_json : "none"' "$entries")"
check "stream: the entry's payload is {group_id, ids} with the 5 job ids" ruby -rjson -e '
  e = JSON.parse(ARGV[0]).first or exit 1
  p = JSON.parse(e["payload"])
  exit(p.keys.sort == %w[group_id ids] && p["ids"].size == 5)' "$entries"
gid1=$(ruby -rjson -e 'e = JSON.parse(ARGV[0]).first; print e ? JSON.parse(e["payload"])["group_id"] : ""' "$entries")
# (waits for the claim to be visible: a message ahead of its claim's commit is part 4's subject)
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf_group('${gid1:-00000000-0000-0000-0000-000000000000}')\")\" = 5 ]" 15 || true
check "stream: jobbuf_group reads the same 5 ids while the lease holds" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf_group('${gid1:-00000000-0000-0000-0000-000000000000}')")" = 5 ]
jb_sql "UPDATE jobbuf.jobs SET lease_until = now() - interval '1 second' WHERE group_id = '${gid1:-00000000-0000-0000-0000-000000000000}'" >/dev/null
jb_wait_until '[ "$(jb_redis XLEN jobbuf:sg)" -ge 2 ]' 15 || true
entries=$(stream_entries)
echo "# jobbuf:sg entries: $entries"
check "stream: the unfinished group is XADDed again after its lease, same ids, new group id" ruby -rjson -e '
  es = JSON.parse(ARGV[0]); exit 1 unless es.size >= 2
  a, b = es.map { |e| JSON.parse(e["payload"]) }
  exit(a["ids"] == b["ids"] && a["group_id"] != b["group_id"])' "$entries"
check "stream: the re-delivered entry has a new field id (a consumer deduping by id would drop it otherwise)" ruby -rjson -e '
  es = JSON.parse(ARGV[0]); exit(es.size >= 2 && es[0]["id"] != es[1]["id"])' "$entries"
gid2=$(ruby -rjson -e 'es = JSON.parse(ARGV[0]); print es.size >= 2 ? JSON.parse(es[1]["payload"])["group_id"] : ""' "$entries")
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE group_id = '${gid2:-00000000-0000-0000-0000-000000000000}'\")\" = 5 ]" 15 || true
check "stream: the new group completes its 5 jobs, the old one none" \
  [ "$(jb_sql "SELECT jobbuf_complete('${gid1:-00000000-0000-0000-0000-000000000000}')")/$(jb_sql "SELECT jobbuf_complete('${gid2:-00000000-0000-0000-0000-000000000000}')")" = 0/5 ]
check "stream: jobbuf.jobs empty for sg" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'sg'")" = 0 ]

# ---------------------------------------------------------------- part 4
# The group message must not reach Redis before the claim naming it is visible: a consumer that
# pops it at once and finds jobbuf_group empty cannot tell "not committed yet" from "never
# committed" (README: such a message "names a group that does not exist") and drops it; the jobs
# then sit claimed until the lease (300 s by default) runs out, which also costs them an attempt.
# The commit of the worker's claim is made to take 1 s here (a deferred trigger, standing for any
# commit latency: synchronous replication, a slow fsync, a checkpoint); the consumer reads the
# group at once and once more 200 ms later.
echo "# part 4: queue race (list jobbuf:race), 10 jobs; the worker's claim takes 1 s to commit"
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('race', 'list', '{"delivery": "group", "batch_size": 10}');
CREATE FUNCTION public.slow_claim_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER slow_claim_commit AFTER UPDATE ON jobbuf.jobs DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.queue = 'race' AND NEW.group_id IS NOT NULL AND OLD.group_id IS DISTINCT FROM NEW.group_id)
  EXECUTE FUNCTION public.slow_claim_commit();
SQL
jb_redis DEL jobbuf_e2e:stop >/dev/null
REDIS_URL="redis://127.0.0.1:$JB_REDIS_PORT/0" PGHOST="$JB_PGHOST" PGPORT="$JB_PGPORT" PGUSER=postgres \
PGDATABASE="$JB_DB" ruby "$CONSUMER" "$RUN_LOG" jobbuf:race >>"$JB_RUN/consumer.out" 2>>"$JB_RUN/consumer.err" </dev/null &
consumer_pids+=($!)
jb_wait_until '[[ "$(jb_redis CLIENT LIST)" == *cmd=blpop* ]]' 15 || true   # the consumer waits in BLPOP
jb_sql "SELECT count(jobbuf_stage('race', jsonb_build_object('n', g))) FROM generate_series(1, 10) g" >/dev/null
jb_wait_until 'rb_log_check "runs.select { |r| r[\"key\"] == \"jobbuf:race\" && r[\"kind\"] == \"completed\" }.sum { |r| r[\"completed\"] } >= 10"' 15 || true
echo "# race: $(rb_log 'runs.select { |r| r["key"] == "jobbuf:race" }.map { |r| "#{r["kind"]}, first read #{r.key?("reread") ? "empty, 200 ms later #{r["reread"]} rows" : "#{r["jobs"].size} rows"}" }.join("; ")');" \
     "in Postgres: $(jb_sql "SELECT count(*) || ' jobs claimed, lease ' || coalesce(round(extract(epoch FROM max(lease_until) - now()))::text, '-') || ' s left' FROM jobbuf.jobs WHERE queue = 'race'")"
check "race: the consumer found the group on its first read (message not pushed ahead of the claim's commit)" \
  rb_log_check 'r = runs.select { |r| r["key"] == "jobbuf:race" }; !r.empty? && r.none? { |x| x.key?("reread") }'
check "race: the 10 jobs were completed at once, not left claimed until the lease expires" \
  [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'race'")" = 0 ]
stop_consumers
jb_psql -q -c "DROP TRIGGER slow_claim_commit ON jobbuf.jobs" >/dev/null

if [ "$failures" -ne 0 ]; then
  echo "list_group: $failures check(s) failed"
  exit 1
fi
echo "list_group: all checks passed"

#!/usr/bin/env bash
# End-to-end: the `stream` target against a real Node.js consumer (ioredis, consumer group,
# XREADGROUP + XACK: test/consumers/node/stream_consumer.js). Jobs are staged in committed and
# rolled-back transactions to a stream queue without maxlen (default key) and one with maxlen and
# a custom key; each Node consumer must see every committed job exactly once, as XADD fields
# `id` (the job id) and `payload` (the payload's jsonb text), in job id order, and nothing else;
# XPENDING is 0 after its acks. A third queue with a small maxlen and no consumer shows that the
# stream is trimmed (MAXLEN ~).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/harness/servers.sh

source test/consumers/checks.sh

bash test/consumers/install.sh

NODE_PIDS=()
cleanup() {
  jb_stop_pids "${NODE_PIDS[@]}"
  jb_stop_all
}

# Small stream nodes, so that MAXLEN ~ trims close to the asked length.
jb_start_servers cleanup --stream-node-max-entries 10

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('events', 'stream');
SELECT jobbuf_create_queue('capped', 'stream', '{"maxlen": 1000, "key": "app:capped"}');
SELECT jobbuf_create_queue('tiny', 'stream', '{"maxlen": 20}');
SQL

# start_consumer NAME STREAM EXPECTED: background Node consumer, output in $JB_RUN/NAME.*
start_consumer() {
  local name=$1 stream=$2 expected=$3
  node "$ROOT/test/consumers/node/stream_consumer.js" --url "redis://127.0.0.1:$JB_REDIS_PORT/0" \
    --stream "$stream" --group node --consumer "$name-1" --expect "$expected" \
    --out "$JB_RUN/$name.jsonl" --timeout-ms 25000 --settle-ms 1500 \
    >"$JB_RUN/$name.stdout" 2>"$JB_RUN/$name.stderr" </dev/null &
  NODE_PIDS+=($!)
  eval "PID_$name=$!"
}

N_EVENTS=40
N_CAPPED=30
start_consumer events jobbuf:events "$N_EVENTS"
start_consumer capped app:capped "$N_CAPPED"
check "Node consumers started (consumer groups created)" \
  jb_wait_until '[ "$(cat "$JB_RUN/events.stdout" "$JB_RUN/capped.stdout" 2>/dev/null | grep -c ready)" = 2 ]' 15

# Staging: every statement that stages a committed job prints "id<TAB>expected payload text" to
# $JB_RUN/committed_<queue>.tsv; rolled-back ones go to $JB_RUN/rolled_back_<queue>.tsv.
for q in events capped; do
  n=$([ $q = events ] && echo $N_EVENTS || echo $N_CAPPED)
  # One transaction of n-9 jobs with varied payloads (escapes, unicode, numbers, null, nesting),
  # then 9 more in their own transactions: autocommit of non-object payloads, the array form,
  # a plain INSERT, and one kept across a rolled-back savepoint.
  jb_psql -qtAX -F $'\t' >"$JB_RUN/committed_$q.tsv" <<SQL
BEGIN;
SELECT jobbuf_stage('$q', p), p::text FROM (
  SELECT jsonb_build_object('n', g, 'queue', '$q', 'text', E'tab\tquote" back\\\\slash é ✓ ' || g,
                            'nested', jsonb_build_object('list', jsonb_build_array(g, g * 1.5, null, true))) AS p
  FROM generate_series(1, $n - 9) g) s;
COMMIT;
SELECT jobbuf_stage('$q', '{"n": "a1"}'), '{"n": "a1"}'::jsonb::text;
SELECT jobbuf_stage('$q', '[1, 2, 3]'), '[1, 2, 3]'::jsonb::text;
SELECT jobbuf_stage('$q', '"just a string"'), '"just a string"'::jsonb::text;
SELECT jobbuf_stage('$q', '42'), '42'::jsonb::text;
SELECT jobbuf_stage('$q', '{}'), '{}'::jsonb::text;
SELECT t.id, (ARRAY['{"n": "b1"}', '{"n": "b2"}']::jsonb[])[t.ord]::text
  FROM jobbuf_stage('$q', ARRAY['{"n": "b1"}', '{"n": "b2"}']::jsonb[]) WITH ORDINALITY AS t(id, ord);
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('$q', '{"n": "ins"}') RETURNING id, payload::text;
BEGIN;
SAVEPOINT s;
SELECT FROM jobbuf_stage('$q', '{"n": "sp-rolled-back"}');  -- an empty line; any delivery of it shows as unexpected
ROLLBACK TO SAVEPOINT s;
SELECT jobbuf_stage('$q', '{"n": "sp-kept"}'), '{"n": "sp-kept"}'::jsonb::text;
COMMIT;
SQL
  jb_psql -qtAX -F $'\t' >"$JB_RUN/rolled_back_$q.tsv" <<SQL
BEGIN;
SELECT jobbuf_stage('$q', jsonb_build_object('n', 'rb-' || g)), jsonb_build_object('n', 'rb-' || g)::text
  FROM generate_series(1, 10) g;
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('$q', '{"n": "rb-ins"}') RETURNING id, payload::text;
ROLLBACK;
SQL
  echo "# $q: staged $(grep -c . "$JB_RUN/committed_$q.tsv") committed and $(grep -c . "$JB_RUN/rolled_back_$q.tsv") rolled-back jobs"
done

# Trimming: 200 jobs to a maxlen-20 stream nobody reads.
tiny_last=$(jb_sql "SELECT max(id) FROM (SELECT jobbuf_stage('tiny', jsonb_build_object('n', g)) AS id
                                         FROM generate_series(1, 200) g) s")

wait_consumer() {  # wait_consumer NAME: waits for the process, returns its exit status
  local pid_var=PID_$1
  local pid=${!pid_var} status=0
  jb_wait_until "! kill -0 $pid 2>/dev/null" 30 || true
  wait "$pid" || status=$?
  return $status
}

# The first 8 hex digits of every uid: this installation's identity (jobbuf.installation_id()).
UID_PREFIX=$(jb_sql "SELECT substr(replace(jobbuf.installation_id()::text, '-', ''), 1, 8)")

# verify NAME: prints the problems; exit 0 when the consumer saw exactly the committed jobs,
# each once, with the payload text as staged, and only the fields id, uid and payload, the uid
# being the identity's prefix and the id in 16 hex digits.
verify() {
  ruby -rjson -e '
    seen_file, committed_file, rolled_back_file, uid_prefix = ARGV
    want = File.readlines(committed_file, chomp: true).reject(&:empty?).map { |l| l.split("\t", 2) }
    rb_ids = File.readlines(rolled_back_file, chomp: true).reject(&:empty?).map { |l| l.split("\t", 2)[0] }
    seen = File.exist?(seen_file) ? File.readlines(seen_file).map { |l| JSON.parse(l) } : []
    seen.each { |e| e["id"], e["payload"] = e["fields"].values_at("id", "payload") }  # the XADD fields themselves
    problems = []
    problems << "no committed job recorded at staging" if want.empty?
    problems << "no rolled-back job recorded at staging" if rb_ids.empty?
    seen.each do |e|
      problems << "entry #{e["stream_id"]} has fields #{e["fields"].keys.inspect}" unless e["fields"].keys == %w[id uid payload]
      want_uid = uid_prefix + format("%016x", e["id"].to_i)
      problems << "entry #{e["stream_id"]}: uid #{e["fields"]["uid"].inspect}, expected #{want_uid}" unless e["fields"]["uid"] == want_uid
    end
    seen_ids = seen.map { |e| e["id"] }
    want.each do |id, payload|
      hits = seen.select { |e| e["id"] == id }
      if hits.size != 1
        problems << "job #{id} seen #{hits.size} times"
      elsif hits[0]["payload"] != payload
        problems << "job #{id}: payload #{hits[0]["payload"].inspect}, expected #{payload.inspect}"
      end
    end
    (seen_ids - want.map(&:first)).uniq.each { |id| problems << "unexpected entry id=#{id.inspect}" }
    (seen_ids & rb_ids).each { |id| problems << "rolled-back job #{id} was delivered" }
    problems << "entries not in job id order" unless seen_ids.map(&:to_i) == seen_ids.map(&:to_i).sort
    puts problems.first(10).map { |p| "#   #{p}" }
    exit(problems.empty? ? 0 : 1)' "$JB_RUN/$1.jsonl" "$JB_RUN/committed_$1.tsv" "$JB_RUN/rolled_back_$1.tsv" "$UID_PREFIX"
}

for c in events capped; do
  stream=$([ $c = events ] && echo jobbuf:events || echo app:capped)
  n=$([ $c = events ] && echo $N_EVENTS || echo $N_CAPPED)
  status=0; wait_consumer $c || status=$?
  echo "# node consumer $c: exit $status, $(tail -n 1 "$JB_RUN/$c.stdout" 2>/dev/null)"
  if [ -s "$JB_RUN/$c.stderr" ]; then sed 's/^/#   /' "$JB_RUN/$c.stderr" | head -20; fi
  check "$c: node consumer exited 0 (saw its $n entries before its timeout)" [ "$status" = 0 ]
  check "$c: Node saw each of the $n committed jobs exactly once (id and payload), no rolled-back job, in id order" \
    verify $c
  pending=$(jb_redis XPENDING "$stream" node | head -n 1)
  check "$c: XPENDING $stream node is 0 after the acks (got $pending)" [ "$pending" = 0 ]
  check "$c: XLEN $stream is $n" [ "$(jb_redis XLEN "$stream")" = "$n" ]
done
check "key option: nothing written to the default key jobbuf:capped" [ "$(jb_redis EXISTS jobbuf:capped)" = 0 ]

jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '"'"'tiny'"'"'")" = 0 ]' 15 || true
tiny_len=$(jb_redis XLEN jobbuf:tiny)
tiny_newest=$(jb_redis XREVRANGE jobbuf:tiny + - COUNT 1 | sed -n 3p)
echo "# tiny: XLEN $tiny_len after 200 XADDs with maxlen 20; newest entry's id field $tiny_newest (last job $tiny_last)"
check "maxlen: the stream is trimmed (20 <= XLEN <= 40)" test "$tiny_len" -ge 20 -a "$tiny_len" -le 40
check "maxlen: the newest entry is the last job staged" [ "$tiny_newest" = "$tiny_last" ]

if [ "$failures" -ne 0 ]; then
  echo "node_stream: $failures check(s) failed"
  exit 1
fi
echo "node_stream: all checks passed"

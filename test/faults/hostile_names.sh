#!/usr/bin/env bash
# Names and options built to inject SQL or Redis commands:
#   - queue names with quotes, semicolons, spaces, CR/LF, too long, non-ASCII, empty: refused by
#     jobbuf_create_queue and jobbuf_stage with a clear error, and the SQL in them never runs;
#   - a key option "k\r\nFLUSHALL\r\n" (and a stream key with spaces and quotes, a Sidekiq
#     namespace with a RESP frame in it): accepted and passed as ONE binary-safe argument — the
#     key exists literally in Redis and nothing was flushed;
#   - a payload string carrying a RESP frame arrives as data.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'"
jb_sql "CREATE TABLE x (i int); INSERT INTO x VALUES (1)" >/dev/null
jb_redis SET sentinel "still here" >/dev/null

for name in "a'; DROP TABLE x; --" "a\"; DROP TABLE x; --" "a b" $'a\r\nFLUSHALL' "" \
    "$(printf 'q%.0s' $(seq 1 64))" "é" "a/b" "a*" '$(reboot)'; do
  lit=$(jb_sql "SELECT quote_literal(\$jbq\$$name\$jbq\$)")
  [ -n "$lit" ] || lit="''"
  out=$(jb_psql -qtAX -c "SELECT jobbuf_create_queue($lit, 'list')" 2>&1)
  if [ $? -ne 0 ] && [[ $out =~ "invalid queue name" ]]; then
    pass "queue name $(printf '%q' "$name" | cut -c1-40) refused: $(head -n 1 <<<"$out" | sed 's/ERROR: *//' | cut -c1-70)"
  else
    fail "queue name $(printf '%q' "$name"): expected 'invalid queue name', got: $out"
  fi
  out=$(jb_psql -qtAX -c "SELECT jobbuf_stage($lit, '{}')" 2>&1)
  if [ $? -ne 0 ]; then pass "jobbuf_stage refuses it too"; else fail "jobbuf_stage($lit) succeeded: $out"; fi
done
expect_eq "table x survived" "$(jb_sql "SELECT count(*) FROM x")" 1
expect_eq "no queue was created" "$(jb_sql "SELECT count(*) FROM jobbuf.queues")" 0

# Keys and namespaces that look like RESP frames or shell/Redis syntax.
jb_sql "SELECT jobbuf_create_queue('crlf', 'list', jsonb_build_object('key', E'k\\r\\nFLUSHALL\\r\\n'))" >/dev/null
jb_sql "SELECT jobbuf_create_queue('quoted', 'stream', jsonb_build_object('key', 'a b \"c\" ''d'' *'))" >/dev/null
jb_sql "SELECT jobbuf_create_queue('nsq', 'sidekiq', jsonb_build_object('namespace', E'ns\\r\\n*1\\r\\n\$8\\r\\nFLUSHALL\\r\\n'))" >/dev/null
jb_sql "SELECT jobbuf_stage('crlf', jsonb_build_object('s', E'\\r\\n*1\\r\\n\$8\\r\\nFLUSHALL\\r\\n')),
               jobbuf_stage('crlf', '{\"n\": 2}'),
               jobbuf_stage('quoted', '{\"n\": 1}'),
               jobbuf_stage('nsq', '{\"class\": \"HardJob\", \"args\": [1]}')" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 10
sleep 0.3
expect_eq "all jobs left jobbuf.jobs, none dead" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(jb_sql "SELECT count(*) FROM jobbuf.dead")" "0 0"
expect_eq "the sentinel key survived (nothing was flushed)" "$(jb_redis GET sentinel)" "still here"
expect_eq "the list key with CR/LF exists literally, with both jobs" "$(printf 'k\r\nFLUSHALL\r\n' | jb_redis -x LLEN)" 2
say "keys in Redis:"
jb_redis --no-raw KEYS '*' | sed -E 's/^ *[0-9]+\) /      /' | LC_ALL=C sort
first=$(printf 'k\r\nFLUSHALL\r\n' | jb_redis -x EVAL 'return redis.call("LINDEX", ARGV[1], 0)' 0)
expect_eq "the payload with a RESP frame arrived as JSON text" "$first" '{"s": "\r\n*1\r\n$8\r\nFLUSHALL\r\n"}'
expect_eq "the stream key with spaces and quotes exists literally" "$(jb_redis XLEN "a b \"c\" 'd' *")" 1
expect_eq "the Sidekiq namespace with a RESP frame is one key prefix" \
  "$(printf 'ns\r\n*1\r\n$8\r\nFLUSHALL\r\n:queue:nsq' | jb_redis -x LLEN)" 1
# sentinel, the CR/LF list, the stream, the namespaced Sidekiq queue and queues set, the marker,
# the delivery lease
expect_eq "no other keys appeared" "$(jb_redis DBSIZE)" 7
faults_done

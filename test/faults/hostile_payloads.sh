#!/usr/bin/env bash
# Payloads at the edges, and a Redis key of the wrong type:
#   - a 1-byte payload (the JSON number 1) arrives as "1";
#   - a 100 MB payload (a jsonb string built server-side with repeat()) arrives intact: exact
#     length, prefix and suffix checked inside Redis (Lua), never copied to the test;
#   - the list key of one queue holds a string (WRONGTYPE): its jobs go to jobbuf.dead with the
#     WRONGTYPE error, another queue staged at the same time is delivered, the worker keeps its
#     pid; after the key is removed, jobbuf_retry_dead delivers them.
source "$(dirname "$0")/tools/lib.sh"

BIG_MB=${JB_FAULTS_BIG_MB:-100}
faults_start "" "jobbuf.poll_interval = '200ms'"
pid=$(worker_pid)
jb_sql "SELECT jobbuf_create_queue('tiny', 'list'), jobbuf_create_queue('big', 'list'),
               jobbuf_create_queue('wt', 'list'), jobbuf_create_queue('ok', 'list')" >/dev/null

# --- 1 byte
jb_sql "SELECT jobbuf_stage('tiny', '1'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:tiny)" = 1 ]' 15
expect_eq "1-byte payload delivered as the single byte 1" "$(jb_redis LLEN jobbuf:tiny) $(jb_redis LINDEX jobbuf:tiny 0) $(jb_redis EVAL "return string.len(redis.call('LINDEX', KEYS[1], 0))" 1 jobbuf:tiny)" "1 1 1"

# --- 100 MB: {"s": "<abc...>"}; the string repeats 'abcdefghij' and ends with 'END'.
reps=$(( BIG_MB * 1024 * 1024 / 10 ))
expected_len=$(( reps * 10 + 3 + 9 ))   # {"s": "  +  "}  = 9 characters around the string
t0=$(now_ms)
jb_sql "SELECT jobbuf_stage('big', jsonb_build_object('s', repeat('abcdefghij', $reps) || 'END'))" >/dev/null
say "staged a ${BIG_MB} MB payload in $(( $(now_ms) - t0 )) ms"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:big)" = 1 ]' 60; then
  pass "100 MB payload delivered ($(( $(now_ms) - t0 )) ms after staging began)"
else
  fail "100 MB payload not in Redis after 60 s (last_error: $(jb_sql "SELECT last_error FROM jobbuf_worker_status()"))"
fi
lua='local v = redis.call("LINDEX", KEYS[1], 0)
return {string.len(v), string.sub(v, 1, 17), string.sub(v, -8), redis.sha1hex(v)}'
got=$(jb_redis EVAL "$lua" 1 jobbuf:big | tr '\n' ' ')
expected_sha=$(ruby -e 'print "{\"s\": \"" + "abcdefghij" * Integer(ARGV[0]) + "END\"}"' "$reps" | sha1sum | cut -c1-40)
expect_eq "100 MB payload intact (length, head, tail, sha1)" "$got" "$expected_len {\"s\": \"abcdefghij hijEND\"} $expected_sha "
wait_staged 0 || fail "the worker did not commit the big one"   # it pushes first, then commits
expect_eq "jobbuf.jobs empty after the big one" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
jb_redis DEL jobbuf:big >/dev/null

# --- WRONGTYPE
jb_redis SET jobbuf:wt "a string, not a list" >/dev/null
mark=$(log_mark)
jb_sql "SELECT count(jobbuf_stage(q, jsonb_build_object('n', g))) FROM generate_series(1, 3) g, unnest(ARRAY['wt', 'ok']) q" >/dev/null
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" = 3 ] && [ "$(jb_redis LLEN jobbuf:ok)" = 3 ]' 15
wait_staged 0 || fail "the worker did not commit the batch of queue ok"   # it pushes first, then commits
expect_eq "the 3 jobs of the WRONGTYPE queue are dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead WHERE queue = 'wt'")" 3
expect_eq "with the WRONGTYPE error text" "$(jb_sql "SELECT count(*) FROM jobbuf.dead WHERE queue = 'wt' AND last_error LIKE '%WRONGTYPE%'")" 3
say "dead letter error: $(jb_sql "SELECT last_error FROM jobbuf.dead WHERE queue = 'wt' LIMIT 1")"
expect_eq "the other queue staged alongside is delivered" "$(jb_redis LRANGE jobbuf:ok 0 -1 | tr '\n' ' ')" '{"n": 1} {"n": 2} {"n": 3} '
expect_eq "the string key is untouched" "$(jb_redis GET jobbuf:wt)" "a string, not a list"
expect_eq "nothing left staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_le "at most one jobbuf WARNING for it" "$(count_lines 'WARNING: +jobbuf:' "$(log_since "$mark")")" 1
expect_eq "jobbuf_stats counts the failures" "$(jb_sql "SELECT failed_total FROM jobbuf_stats() WHERE queue = 'wt'")" 3
jb_redis DEL jobbuf:wt >/dev/null
expect_eq "jobbuf_retry_dead after the key is fixed" "$(jb_sql "SELECT jobbuf_retry_dead('wt')")" 3
jb_wait_until '[ "$(jb_redis LLEN jobbuf:wt)" = 3 ]' 15
expect_eq "the retried jobs are delivered once, in order" "$(jb_redis LRANGE jobbuf:wt 0 -1 | tr '\n' ' ')" '{"n": 1} {"n": 2} {"n": 3} '
jb_sql "SELECT jobbuf_stage('ok', '{\"n\": 4}')" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:ok)" = 4 ]' 15
expect_eq "the worker goes on delivering" "$(jb_redis LLEN jobbuf:ok)" 4
expect_eq "the worker kept its pid" "$(worker_pid)" "$pid"
faults_done

#!/usr/bin/env bash
# Large payloads cannot wedge a queue or the worker (Redis here accepts bulk strings of at most
# 4 MB: proto-max-bulk-len 4mb, so that the test stays small):
#   - 1,000 jobs of 1 MB, staged while their queue is paused, then resumed: all delivered once,
#     in order, by batches bounded by jobbuf.batch_max_bytes; the worker's peak memory (VmHWM
#     in /proc/<pid>/status) is printed and bounded (a batch of 1,000 of them held the whole
#     gigabyte several times over: out of memory on every retry);
#   - one job of 5 MB, over what Redis accepts: in jobbuf.dead with an error naming the size and
#     proto-max-bulk-len, never sent (Redis would have closed the connection: an outage loop);
#     a small job staged after it in the same queue, and one in another queue, are delivered;
#     exactly one log line for the problem; the worker keeps its pid;
#   - 100 jobs of 1 MB taken by the SQL statement (the table has an owner's DELETE trigger): the
#     statement cannot stop at the byte bound, so a batch that overflows it is taken again with
#     fewer rows; all delivered once, in order, each deletion seen by the trigger;
#   - the same job when Redis's limit cannot be read (an ACL user without CONFIG): Redis refuses
#     it with a protocol error and closes the connection once; the worker learns the limit from
#     that and dead-letters the job instead of retrying it forever.
source "$(dirname "$0")/tools/lib.sh"

MB=1048576
faults_start "--proto-max-bulk-len 4mb --loglevel verbose" "jobbuf.poll_interval = '200ms'"
pid=$(worker_pid)
jb_sql "SELECT jobbuf_create_queue('bulk', 'list'), jobbuf_create_queue('big', 'list'),
               jobbuf_create_queue('other', 'list')" >/dev/null

# --- 1,000 jobs of 1 MB ({"n": <n>, "s": "<1 MB>"}), one backlog
jb_sql "SELECT jobbuf_pause('bulk')" >/dev/null
for first in 1 201 401 601 801; do
  jb_sql "SELECT count(jobbuf_stage('bulk', jsonb_build_object('n', g, 's', repeat(chr(97 + g % 26), $MB))))
          FROM generate_series($first, $first + 199) g" >/dev/null
done
expect_eq "1,000 jobs of 1 MB staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'bulk'")" 1000
jb_sql "SELECT jobbuf_resume('bulk')" >/dev/null
expect_delivered "the 1,000 jobs of 1 MB are delivered" jobbuf:bulk 1000 300
peak_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
say "worker memory: peak VmHWM $(( peak_kb / 1024 )) MB ($(grep -E '^(VmRSS|RssAnon|RssShmem):' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' '))"
# The peak includes the shared buffers the worker touched (128 MB); 1,000 jobs are 1 GB of text.
expect_le "the worker's peak memory stays bounded (MB)" "$(( peak_kb / 1024 ))" 400
lua='local n = {} local bad = 0
for i, v in ipairs(redis.call("LRANGE", KEYS[1], 0, -1)) do
  if string.len(v) ~= 1048592 + string.len(tostring(i)) then bad = bad + 1 end
  n[#n + 1] = string.match(string.sub(v, 1, 20), "^{\"n\": (%d+),")
end
return {table.concat(n, ","), bad}'
got=$(jb_redis EVAL "$lua" 1 jobbuf:bulk | tr '\n' ' ')
expect_eq "each job once, in id order, intact" "$got" "$(seq -s, 1 1000) 0 "
expect_eq "nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0
jb_redis UNLINK jobbuf:bulk >/dev/null
# The EVAL above held Redis for as long as it read 1 GB: a command the worker sent meanwhile (its
# lease) may have timed out, with a WARNING and a LOG when it reconnects. A job delivered after it
# orders those lines before the mark below.
jb_sql "SELECT jobbuf_stage('bulk', '{\"probe\": 1}')" >/dev/null
expect_delivered "the worker delivers again after the check" jobbuf:bulk 1 30
jb_redis UNLINK jobbuf:bulk >/dev/null

# --- one job larger than Redis accepts, then a small one in its queue and one elsewhere
big_job() {
  jb_sql "SELECT jobbuf_stage('big', jsonb_build_object('s', repeat('y', 5 * $MB)))"
}
mark=$(log_mark)
big_id=$(big_job)
small_id=$(jb_sql "SELECT jobbuf_stage('big', '{\"small\": 1}')")
jb_sql "SELECT jobbuf_stage('other', '{\"other\": 1}')" >/dev/null
expect_delivered "the small job staged after the big one is delivered" jobbuf:big 1 10
expect_eq "it is the small job" "$(jb_redis LRANGE jobbuf:big 0 -1)" '{"small": 1}'
jb_wait_until '[ "$(jb_redis LLEN jobbuf:other)" = 1 ]' 10
expect_eq "the other queue is delivered" "$(jb_redis LRANGE jobbuf:other 0 -1)" '{"other": 1}'
expect_eq "the big job is in jobbuf.dead" "$(jb_sql "SELECT id FROM jobbuf.dead WHERE queue = 'big'")" "$big_id"
error=$(jb_sql "SELECT last_error FROM jobbuf.dead WHERE id = $big_id")
say "its error: $error"
expect_match "its error names its size and Redis's limit" "$error" "5242889 bytes.*proto-max-bulk-len 4194304"
expect_eq "nothing left staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
sleep 1  # any further line about it would be logged by now (poll_interval 200ms)
problem_lines=$(log_since "$mark" | grep -E '(WARNING|ERROR|LOG): +jobbuf' || true)
expect_eq "exactly one log line for the problem" "$(grep -c . <<<"$problem_lines" || true)" 1
say "the line: $(sed -E 's/.*(WARNING|ERROR|LOG): +//' <<<"$problem_lines" | head -n 1)"
expect_eq "Redis never closed the worker's connection" \
  "$(grep -c 'Protocol error' "$JB_RUN/redis/redis.log" || true)" 0
expect_eq "the worker kept its pid" "$(worker_pid)" "$pid"

# --- the SQL path: an owner's DELETE trigger makes the worker take batches with its statement
jb_psql -q -c "CREATE TABLE public.deleted_jobs (id bigint);
CREATE FUNCTION public.note_deleted() RETURNS trigger LANGUAGE plpgsql AS
  \$\$ BEGIN INSERT INTO public.deleted_jobs VALUES (OLD.id); RETURN OLD; END \$\$;
CREATE TRIGGER note_deleted AFTER DELETE ON jobbuf.jobs FOR EACH ROW EXECUTE FUNCTION public.note_deleted();" >/dev/null
jb_sql "SELECT jobbuf_pause('bulk')" >/dev/null
jb_sql "SELECT count(jobbuf_stage('bulk', jsonb_build_object('n', g, 's', repeat(chr(97 + g % 26), $MB))))
        FROM generate_series(1, 100) g" >/dev/null
jb_sql "SELECT jobbuf_resume('bulk')" >/dev/null
expect_delivered "SQL path: the 100 jobs of 1 MB are delivered" jobbuf:bulk 100 120
got=$(jb_redis EVAL "$lua" 1 jobbuf:bulk | tr '\n' ' ')
expect_eq "SQL path: each job once, in id order, intact" "$got" "$(seq -s, 1 100) 0 "
expect_eq "SQL path: the trigger saw each deletion once" "$(jb_sql "SELECT count(DISTINCT id) || ' ' || count(*) FROM public.deleted_jobs")" "100 100"
peak_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
say "worker memory after the SQL path: peak VmHWM $(( peak_kb / 1024 )) MB"
expect_le "the worker's peak memory stays bounded on the SQL path too (MB)" "$(( peak_kb / 1024 ))" 400
jb_psql -q -c "DROP TRIGGER note_deleted ON jobbuf.jobs" >/dev/null
jb_redis DEL jobbuf:bulk >/dev/null

# --- the same when the worker cannot read proto-max-bulk-len (ACL: no CONFIG)
jb_redis ACL SETUSER jbuser on '>jbpass' '~*' '&*' +@all -config >/dev/null
jb_psql -q -c "ALTER SYSTEM SET jobbuf.redis_url = 'redis://jbuser:jbpass@127.0.0.1:$JB_REDIS_PORT/0'" \
  -c "SELECT pg_reload_conf()" >/dev/null
jb_wait_until '[ -n "$(jb_redis CLIENT LIST | grep "user=jbuser")" ]' 10
check "the worker connected as the user without CONFIG" [ -n "$(jb_redis CLIENT LIST | grep 'user=jbuser')" ]
jb_sql "SELECT jobbuf_purge_dead('big')" >/dev/null
jb_redis DEL jobbuf:big >/dev/null
mark=$(log_mark)
big_id=$(big_job)
jb_sql "SELECT jobbuf_stage('big', '{\"small\": 2}')" >/dev/null
expect_delivered "the small job behind it is delivered" jobbuf:big 1 10
# The small job reaches Redis before the batch's transaction (which also moves the big one) commits.
check "the big job is in jobbuf.dead" \
  jb_wait_until "[ \"\$(jb_sql \"SELECT id FROM jobbuf.dead WHERE queue = 'big'\")\" = $big_id ]" 10
say "its error: $(jb_sql "SELECT last_error FROM jobbuf.dead WHERE id = $big_id")"
expect_eq "Redis closed the connection for it once, not in a loop" \
  "$(grep -c 'Protocol error' "$JB_RUN/redis/redis.log" || true)" 1
sleep 1
expect_le "at most two warnings (the refusal, the dead letter)" \
  "$(count_lines 'WARNING: +jobbuf' "$(log_since "$mark")")" 2
expect_eq "the worker kept its pid" "$(worker_pid)" "$pid"

# --- proto-max-bulk-len lowered after the worker read it: one problem, at most three lines (the
# refusal, its end, the dead letter)
jb_psql -q -c "ALTER SYSTEM RESET jobbuf.redis_url" -c "SELECT pg_reload_conf()" >/dev/null
jb_wait_until '[ -z "$(jb_redis CLIENT LIST | grep "user=jbuser")" ] && [ -n "$(jb_redis CLIENT LIST | grep "user=default.*name=jobbuf")" ]' 10
jb_sql "SELECT jobbuf_stage('big', '{\"small\": 3}')" >/dev/null
expect_delivered "the worker is connected as the default user again (it read the 4 MB limit)" jobbuf:big 2 10
jb_redis CONFIG SET proto-max-bulk-len 2mb >/dev/null
mark=$(log_mark)
lowered_id=$(jb_sql "SELECT jobbuf_stage('big', jsonb_build_object('s', repeat('z', 3 * $MB)))")
jb_sql "SELECT jobbuf_stage('big', '{\"small\": 4}')" >/dev/null
expect_delivered "the small job behind it is delivered" jobbuf:big 3 10
check "the 3 MB job is in jobbuf.dead" \
  jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.dead WHERE id = $lowered_id\")\" = 1 ]" 10
lowered_log=$(log_since "$mark" | grep 'jobbuf:')
expect_le "at most three log lines for it" "$(grep -c . <<<"$lowered_log")" 3
sed -E 's/^[^]]*\] /    log: /' <<<"$lowered_log"
jb_redis CONFIG SET proto-max-bulk-len 4mb >/dev/null
faults_done

#!/usr/bin/env bash
# Redis URLs that are well-formed but cannot work, discovered only at run time:
#   - an unroutable address (redis://10.255.255.1:6379, redis_timeout 300ms; note: in sandboxes
#     with a transparent egress proxy something answers there, with HTTP);
#   - a server that accepts connections and never answers (a listener that never accepts);
#   - a port where nothing listens (connection refused);
#   - a wrong password against a redis-server started with --requirepass;
#   - a database number Redis does not have (redis://127.0.0.1:<port>/99999).
# For each: the worker logs ONE warning for the problem (counted over ~5 s once the first one is
# logged), never restarts (same
# pid), keeps the jobs staged, never shows a password (server log, jobbuf_worker_status), and
# delivers the jobs once the URL is fixed with ALTER SYSTEM + reload.
source "$(dirname "$0")/tools/lib.sh"

OBSERVE=${JB_FAULTS_OBSERVE_SECONDS:-5}
faults_start "" "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '300ms'"
jb_sql "SELECT jobbuf_create_queue('rt', 'list')" >/dev/null
pid=$(worker_pid)
say "drain worker pid $pid"

# A second redis-server that wants a password.
GOOD_PW="Pw-$(date +%s%N | sha256sum | cut -c1-20)"
BAD_PW="Wrong-$(date +%s%N | sha256sum | cut -c1-20)"
auth_redis_on() {  # PORT
  local from
  mkdir -p "$JB_RUN/redis-auth"
  from=$(jb_log_size "$JB_RUN/redis-auth/redis.log")
  redis-server --port "$1" --bind 127.0.0.1 --dir "$JB_RUN/redis-auth" --save '' --appendonly no \
    --requirepass "$GOOD_PW" --logfile "$JB_RUN/redis-auth/redis.log" &
  track_pid $!
  jb_redis_started $! "$JB_RUN/redis-auth/redis.log" "$from" --no-auth-warning -a "$GOOD_PW" -p "$1"
}
jb_on_free_port AUTH_PORT auth_redis_on || say "(the password-protected redis did not answer)"
auth_redis() { REDISCLI_AUTH=$GOOD_PW redis-cli -p "$AUTH_PORT" "$@" 2>/dev/null; }

# SHOW masks a password in the URL (the worker connects with the URL as written).
set_url() {
  local shown
  shown=$(sed -E 's#^([a-z+]+://[^:@/]*:).*@#\1********@#' <<<"$1")
  set_and_reload jobbuf.redis_url "$1" "$shown" || fail "jobbuf.redis_url = '$1' was not reloaded"
}

# The password lives in jobbuf.redis_password_file, never in the URL: PostgreSQL itself logs
# "parameter ... changed to <value>" for every reloaded setting, so a password in the URL would
# reach the server log.
PW_FILE=$JB_RUN/redis-password
chown postgres "$JB_RUN" 2>/dev/null || true
set_password_file() {
  printf '%s\n' "$1" > "$PW_FILE"
  chown postgres "$PW_FILE" 2>/dev/null || true
  chmod 600 "$PW_FILE"
  jb_sql "ALTER SYSTEM SET jobbuf.redis_password_file = '$PW_FILE'" >/dev/null
  set_url "redis://127.0.0.1:$AUTH_PORT/0"   # (the file's new content is read at the same reload)
}
bad_password() { set_password_file "$BAD_PW"; }
good_password() { set_password_file "$GOOD_PW"; }

n=0
# scenario "<what>" "<bad url, or a function applying it>" "<good url or function>"
#          "<regex of the expected warning>" <llen command...>
apply() { if declare -F "$1" >/dev/null; then "$1"; else set_url "$1"; fi; }
scenario() {
  local what=$1 bad=$2 good=$3 pattern=$4; shift 4
  local mark before warnings staged
  mark=$(log_mark)
  before=$("$@" LLEN jobbuf:rt)
  apply "$bad"
  n=$(( n + 1 )); jb_sql "SELECT jobbuf_stage('rt', jsonb_build_object('n', $n))" >/dev/null
  n=$(( n + 1 )); jb_sql "SELECT jobbuf_stage('rt', jsonb_build_object('n', $n))" >/dev/null
  jb_wait_until "log_since $mark | grep -qE 'WARNING: +jobbuf:'" 15
  sleep "$OBSERVE"   # the window in which no second warning may come
  warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
  expect_eq "$what: one jobbuf WARNING in ${OBSERVE}+ s" "$(grep -c . <<<"$warnings" || true)" 1
  expect_match "$what: the warning says what is wrong" "$warnings" "$pattern"
  say "$what: $(sed -E 's/.*WARNING: +//' <<<"$warnings" | head -n 1)"
  say "$what: jobbuf_worker_status().last_error: $(jb_sql "SELECT last_error FROM jobbuf_worker_status()")"
  expect_eq "$what: jobs stay staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 2
  expect_eq "$what: redis_connected is false" "$(jb_sql "SELECT redis_connected FROM jobbuf_worker_status()")" f
  expect_eq "$what: the worker kept its pid" "$(worker_pid)" "$pid"
  apply "$good"
  if jb_wait_until "[ \"\$($* LLEN jobbuf:rt)\" = $(( before + 2 )) ] && [ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 15; then
    pass "$what: the staged jobs are delivered once the URL is fixed"
  else
    fail "$what: after the fix, $("$@" LLEN jobbuf:rt) in Redis (expected $(( before + 2 ))), $(jb_sql "SELECT count(*) FROM jobbuf.jobs") staged"
  fi
  expect_match "$what: one LOG line when it ends" "$(log_since "$mark" | grep -E 'LOG: +jobbuf:' || true)" "accepts jobs again"
}

# A listener that never accepts (the kernel completes the connections, nobody ever answers), and a
# port bound without listening (connections are refused). Each process binds port 0 and prints
# the port the kernel gave it: nobody else can take either port meanwhile.
# held_port VAR "RUBY SOCKET EXPRESSION": VAR = the port of that socket, held by a process stopped on exit.
held_port() {
  local file
  file=$(mktemp "$JB_RUN/port.XXXXXX")
  ruby -rsocket -e "s = $2; puts s.local_address.ip_port; STDOUT.flush; sleep" >"$file" &
  track_pid $!
  jb_wait_until "[ -s '$file' ]" 10 || fail "no port for $1"
  printf -v "$1" %s "$(cat "$file")"
}
held_port SILENT_PORT 'TCPServer.new("127.0.0.1", 0)'
held_port REFUSED_PORT 'Socket.new(:INET, :STREAM).tap { |b| b.bind(Addrinfo.tcp("127.0.0.1", 0)) }'

GOOD_MAIN="redis://127.0.0.1:$JB_REDIS_PORT/0"
scenario "unroutable address" "redis://10.255.255.1:6379" "$GOOD_MAIN" "jobbuf: ." jb_redis
scenario "silent server" "redis://127.0.0.1:$SILENT_PORT" "$GOOD_MAIN" "timed out" jb_redis
scenario "connection refused" "redis://127.0.0.1:$REFUSED_PORT" "$GOOD_MAIN" "(refused|connect)" jb_redis
scenario "wrong password" bad_password good_password "(AUTH|WRONGPASS|password)" auth_redis
jb_sql "ALTER SYSTEM RESET jobbuf.redis_password_file" >/dev/null
scenario "database 99999" "redis://127.0.0.1:$JB_REDIS_PORT/99999" "$GOOD_MAIN" \
  "(SELECT|DB index)" jb_redis

# Secrets: neither password anywhere the worker writes, nor readable by a non-superuser.
status_text=$(jb_sql "SELECT t::text FROM jobbuf_worker_status() t")
log=$(cat "$JB_RUN/postgres.log")
jobbuf_lines=$(grep -E '(WARNING|LOG|ERROR|DETAIL): +jobbuf:' <<<"$log" || true)
expect_eq "no jobbuf log line shows a password" "$(grep -cE -- "$BAD_PW|$GOOD_PW" <<<"$jobbuf_lines" || true)" 0
leaks=$(grep -E -- "$BAD_PW|$GOOD_PW" <<<"$log" || true)
expect_eq "no line of the server log shows a password" "$(grep -c . <<<"$leaks" || true)" 0
[ -n "$leaks" ] && sed -E 's/^[^]]*\] /    leaked by: /' <<<"$leaks" | head -n 3
expect_eq "no password in jobbuf_worker_status()" "$(grep -cE -- "$BAD_PW|$GOOD_PW" <<<"$status_text" || true)" 0
good_password
jb_sql "CREATE ROLE jobbuf_reader LOGIN" >/dev/null
show=$(jb_psql -qtAX -c "SET ROLE jobbuf_reader; SHOW jobbuf.redis_password_file" 2>&1)
expect_match "a non-superuser cannot read jobbuf.redis_password_file" "$show" "must be superuser|permission denied|privileges"
jb_sql "ALTER SYSTEM RESET jobbuf.redis_password_file" >/dev/null
set_url "redis://:$GOOD_PW@127.0.0.1:$AUTH_PORT/0"
show=$(jb_psql -qtAX -c "SET ROLE jobbuf_reader; SHOW jobbuf.redis_url" 2>&1)
expect_match "a non-superuser cannot read jobbuf.redis_url" "$show" "must be superuser|permission denied|privileges"
expect_eq "nor through pg_settings" \
  "$(jb_psql -qtAX -c "SET ROLE jobbuf_reader; SELECT count(*) FROM pg_settings WHERE setting LIKE '%$GOOD_PW%'")" 0
set_url "$GOOD_MAIN"

# Another bad URL right after a bad one (no success in between): the new problem is said too.
mark=$(log_mark)
set_url "redis://10.255.255.1:6379"
n=$(( n + 1 )); jb_sql "SELECT jobbuf_stage('rt', jsonb_build_object('n', $n))" >/dev/null
sleep 2
set_url "redis://127.0.0.1:$JB_REDIS_PORT/99999"
sleep 3
switch_warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' | sed -E 's/.*WARNING: +//' || true)
say "bad URL followed by another bad URL: $(grep -c . <<<"$switch_warnings" || true) warning(s): $(tr '\n' '|' <<<"$switch_warnings")"
say "  (informational: the second problem is $(grep -q 'SELECT\|DB index' <<<"$switch_warnings" && echo "logged" || echo "NOT logged: only jobbuf_worker_status shows it, problem_log repeats a changed message at most once a minute"))"
set_url "$GOOD_MAIN"
wait_staged 0 || fail "the job staged during the two bad URLs was not delivered once fixed"
expect_eq "the worker kept its pid throughout" "$(worker_pid)" "$pid"
log=$(cat "$JB_RUN/postgres.log")
expect_eq "no worker exit in the server log" "$(count_lines 'jobbuf (drain worker|launcher).*(exited|terminated)' "$log")" 0
faults_done

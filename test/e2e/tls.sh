#!/usr/bin/env bash
# TLS (rediss://) end to end, against a redis-server with only a TLS port (its unix socket, plain,
# is how the test itself looks at it), certificates made with the openssl CLI
# (test/harness/tls_certs.sh), and a password from jobbuf.redis_password_file:
# - jobs are delivered exactly once over TLS;
# - a wrong CA, a wrong host name and an expired certificate each leave the jobs staged with ONE
#   WARNING naming the reason (and last_error in jobbuf_worker_status()); delivery resumes
#   once corrected, with one LOG line and no duplicate;
# - mutual TLS: a server that requires a client certificate refuses the worker until
#   jobbuf.redis_tls_cert_file / jobbuf.redis_tls_key_file are set, then accepts it;
# - the password never reaches the server log.
source "$(dirname "$0")/tools/lib.sh"
source "$E2E_ROOT/test/harness/tls_certs.sh"

jb_init_run_dir
CERTS=$JB_RUN/tls
jb_make_tls_certs "$CERTS" || { echo "making certificates failed" >&2; exit 1; }
PASSWORD=TlsS3cretPw
printf '%s\n' "$PASSWORD" >"$JB_RUN/redis.pass"
chmod 644 "$JB_RUN/redis.pass"

TLS_SOCK=$JB_RUN/tls-redis.sock
mkdir -p "$JB_RUN/tls-redis"
tls_redis() { redis-cli --no-auth-warning -a "$PASSWORD" -s "$TLS_SOCK" "$@"; }
# tls_redis_on PORT: the TLS redis-server. It answering on its own unix socket means it bound every
# listener, its TLS port too (Redis exits when one cannot be bound).
tls_redis_on() {
  local from
  from=$(jb_log_size "$JB_RUN/tls-redis/redis.log")
  redis-server --port 0 --tls-port "$1" --bind "127.0.0.1 127.0.0.2" --unixsocket "$TLS_SOCK" \
    --tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt" \
    --tls-auth-clients no --requirepass "$PASSWORD" --dir "$JB_RUN/tls-redis" --save '' --appendonly no \
    --logfile "$JB_RUN/tls-redis/redis.log" &
  E2E_EXTRA_PIDS+=($!)
  jb_redis_started $! "$JB_RUN/tls-redis/redis.log" "$from" --no-auth-warning -a "$PASSWORD" -s "$TLS_SOCK"
}
trap e2e_cleanup EXIT   # stops it too
jb_on_free_port TLS_PORT tls_redis_on || { echo "the TLS redis-server did not start" >&2; exit 1; }

e2e_start "jobbuf.redis_url = 'rediss://localhost:$TLS_PORT/0'
jobbuf.redis_password_file = '$JB_RUN/redis.pass'
jobbuf.redis_tls_ca_file = '$CERTS/ca.crt'
jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '1s'"

STAGED=0
stage() {  # stage N: N more jobs numbered after the ones staged so far
  jb_sql "SELECT count(jobbuf_stage('work', jsonb_build_object('n', n)))
          FROM generate_series($((STAGED + 1)), $((STAGED + $1))) n" >/dev/null
  STAGED=$((STAGED + $1))
}
# delivered_once: every job staged so far is in the TLS Redis exactly once, and none is staged.
delivered_once() {
  if ! jb_wait_until "[ \"\$(tls_redis LLEN jobbuf:work)\" -ge $STAGED ]" 15; then
    fail "$1: $(tls_redis LLEN jobbuf:work) of $STAGED jobs in Redis"
    return
  fi
  wait_staged 0 || fail "$1: jobs still staged"
  expect_eq "$1: jobs 1..$STAGED each delivered once" \
    "$(tls_redis LRANGE jobbuf:work 0 -1 | ruby -rjson -e 'puts STDIN.each_line.map { |l| JSON.parse(l)["n"] }.sort == (1..ARGV[0].to_i).to_a' "$STAGED")" true
}
# problem NAME REASON: staged jobs stay staged, with one WARNING naming REASON and last_error set.
problem() {
  stage 10
  if jb_wait_until "log_since $MARK | grep -qE 'WARNING: +jobbuf:.*$2'" 15; then
    pass "$1: a WARNING names the reason"
  else
    fail "$1: no WARNING matching /$2/"
  fi
  say "$1: $(log_since "$MARK" | grep -E 'WARNING: +jobbuf:' | head -n 1 | sed 's/.*WARNING: *//')"
  stage 5
  sleep 1.5   # retries go on meanwhile (backoff from 100 ms): none may log again
  expect_eq "$1: jobs stay staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 15
  expect_eq "$1: one WARNING" "$(count_lines 'WARNING: +jobbuf:' "$(log_since "$MARK")")" 1
  expect_match "$1: jobbuf_worker_status().last_error" "$(worker_status_value last_error)" "$2"
}
# resumed NAME: delivery resumed with one LOG line.
resumed() {
  delivered_once "$1"
  expect_eq "$1: one LOG line on recovery" \
    "$(count_lines 'LOG: +jobbuf: Redis .* accepts jobs again' "$(log_since "$MARK")")" 1
}

jb_sql "SELECT jobbuf_create_queue('work', 'list')" >/dev/null
stage 200
delivered_once "over TLS"
expect_eq "the worker is connected" "$(worker_status_value redis_connected)" t

say "a CA that did not sign the server's certificate"
MARK=$(log_mark)
set_and_reload jobbuf.redis_tls_ca_file "$CERTS/other-ca.crt"
problem "wrong CA" "was not accepted: (self-signed certificate in certificate chain|unable to get local issuer)"
set_and_reload jobbuf.redis_tls_ca_file "$CERTS/ca.crt"
resumed "CA corrected"

say "a host name the certificate does not name (127.0.0.2; it names localhost and 127.0.0.1)"
MARK=$(log_mark)
set_and_reload jobbuf.redis_url "rediss://127.0.0.2:$TLS_PORT/0"
problem "wrong host name" "was not accepted: IP address mismatch"
set_and_reload jobbuf.redis_url "rediss://localhost:$TLS_PORT/0"
resumed "host name corrected"

say "the server presents an expired certificate (the worker reconnects: its URL changed)"
MARK=$(log_mark)
tls_redis CONFIG SET tls-cert-file "$CERTS/expired.crt" tls-key-file "$CERTS/expired.key" >/dev/null
set_and_reload jobbuf.redis_url "rediss://127.0.0.1:$TLS_PORT/0"
problem "expired certificate" "was not accepted: certificate has expired"
tls_redis CONFIG SET tls-cert-file "$CERTS/server.crt" tls-key-file "$CERTS/server.key" >/dev/null
resumed "certificate renewed"

say "mutual TLS: the server requires a client certificate"
MARK=$(log_mark)
tls_redis CONFIG SET tls-auth-clients yes >/dev/null
set_and_reload jobbuf.redis_url "rediss://localhost:$TLS_PORT/0"
problem "no client certificate" "the server asked for a client certificate"
jb_psql -q -o /dev/null -c "ALTER SYSTEM SET jobbuf.redis_tls_cert_file = '$CERTS/client.crt'" \
  -c "ALTER SYSTEM SET jobbuf.redis_tls_key_file = '$CERTS/client.key'" -c "SELECT pg_reload_conf()"
wait_setting_shown jobbuf.redis_tls_key_file "$CERTS/client.key"
resumed "client certificate presented"

expect_eq "the password never reached the server log" "$(grep -c "$PASSWORD" "$JB_RUN/postgres.log")" 0
expect_eq "the worker never restarted" \
  "$(count_lines 'jobbuf drain worker.*(exited|terminated)' "$(cat "$JB_RUN/postgres.log")")" 0

e2e_done

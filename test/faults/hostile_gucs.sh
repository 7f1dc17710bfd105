#!/usr/bin/env bash
# Every jobbuf GUC set to garbage is refused when it is set, with a message that says what is
# wrong, and the worker never notices: same pid before and after, and it still delivers.
#   - ALTER SYSTEM SET with out-of-range numbers and malformed Redis URLs: ERROR, nothing written;
#   - the same garbage written straight into postgresql.conf and reloaded: the server keeps the
#     old values (and says so in its log), the worker keeps running with them, except that a
#     refused jobbuf.redis_url stops delivery (jobs stay staged, last_error says why) until a
#     valid one is reloaded (docs/configuration.md).
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('g', 'list')" >/dev/null
pid_before=$(worker_pid)
say "drain worker pid $pid_before"

# refused "<setting>" "<value as SQL literal>" "<regex the error must match>"
refused() {
  local out
  out=$(jb_psql -qtAX -c "ALTER SYSTEM SET $1 = $2" 2>&1)
  if [ $? -ne 0 ] && [[ $out =~ $3 ]]; then
    pass "ALTER SYSTEM SET $1 = $2 refused: $(tr '\n' ' ' <<<"$out" | sed -E 's/ +/ /g; s/^ERROR: *//' | cut -c1-150)"
  else
    fail "ALTER SYSTEM SET $1 = $2: expected an error matching /$3/, got: $(tr '\n' ' ' <<<"$out")"
  fi
}

refused jobbuf.batch_size "-5" "outside the valid range"
refused jobbuf.batch_size "0" "outside the valid range"
refused jobbuf.batch_size "'many'" 'invalid value for parameter "jobbuf.batch_size"'
refused jobbuf.batch_size "100000000000" "exceeds integer range"
refused jobbuf.batch_max_bytes "'1kB'" "outside the valid range"
refused jobbuf.batch_max_bytes "0" "outside the valid range"
refused jobbuf.batch_max_bytes "'257MB'" "outside the valid range"
refused jobbuf.batch_max_bytes "'1GB'" "outside the valid range"
refused jobbuf.batch_max_bytes "'2GB'" "exceeds integer range"
refused jobbuf.batch_max_bytes "'lots'" 'invalid value for parameter "jobbuf.batch_max_bytes"'
refused jobbuf.poll_interval "'-1s'" "outside the valid range"
refused jobbuf.poll_interval "'0'" "outside the valid range"
refused jobbuf.poll_interval "'soon'" "(invalid value|requires an integer)"
refused jobbuf.redis_timeout "'-1s'" "outside the valid range"
refused jobbuf.redis_timeout "'1000000h'" "(outside the valid range|invalid value)"
refused jobbuf.enabled "'maybe'" "requires a Boolean value"
refused jobbuf.database "''" "must name a database"
refused jobbuf.database "'$(printf 'd%.0s' $(seq 1 80))'" "at most 63 bytes"
refused jobbuf.no_such_setting "1" "(invalid configuration parameter name|unrecognized configuration parameter)"
for url in "'http://x'" "'redis://h:0'" "'redis://h:70000'" "'redis://:pw@'" "''" "'redis://'" \
    "'redis://h:6379/x'" "'redis://h:6379/-1'" "'redis://h:6379/0/extra'" "'redis://h:abc'" \
    "'redis://[::1'" "'unix://'" "'redis://h:6379/0?x=%zz'" "'redis://%zz@h'" "' redis://h'"; do
  refused jobbuf.redis_url "$url" 'invalid value for parameter "jobbuf.redis_url"'
done
top_out=$(jb_psql -qtAX -c "ALTER SYSTEM SET jobbuf.batch_max_bytes = '256MB'" 2>&1) \
  && pass "jobbuf.batch_max_bytes = '256MB' (the top of its range) accepted" \
  || fail "jobbuf.batch_max_bytes = '256MB' refused: $top_out"
jb_psql -qtAX -c "ALTER SYSTEM RESET jobbuf.batch_max_bytes" >/dev/null
detail=$(jb_psql -qtAX -c "ALTER SYSTEM SET jobbuf.redis_url = 'redis://h:70000'" 2>&1 | grep -i DETAIL || true)
expect_match "a refused jobbuf.redis_url comes with a DETAIL that explains it" "$detail" "DETAIL: +[A-Za-z]"
say "for example: $(sed -E 's/ +/ /g' <<<"$detail")"
expect_eq "nothing written to postgresql.auto.conf" "$(grep -c jobbuf "$JB_PGDATA/postgresql.auto.conf" || true)" 0
# jobbuf.redis_url is suset (ALTER DATABASE gives a database its own Redis): a session of a
# superuser may SET it, for itself only; garbage is refused there too; other roles cannot.
set_out=$(jb_psql -qtAX -c "SET jobbuf.redis_url = 'redis://h:70000'" 2>&1)
expect_match "SET jobbuf.redis_url = garbage in a session is refused" "$set_out" 'invalid value for parameter "jobbuf.redis_url"'
jb_psql -q -c "CREATE ROLE gucs_app LOGIN"
set_out=$(psql -X -qtAX -h "$JB_PGHOST" -p "$JB_PGPORT" -U gucs_app -d "$JB_DB" -c "SET jobbuf.redis_url = 'redis://h:1'" 2>&1)
expect_match "a non-superuser cannot SET jobbuf.redis_url (suset setting)" "$set_out" "permission denied to set parameter"

# The same garbage straight into postgresql.conf, then a reload.
cp "$JB_PGDATA/postgresql.conf" "$JB_RUN/postgresql.conf.good"
cat >>"$JB_PGDATA/postgresql.conf" <<'CONF'
jobbuf.batch_size = -5
jobbuf.poll_interval = '-1s'
jobbuf.redis_url = 'redis://h:70000'
CONF
mark=$(log_mark)
jb_sql "SELECT pg_reload_conf()" >/dev/null
jb_wait_until "log_since $mark | grep -qE 'jobbuf\.(batch_size|poll_interval|redis_url)'" 15
reload_log=$(log_since "$mark")
expect_match "the server log names the bad values in postgresql.conf" "$reload_log" 'jobbuf\.(batch_size|poll_interval|redis_url)'
expect_eq "the old values stay in force" \
  "$(jb_sql "SELECT current_setting('jobbuf.batch_size') || ' ' || current_setting('jobbuf.poll_interval')")" "1000 200ms"
grep -E 'jobbuf' <<<"$reload_log" | head -n 4 | sed -E 's/^[^]]*\] /    log: /'
jb_sql "SELECT jobbuf_stage('g', '{\"n\": 1}')" >/dev/null
check "the refused jobbuf.redis_url stops delivery, and the status says why" \
  jb_wait_until "jb_sql 'SELECT last_error FROM jobbuf_worker_status()' | grep -q 'jobbuf.redis_url in the server configuration was refused'" 15
expect_eq "the job stays staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs") $(jb_redis LLEN jobbuf:g)" "1 0"
cp "$JB_RUN/postgresql.conf.good" "$JB_PGDATA/postgresql.conf"
jb_sql "SELECT pg_reload_conf()" >/dev/null
sleep 0.5

jb_sql "SELECT jobbuf_stage('g', '{\"n\": 2}')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:g)" = 2 ]' 15; then pass "the good values reloaded: both jobs delivered"; else fail "the worker does not deliver at the end"; fi
expect_eq "the drain worker kept its pid" "$(worker_pid)" "$pid_before"
log=$(cat "$JB_RUN/postgres.log")
expect_eq "no worker exit in the server log" "$(count_lines 'jobbuf (drain worker|launcher).*(exited|terminated)' "$log")" 0
faults_done

#!/usr/bin/env bash
# jobbuf_flow_status() (SPEC 1.3, "Flow control at the drain": Visible; docs/flow.md, "What you
# see"), each state built, never waited for by luck:
#  * depth_cap: a list with max_in_redis 5 and no consumer: 5 in Redis, the rest staged; the
#    depth read, the cap, the ready count (census) and a reason shown; waiting_since kept while
#    the worker rewrites the row;
#  * the 10 s rule: the cap removed (everything delivered, so nothing can be held back any more),
#    the queue stays depth_cap until 10 s after the last hold the worker recorded, then flowing;
#  * rate_limited: max_rate 0.2 (a job every 5 s: held between them, never 10 s without a hold);
#  * paused (jobbuf_pause), flowing, and disabled for every queue while jobbuf.enabled is off;
#  * redis_memory: jobbuf.redis_memory_limit = 100kB, far below what an empty Redis uses (and no
#    maxmemory: no OOM for the worker's own writes); jobbuf_prometheus_redis_memory() shows a
#    ratio of at least 1, and NaN once the default (0.8 of a maxmemory of 0) applies again;
#  * jobbuf_prometheus_flow(): one row per state, 1 for the current one;
#  * stopped: Redis shut down, the reason the worker's last_error; flowing again once it runs.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('capped', 'list', '{"max_in_redis": 5}');
SELECT jobbuf_create_queue('rated', 'list', '{"max_rate": 0.2, "weight": 3}');
SELECT jobbuf_create_queue('parked', 'list');
SELECT jobbuf_pause('parked');
SELECT jobbuf_create_queue('plain', 'list');
SELECT jobbuf_create_queue('claims', 'none');
SELECT jobbuf_stage('capped', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SELECT jobbuf_stage('rated', jsonb_build_object('n', n)) FROM generate_series(1, 10) n;
SELECT jobbuf_stage('parked', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SELECT jobbuf_stage('plain', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SQL
wait_redis_connected || fail "the worker connects to Redis"
flow() { jb_sql "SELECT $1 FROM jobbuf_flow_status() WHERE queue = '$2'"; }

# ---- depth_cap: nobody pops, so the list stays at its cap.
expect_list_reaches jobbuf:capped 5 15 "capped: 5 jobs (max_in_redis) in Redis"
jb_wait_until "[ \"\$(flow state capped)\" = depth_cap ]" 15
expect_eq "capped: state depth_cap" "$(flow state capped)" depth_cap
wait_census || fail "no census"
expect_eq "capped: depth_in_redis, max_in_redis, ready, weight" \
  "$(flow "depth_in_redis || ' ' || max_in_redis || ' ' || ready || ' ' || weight" capped)" "5 5 15 1"
expect_match "capped: the reason names the cap" "$(flow reason capped)" "max_in_redis 5"
expect_eq "capped: still 5 in Redis" "$(jb_redis LLEN jobbuf:capped)" 5
since1=$(flow waiting_since capped)
held1=$(jb_sql "SELECT held_at FROM jobbuf.queue_flow WHERE queue = 'capped'")
check "capped: waiting_since set" test -n "$since1"
# The worker rewrites a held queue's row about once a second: wait for a rewrite.
jb_wait_until "[ \"\$(jb_sql \"SELECT held_at > '$held1' FROM jobbuf.queue_flow WHERE queue = 'capped'\")\" = t ]" 10 ||
  fail "capped: the worker did not rewrite the held queue's row"
expect_eq "capped: still depth_cap after the rewrite (5 in Redis)" "$(flow state capped) $(jb_redis LLEN jobbuf:capped)" "depth_cap 5"
expect_eq "capped: waiting_since kept while held" "$(flow waiting_since capped)" "$since1"

# ---- rate_limited, paused, flowing, none left out.
jb_wait_until "[ \"\$(flow state rated)\" = rate_limited ]" 15
expect_eq "rated: state, max_rate, weight" "$(flow "state || ' ' || max_rate || ' ' || weight" rated)" "rate_limited 0.2 3"
expect_match "rated: the reason names the rate" "$(flow reason rated)" "max_rate 0.2"
check "rated: fewer than 10 jobs in Redis (a job every 5 s)" test "$(jb_redis LLEN jobbuf:rated)" -lt 10
expect_eq "parked: state paused, 3 ready, no waiting_since" \
  "$(flow "state || ' ' || ready || ' ' || (waiting_since IS NULL)" parked)" "paused 3 true"
expect_list_reaches jobbuf:plain 3 15 "plain: delivered"
expect_eq "plain: flowing, no reason" "$(flow "state || ' ' || coalesce(reason, '-')" plain)" "flowing -"
expect_eq "a none queue is left out" "$(jb_sql "SELECT count(*) FROM jobbuf_flow_status() WHERE queue = 'claims'")" 0
expect_eq "jobbuf_prometheus_flow: 7 series per queue, 1 for depth_cap only" \
  "$(jb_sql "SELECT count(*) || ' ' || sum(queue_flow_state) || ' ' || max(state) FILTER (WHERE queue_flow_state = 1) FROM jobbuf_prometheus_flow() WHERE queue = 'capped'")" \
  "7 1 depth_cap"

# ---- disabled: every queue, paused ones excepted.
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
expect_eq "disabled: every queue but the paused one" \
  "$(jb_sql "SELECT string_agg(queue || '=' || state, ' ' ORDER BY queue) FROM jobbuf_flow_status()")" \
  "capped=disabled parked=paused plain=disabled rated=disabled"
expect_eq "disabled: the reason" "$(flow reason plain)" "jobbuf.enabled is off"
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
jb_wait_until "[ \"\$(flow state capped)\" = depth_cap ]" 15
expect_eq "enabled again: capped back to depth_cap" "$(flow state capped)" depth_cap

# ---- the 10 s rule. Once the cap is gone every job of the queue is delivered: from then on
# nothing of it can be held back. Poll the state and the last hold the worker recorded (held_at,
# never later than the real last hold) until it flows: it must not leave depth_cap sooner than
# 10 s after that hold.
jb_sql "SELECT jobbuf_alter_queue('capped', '{\"max_in_redis\": null}')" >/dev/null || fail "capped: the cap removed"
expect_list_reaches jobbuf:capped 20 15 "capped: the cap removed, all 20 delivered"
polls=$JB_RUN/flow_polls
: >"$polls"
jb_wait_until "jb_sql \"SELECT f.state || ' ' || extract(epoch FROM clock_timestamp()) || ' ' || coalesce((SELECT extract(epoch FROM held_at)::text FROM jobbuf.queue_flow WHERE queue = 'capped'), '-') FROM jobbuf_flow_status() f WHERE f.queue = 'capped'\" | tee -a '$polls' | grep -q '^flowing'" 40 ||
  fail "capped: not flowing 40 s after its cap was removed"
check "capped: depth_cap seen after everything was delivered" grep -q '^depth_cap' "$polls"
last_hold=$(awk '$3 != "-" { h = $3 } END { print h }' "$polls")
left_at=$(awk '$1 == "flowing" { print $2; exit }' "$polls")
gap=$(awk -v a="$left_at" -v h="$last_hold" 'BEGIN { printf "%.1f", a - h }')
check "capped: left depth_cap ${gap} s after the last hold recorded (at least 10 s)" \
  awk -v g="$gap" 'BEGIN { exit !(g >= 10.0) }'
expect_eq "capped: flowing without waiting_since or depth" \
  "$(flow "coalesce(waiting_since::text, '-') || ' ' || coalesce(depth_in_redis::text, '-')" capped)" "- -"
expect_eq "capped: its row is gone" "$(jb_sql "SELECT count(*) FROM jobbuf.queue_flow WHERE queue = 'capped'")" 0

# ---- redis_memory: a limit of 100 kB (a size applies whatever maxmemory says), far below what
# Redis uses with nothing in it: held with a wide margin, and no OOM for the worker's own writes
# (maxmemory stays 0).
set_and_reload jobbuf.redis_memory_limit 100kB || fail "jobbuf.redis_memory_limit is 100kB"
# The guard reads INFO on a clock (the rated queue's batches keep it reading): stage only once
# its reading under the new limit is published, so that nothing can be sent on an older one
# (NaN, no limit, sorts above every number in PostgreSQL: excluded).
jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf_prometheus_redis_memory() WHERE memory_ratio BETWEEN 1 AND 1e300')\" = 1 ]" 15 ||
  fail "the guard did not read under the new limit"
jb_sql "SELECT jobbuf_stage('plain', jsonb_build_object('n', n)) FROM generate_series(4, 6) n" >/dev/null
jb_wait_until "[ \"\$(flow state plain)\" = redis_memory ]" 15
expect_eq "plain: state redis_memory" "$(flow state plain)" redis_memory
expect_match "plain: the reason names the limit" "$(flow reason plain)" "redis_memory_limit"
expect_eq "plain: nothing more delivered" "$(jb_redis LLEN jobbuf:plain)" 3
expect_eq "jobbuf_prometheus_redis_memory: one node at a ratio of at least 1" \
  "$(jb_sql "SELECT count(*) FROM jobbuf_prometheus_redis_memory() WHERE memory_ratio BETWEEN 1 AND 1e300")" 1
reset_and_reload jobbuf.redis_memory_limit 0.8 || fail "jobbuf.redis_memory_limit is back to 0.8"
expect_list_reaches jobbuf:plain 6 15 "plain: delivered once the limit is gone"
jb_wait_until "[ \"\$(jb_sql \"SELECT memory_ratio::text FROM jobbuf_prometheus_redis_memory()\")\" = NaN ]" 10
expect_eq "jobbuf_prometheus_redis_memory: NaN once no limit applies (0.8 of maxmemory 0)" \
  "$(jb_sql "SELECT memory_ratio::text FROM jobbuf_prometheus_redis_memory()")" NaN

# ---- stopped: Redis down (SHUTDOWN NOSAVE, the server gone until it is started again): every
# queue the worker pushes is stopped, with the worker's last_error as the reason; back to flowing
# once Redis runs again.
jb_redis SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$JB_REDIS_PID" 2>/dev/null || true
jb_sql "SELECT jobbuf_stage('plain', '{\"n\": 7}')" >/dev/null
jb_wait_until "[ \"\$(flow state plain)\" = stopped ]" 30
expect_eq "plain: state stopped while Redis is down" "$(flow state plain)" stopped
expect_eq "stopped: the reason is the worker's last_error" \
  "$(flow reason plain)" "$(jb_sql "SELECT last_error FROM jobbuf_worker_status()")"
check "stopped: the reason says something" test -n "$(flow reason plain)"
jb_restart_redis || fail "Redis runs again"
expect_list_reaches jobbuf:plain 1 30 "plain: the job staged while Redis was down is delivered"
jb_wait_until "[ \"\$(flow state plain)\" = flowing ]" 30
expect_eq "plain: flowing again" "$(flow state plain)" flowing
e2e_done

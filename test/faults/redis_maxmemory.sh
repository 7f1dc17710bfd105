#!/usr/bin/env bash
# Redis full (maxmemory 2mb, noeviction): every push is refused with OOM. The jobs must stay
# staged — not lost, not dead-lettered — with one WARNING, and be delivered exactly once when
# room is made: first by CONFIG SET maxmemory 0, then (filled again) by deleting the filler keys.
source "$(dirname "$0")/tools/lib.sh"

# The memory guard off, as in 1.2: this is the OOM reply from a Redis that other writers filled
# (test/faults/redis_memory_guard.sh has the guard).
faults_start "--maxmemory 2mb --maxmemory-policy noeviction" "jobbuf.poll_interval = '200ms'
jobbuf.redis_memory_limit = off"
pid=$(worker_pid)
jb_sql "SELECT jobbuf_create_queue('mm', 'list')" >/dev/null
KEY=jobbuf:mm

# fill: 20 kB strings filler:1, filler:2, ... until Redis refuses one with OOM; then, since
# Redis sits right at the limit (a small write may still pass), lower maxmemory to halfway
# between the memory used before and after filling: every write is refused for sure, and
# deleting the filler keys makes room again.
used_memory() { jb_redis INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
fill() {
  local i used0 used1
  used0=$(used_memory)
  for i in $(seq 1 300); do
    head -c 20000 /dev/zero | tr '\0' f | jb_redis -x SET "filler:$i" | grep -q OOM && break
  done
  used1=$(used_memory)
  jb_redis CONFIG SET maxmemory $(( used0 + (used1 - used0) / 2 )) >/dev/null
  expect_match "Redis is full: a write is refused with OOM" "$(jb_redis SET probe 1 2>&1)" "OOM"
}

# phase "<what>" <first n> <fix command...>
phase() {
  local what=$1 first=$2; shift 2
  local last=$(( first + 199 )) mark before
  before=$(jb_redis LLEN "$KEY")
  # Marked before the fill: the first command to meet the full Redis may be the lease's refresh,
  # between the fill and the staging, and its WARNING is this problem's one.
  mark=$(log_mark)
  fill
  jb_sql "SELECT count(jobbuf_stage('mm', jsonb_build_object('n', g))) FROM generate_series($first, $last) g" >/dev/null
  jb_wait_until "log_since $mark | grep -qE 'WARNING: +jobbuf:'" 15   # the worker met the full Redis
  sleep 4   # the window in which no second warning may come
  expect_eq "$what: the 200 jobs stay staged while Redis is full" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 200
  expect_eq "$what: nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0
  expect_eq "$what: nothing pushed" "$(jb_redis LLEN "$KEY")" "$before"
  local warnings
  warnings=$(log_since "$mark" | grep -E 'WARNING: +jobbuf:' || true)
  expect_eq "$what: one jobbuf WARNING in 4+ s" "$(grep -c . <<<"$warnings" || true)" 1
  say "$what: $(sed -E 's/.*WARNING: +//' <<<"$warnings" | head -n 1)"
  "$@" >/dev/null
  if jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 40; then
    pass "$what: delivered after: $*"
  else
    fail "$what: $(jb_sql 'SELECT count(*) FROM jobbuf.jobs') jobs still staged 40 s after: $*"
  fi
  sleep 0.5
  local arrived
  arrived=$(jb_redis LRANGE "$KEY" "$before" -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"]')
  expect_eq "$what: each of the 200 jobs exactly once, in order" "$arrived" "$(seq "$first" "$last")"
}

phase "fixed by CONFIG SET maxmemory 0" 1 jb_redis CONFIG SET maxmemory 0
drop_fillers() { jb_redis --scan --pattern 'filler:*' | xargs redis-cli -p "$JB_REDIS_PORT" DEL; }
drop_fillers >/dev/null
jb_redis CONFIG SET maxmemory 2mb >/dev/null
phase "fixed by deleting the filler keys" 1001 drop_fillers
expect_eq "the worker kept its pid" "$(worker_pid)" "$pid"
faults_done

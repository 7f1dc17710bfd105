#!/usr/bin/env bash
# max_in_redis and max_rate on a queue with delivery "group" (SPEC 1.3, "Flow control at the
# drain": Depth cap; docs/flow.md): the depth is the jobs of groups pushed and not yet completed
# or failed, counted in jobbuf.jobs. Queue `grouped` (list, batch_size 20, max_in_redis 50), 200
# jobs: the worker pushes groups of 20, 20 and 10 and then waits (depth_cap), with 150 jobs
# staged; a consumer here pops one message at a time and completes its group with
# jobbuf_complete, and each completion makes room for exactly what it freed. Sampled after every
# step: never more than 50 jobs claimed; every job in exactly one message. Then `rated` (group,
# max_rate 40 jobs/s, batch_size 20): its groups' jobs count against the bucket.
set -euo pipefail
cd "$(dirname "$0")/../.."
source test/harness/servers.sh
source test/harness/checks.sh
source test/harness/preconditions.sh

jb_start_servers jb_stop_all
wait_worker_running 15 || fail "the drain worker runs"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('grouped', 'list', '{"delivery": "group", "batch_size": 20, "max_in_redis": 50}');
SQL
claimed() { jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = '$1' AND group_id IS NOT NULL"; }
jb_sql "SELECT count(*) FROM jobbuf_stage('grouped', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 200) n))" >/dev/null
jb_wait_until "[ \"\$(jb_sql \"SELECT state FROM jobbuf_flow_status() WHERE queue = 'grouped'\")\" = depth_cap ]" 30 ||
  fail "grouped reached depth_cap"
expect_eq "claimed jobs at the cap" "$(claimed grouped)" 50
expect_eq "group messages pushed: 20, 20 and 10 jobs" "$(jb_redis LLEN jobbuf:grouped)" 3
expect_eq "the rest stays staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'grouped' AND group_id IS NULL")" 150
expect_eq "jobbuf_flow_status() shows the claimed jobs as the depth" \
  "$(jb_sql "SELECT depth_in_redis || ' ' || max_in_redis FROM jobbuf_flow_status() WHERE queue = 'grouped'")" "50 50"

seen=$JB_RUN/seen_ids
: >"$seen"
most=0 completed=0
while [ "$completed" -lt 200 ]; do
  message=$(jb_redis RPOP jobbuf:grouped)
  if [ -z "$message" ]; then
    sleep 0.05
    continue
  fi
  group=$(ruby -rjson -e 'puts JSON.parse(ARGV[0])["group_id"]' "$message")
  ruby -rjson -e 'puts JSON.parse(ARGV[0])["ids"]' "$message" >>"$seen"
  n=$(jb_sql "SELECT jobbuf_complete('$group')")
  completed=$((completed + n))
  c=$(claimed grouped)
  [ "$c" -gt "$most" ] && most=$c
done
expect_le "never more than max_in_redis jobs claimed (largest sampled)" "$most" 50
expect_eq "every job in exactly one message" "$(sort -n "$seen" | uniq | wc -l),$(wc -l <"$seen")" "200,200"
expect_eq "nothing left" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'grouped'")" 0

# max_rate 40 jobs/s, groups of 20: the bucket holds 20 jobs, so over t seconds at most 40 t + 20.
jb_sql "SELECT jobbuf_create_queue('rated', 'list', '{\"delivery\": \"group\", \"batch_size\": 20, \"max_rate\": 40}')" >/dev/null
start=$(date +%s.%N)
jb_sql "SELECT count(*) FROM jobbuf_stage('rated', ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 200) n))" >/dev/null
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE queue = 'rated' AND group_id IS NULL\")\" = 0 ]" 60 ||
  fail "every rated job was claimed"
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
say "200 rated jobs pushed in ${elapsed} s"
check "max_rate 40: 200 jobs took at least (200 - 20) / 40 = 4.5 s (${elapsed} s)" awk -v e="$elapsed" 'BEGIN { exit !(e >= 4.5) }'
expect_eq "rated: 10 group messages" "$(jb_redis LLEN jobbuf:rated)" 10
checks_done

#!/usr/bin/env bash
# Fairness across partitions of one queue (SPEC 1.3, "Flow control at the drain": Fairness, option
# fair_by; docs/flow.md), asserted by position, not by a clock; the queue delivers into one stream
# key, so the stream's order is the order of delivery.
#  * A backlog of a million jobs of partition `a` and then one job of partition `b` are staged
#    while the worker is disabled; once it is enabled, b's job must be among the first
#    2 × batch_size entries, and a's jobs keep their id order.
#  * A job of a new partition whose key sorts before that of a partition being drained (the worker
#    keeps a cursor for that backlog, and looks for other partitions only short of it): pushed
#    within 2 × batch_size entries of the stream's length read right after its commit.
#  * Jobs of three partitions and jobs without a partition key (one more partition), staged
#    interleaved: each of the four gets a quarter of every batch, each in id order.
#  * more partitions than a batch holds, a job each: all delivered once, by the same worker;
#  * fair_by takes only "partition_key", and only on queues the worker pushes to.
set -uo pipefail
source "$(dirname "$0")/tools/lib.sh"

BACKLOG=${JB_FAIRNESS_BACKLOG:-1000000}
e2e_start
jb_sql "SELECT jobbuf_create_queue('tenants', 'stream', '{\"key\": \"jobbuf:tenants\", \"fair_by\": \"partition_key\"}')" >/dev/null
batch=$(jb_sql "SHOW jobbuf.batch_size")
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "INSERT INTO jobbuf.jobs (queue, payload, partition_key)
        SELECT 'tenants', jsonb_build_object('p', 'a', 'n', n), 'a' FROM generate_series(1, $BACKLOG) n" >/dev/null ||
  fail "staging $BACKLOG jobs of partition a"
jb_sql "SELECT jobbuf_stage('tenants', '{\"p\": \"b\", \"lone\": true}', partition_key => 'b')" >/dev/null
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
expect_lone_job_first jobbuf:tenants "partition_key = 'b'" "$batch" $((BACKLOG + 1)) "the lone job of partition b was delivered"
# Partition a in id order: the n of its first 4 batches' entries rise one by one.
ns=$(jb_redis XRANGE jobbuf:tenants - + COUNT $((4 * batch)) | grep -oE '"n": [0-9]+' | awk '{ print $2 }')
expect_eq "partition a's jobs in id order" "$(awk 'NR > 1 && $1 != prev + 1 { bad++ } { prev = $1 } END { print bad + 0 }' <<<"$ns")" 0
jb_redis DEL jobbuf:tenants >/dev/null

# A new partition sorting before a backlog being drained: '0' < 'z'.
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "INSERT INTO jobbuf.jobs (queue, payload, partition_key)
        SELECT 'tenants', jsonb_build_object('p', 'z', 'n', n), 'z' FROM generate_series(1, $BACKLOG) n" >/dev/null ||
  fail "staging $BACKLOG jobs of partition z"
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
jb_wait_until "[ \"\$(jb_redis XLEN jobbuf:tenants)\" -ge $((5 * batch)) ]" 60 || fail "partition z's backlog did not start draining"
jb_sql "SELECT jobbuf_stage('tenants', '{\"p\": \"0\", \"early\": true}', partition_key => '0')" >/dev/null
len=$(jb_redis XLEN jobbuf:tenants)
check "precondition: partition z still has a backlog when 0's job has committed" \
  test "$(jb_sql "SELECT count(*) > $batch FROM jobbuf.jobs WHERE partition_key = 'z'")" = t
jb_wait_until "[ \"\$(jb_sql \"SELECT count(*) FROM jobbuf.jobs WHERE partition_key = '0'\")\" = 0 ]" 120 ||
  fail "partition 0's job was not delivered within 120 s"
position=$(jb_redis XRANGE jobbuf:tenants - + COUNT $((len + 4 * batch)) | grep -E '^[0-9]+-[0-9]+$|early' |
  grep -n early | head -n 1 | cut -d: -f1)
say "partition 0's job is entry $((position - 1)) of the stream, whose length was $len right after its commit"
expect_le "it was pushed within 2 × batch_size entries of that" "$((${position:-999999999} - 1))" $((len + 2 * batch))
jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 600 || fail "partition z's backlog was not delivered within 600 s"
expect_eq "every job delivered once" "$(jb_redis XLEN jobbuf:tenants)" $((BACKLOG + 1))
jb_redis DEL jobbuf:tenants >/dev/null

# Four partitions, staged interleaved: n mod 4 = 0 has no partition key.
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "INSERT INTO jobbuf.jobs (queue, payload, partition_key)
        SELECT 'tenants', jsonb_build_object('p', coalesce(k, 'none'), 'n', n), k
        FROM generate_series(1, 20000) n, LATERAL (SELECT CASE WHEN n % 4 = 0 THEN NULL ELSE 'p' || (n % 4) END) s(k)
        ORDER BY k NULLS FIRST, n" >/dev/null || fail "staging 20,000 jobs in four partitions"
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 120 || fail "the four partitions were not delivered within 120 s"
first=$(jb_redis XRANGE jobbuf:tenants - + COUNT "$batch")
for p in none p1 p2 p3; do
  got=$(grep -c "\"p\": \"$p\"" <<<"$first" || true)
  check "partition $p has a quarter of the first batch ($got of $batch)" test "$got" -ge $((batch / 4 - 1)) -a "$got" -le $((batch / 4 + 1))
done
all=$(jb_redis XRANGE jobbuf:tenants - +)
out_of_order=$(grep -oE '"p": "[a-z0-9]+", "n": [0-9]+|"n": [0-9]+, "p": "[a-z0-9]+"' <<<"$all" |
  sed -E 's/.*"p": "([a-z0-9]+)".*"n": ([0-9]+).*/\1 \2/; s/^"n": ([0-9]+), "p": "([a-z0-9]+)"$/\2 \1/' |
  awk '{ if (($1 in last) && $2 <= last[$1]) bad++; last[$1] = $2 } END { print bad + 0 }')
expect_eq "each partition's jobs in id order" "$out_of_order" 0
expect_eq "every job delivered once" "$(jb_redis XLEN jobbuf:tenants)" 20000
jb_redis DEL jobbuf:tenants >/dev/null

# More partitions than a batch holds, one job each: every batch's first round fills the batch
# and the next one goes on where it stopped; the same worker delivers all of them once.
pid_before=$(jb_sql "SELECT pid FROM jobbuf_worker_status()")
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled is off"
jb_sql "INSERT INTO jobbuf.jobs (queue, payload, partition_key)
        SELECT 'tenants', jsonb_build_object('p', 'k' || n, 'n', n), 'k' || n FROM generate_series(1, $((3 * batch + 7))) n" >/dev/null ||
  fail "staging jobs in $((3 * batch + 7)) partitions"
set_and_reload jobbuf.enabled on || fail "jobbuf.enabled is on"
jb_wait_until "[ \"\$(jb_sql 'SELECT count(*) FROM jobbuf.jobs')\" = 0 ]" 120 || fail "the many partitions were not delivered within 120 s"
expect_eq "a job per partition, $((3 * batch + 7)) partitions: each delivered once" \
  "$(jb_redis XRANGE jobbuf:tenants - + | grep -oE '"p": "k[0-9]+"' | sort -u | wc -l),$(jb_redis XLEN jobbuf:tenants)" "$((3 * batch + 7)),$((3 * batch + 7))"
expect_eq "the same worker all along" "$(jb_sql "SELECT running || ' ' || pid FROM jobbuf_worker_status()")" "true $pid_before"

refused=$(jb_psql -qtAX -c "SELECT jobbuf_create_queue('f1', 'list', '{\"fair_by\": \"queue\"}')" 2>&1)
expect_match "fair_by other than partition_key is refused" "$refused" 'option "fair_by" must be "partition_key"'
refused=$(jb_psql -qtAX -c "SELECT jobbuf_create_queue('f2', 'none', '{\"fair_by\": \"partition_key\"}')" 2>&1)
expect_match "fair_by on a none queue is refused" "$refused" 'option "fair_by" applies only to targets the worker pushes to'
refused=$(jb_psql -qtAX -c "SELECT jobbuf_alter_queue('tenants', '{\"delivery\": \"group\"}')" 2>&1)
expect_match "fair_by with delivery group is refused" "$refused" 'fair_by applies to delivery "each" only'
e2e_done

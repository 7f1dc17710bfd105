#!/usr/bin/env bash
# Batch consumers under concurrency: 10,000 jobs on a 'none' queue, 4 client processes (Ruby, pg
# gem) that each loop "claim ~100, record what they got, complete the group" until a claim comes
# back empty. Asserts: every job was taken exactly once, every complete counted exactly the jobs
# of its group, every client did work, and the queue is empty at the end. The clients
# overlap by construction, not by luck: each holds its first group, uncompleted, until every
# client holds one (claims that serialised or came back empty meanwhile fail the clients).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../harness/servers.sh
source "$ROOT/test/harness/servers.sh"

JOBS=${JOBS:-10000}
CLIENTS=${CLIENTS:-4}
BATCH=${BATCH:-100}

jb_start_redis
jb_start_postgres
OUT=$JB_RUN/claims
mkdir -p "$OUT"

jb_psql -q -o /dev/null <<SQL
SELECT jobbuf_create_queue('e2e_claims', 'none');
INSERT INTO jobbuf.jobs (queue, payload)
SELECT 'e2e_claims', jsonb_build_object('n', g) FROM generate_series(1, $JOBS) g;
SQL
staged=$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'e2e_claims'")
echo "staged $staged jobs; starting $CLIENTS clients claiming $BATCH at a time"

client() {
  ruby -rpg -e '
    name, host, port, batch, out, clients = ARGV
    conn = PG.connect(host: host, port: port.to_i, user: "postgres", dbname: ENV.fetch("JB_DB"))
    groups = 0
    File.open(out, "w") do |f|
      loop do
        rows = conn.exec_params("SELECT group_id, id FROM jobbuf_claim($1, $2)", ["e2e_claims", batch.to_i]).to_a
        raise "the first claim came back empty while others held groups" if rows.empty? && groups.zero?
        break if rows.empty?
        gids = rows.map { |r| r["group_id"] }.uniq
        raise "a claim returned #{gids.size} group ids" unless gids.size == 1
        rows.each { |r| f.puts "#{name} #{r["id"]}" }
        if groups.zero?  # hold the first group until every client holds one
          File.write("#{out}.holding", "")
          deadline = Time.now + 30
          until Dir.glob(File.join(File.dirname(out), "*.holding")).size == clients.to_i
            raise "not every client got a group within 30 s while this one held its own" if Time.now > deadline
            sleep 0.01
          end
        end
        done = conn.exec_params("SELECT jobbuf_complete($1)", [gids.first]).getvalue(0, 0).to_i
        raise "complete counted #{done} of #{rows.size} jobs" unless done == rows.size
        groups += 1
      end
    end
    warn "#{name}: #{groups} groups"
  ' "$1" "$JB_PGHOST" "$JB_PGPORT" "$BATCH" "$OUT/$1.txt" "$CLIENTS"
}

pids=()
for i in $(seq 1 "$CLIENTS"); do
  JB_DB=$JB_DB client "client$i" &
  pids+=($!)
done
client_failures=0
for pid in "${pids[@]}"; do
  wait "$pid" || client_failures=$((client_failures + 1))
done

failures=0
check() {  # check "what" condition-result(0/1)
  if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}

cat "$OUT"/*.txt > "$OUT/all.txt"
taken=$(wc -l < "$OUT/all.txt")
distinct=$(cut -d' ' -f2 "$OUT/all.txt" | sort -u | wc -l)
duplicates=$(cut -d' ' -f2 "$OUT/all.txt" | sort | uniq -d | wc -l)
active=0
for f in "$OUT"/client*.txt; do
  n=$(wc -l < "$f")
  echo "  $(basename "$f" .txt): $n jobs"
  [ "$n" -gt 0 ] && active=$((active + 1))
done
left=$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'e2e_claims'")
dead_count=$(jb_psql -qtAX -c "SELECT count(*) FROM jobbuf.dead WHERE queue = 'e2e_claims'")
echo "taken $taken, distinct $distinct, duplicates $duplicates, clients with work $active, left in jobbuf.jobs $left"

check "every client exited cleanly" "$([ "$client_failures" -eq 0 ]; echo $?)"
check "every staged job was taken ($taken of $JOBS)" "$([ "$taken" -eq "$JOBS" ]; echo $?)"
check "no job was taken twice" "$([ "$duplicates" -eq 0 ] && [ "$distinct" -eq "$JOBS" ]; echo $?)"
check "every client did work ($active of $CLIENTS)" "$([ "$active" -eq "$CLIENTS" ]; echo $?)"
check "jobbuf.jobs is empty for the queue" "$([ "$left" -eq 0 ]; echo $?)"
check "nothing was dead-lettered" "$([ "$dead_count" -eq 0 ]; echo $?)"

if [ "$failures" -gt 0 ]; then
  echo "claim_concurrency: $failures check(s) failed"
  exit 1
fi
echo "claim_concurrency: all checks passed"

# Checks shared by the end-to-end scripts that drive real consumers (Sidekiq, Node, Ruby), in TAP
# style: "ok   - what" / "FAIL - what", counted in $failures. Sourced from the repository root.
#
#   ok "what"; not_ok "what"; check "what" <command...>
#   rb_log 'ruby expression over runs'         # runs: the JSON lines of $RUN_LOG, parsed; prints it
#   rb_log_check 'ruby condition over runs'    # exit 0 when true
#   refused_with_hint QUEUE PAYLOAD PATTERN     # staging fails with PATTERN and a HINT
#   check_groups_finished FIELD N GROUP_ID...   # jobbuf_group + jobbuf_complete every group

failures=0
ok() { echo "ok   - $*"; }
not_ok() { echo "FAIL - $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

rb_log() {
  ruby -rjson -e 'runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }; v = eval(ARGV[1]); puts v' "$RUN_LOG" "$1"
}
rb_log_check() {
  ruby -rjson -e 'runs = File.readlines(ARGV[0]).map { |l| JSON.parse(l) }; exit(eval(ARGV[1]) ? 0 : 1)' "$RUN_LOG" "$1"
}

# refused_with_hint QUEUE PAYLOAD PATTERN: staging PAYLOAD on QUEUE fails in the producer's
# transaction with an error matching PATTERN and a HINT.
refused_with_hint() {
  local out
  out=$(jb_psql -v ON_ERROR_STOP=1 -c "SELECT jobbuf_stage('$1', '$2')" 2>&1) && return 1
  grep -q -- "$3" <<<"$out" && grep -q HINT <<<"$out"
}

# check_groups_finished FIELD N GROUP_ID...: the test as the consumer's group reader. Reads each
# group through jobbuf_group (the payload's FIELD, one line a job), finishes it with
# jobbuf_complete, and checks that the groups named N distinct jobs, each once, and that
# jobbuf.jobs is empty after.
check_groups_finished() {
  local field=$1 n=$2 g
  shift 2
  : >"$JB_RUN/group_members.txt"
  for g in "$@"; do
    jb_sql "SELECT payload->>'$field' FROM jobbuf_group('$g')" >>"$JB_RUN/group_members.txt"
    jb_sql "SELECT jobbuf_complete('$g')" >/dev/null
  done
  check "jobbuf_group read $n distinct jobs across the groups" \
    [ "$(sort -u "$JB_RUN/group_members.txt" | grep -c .)" = "$n" -a "$(grep -c . "$JB_RUN/group_members.txt")" = "$n" ]
  check "jobbuf.jobs is empty after jobbuf_complete" [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]
}

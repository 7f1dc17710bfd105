# Test harness (sourced by bash): the checks and server-log helpers that the end-to-end and
# fault scripts share. Each script counts its checks and ends with checks_done.
#
#   say "text"; pass "what"; fail "what"; check "what" <command...>
#   expect_eq "what" <actual> <expected>; expect_le "what" <n> <max>; expect_match "what" <text> <regex>
#   log_mark / log_since <mark> / count_lines <regex> <text>; now_ms; wait_worker_running [seconds]
#   checks_done     # prints the summary (and the server log's jobbuf lines on failure), exits 0 or 1

CHECKS_NAME=$(basename "$0" .sh)
CHECKS_FAILURES=0
CHECKS_TOTAL=0

say() { echo "  [$CHECKS_NAME] $*"; }
pass() { CHECKS_TOTAL=$((CHECKS_TOTAL + 1)); echo "  ok   $*"; }
fail() {
  CHECKS_TOTAL=$((CHECKS_TOTAL + 1))
  CHECKS_FAILURES=$((CHECKS_FAILURES + 1))
  echo "  FAIL $*"
}

# check "description" command args...: passes when the command succeeds.
check() {
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

expect_eq() {
  local shown=$2
  if [ ${#shown} -gt 80 ] || [[ $shown == *$'\n'* ]]; then shown="$(wc -l <<<"$2") lines"; fi
  if [ "$2" == "$3" ]; then pass "$1 ($shown)"; else fail "$1: got '${2:0:300}', expected '${3:0:300}'"; fi
}

expect_le() {
  if [ "$2" -le "$3" ]; then pass "$1 ($2 <= $3)"; else fail "$1: got $2, expected at most $3"; fi
}

expect_match() {
  if [[ $2 =~ $3 ]]; then pass "$1"; else fail "$1: '${2:0:300}' does not match /$3/"; fi
}

# expect_delivered "description" KEY N SECONDS: passes once the list KEY holds N jobs (with the
# time it took); otherwise fails with what Redis holds and the worker's last error.
expect_delivered() {
  local t0; t0=$(now_ms)
  if jb_wait_until "[ \"\$(jb_redis LLEN $2)\" = $3 ]" "$4"; then
    pass "$1 ($(( $(now_ms) - t0 )) ms)"
  else
    fail "$1: $(jb_redis LLEN "$2") of $3 jobs in $2 (last_error: $(jb_sql "SELECT last_error FROM jobbuf_worker_status()"))"
  fi
}

# Milliseconds since the epoch.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# log_mark: the current length of the server log; log_since <mark>: what was logged after it.
log_mark() { wc -l <"$JB_RUN/postgres.log"; }
log_since() { tail -n +"$(( $1 + 1 ))" "$JB_RUN/postgres.log"; }

# count_lines <pattern> <text>: lines of text matching the extended regex.
count_lines() { grep -cE -- "$1" <<<"$2" || true; }

wait_worker_running() {
  jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()" 2>/dev/null)" = t ]' "${1:-15}"
}

checks_done() {
  if [ "$CHECKS_FAILURES" -gt 0 ]; then
    echo "  [$CHECKS_NAME] $CHECKS_FAILURES of $CHECKS_TOTAL checks FAILED"
    if [ -n "${JB_RUN:-}" ] && [ -f "$JB_RUN/postgres.log" ]; then
      echo "  --- last jobbuf/error lines of the server log"
      grep -E 'jobbuf|ERROR|FATAL|PANIC|terminated|exited' "$JB_RUN/postgres.log" | tail -n 25 | sed 's/^/  | /'
    fi
    exit 1
  fi
  echo "  [$CHECKS_NAME] all $CHECKS_TOTAL checks passed"
  exit 0
}

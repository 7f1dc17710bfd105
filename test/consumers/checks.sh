# Checks shared by the end-to-end scripts that drive real consumers (Sidekiq, Node, Ruby), in TAP
# style: "ok   - what" / "FAIL - what", counted in $failures. Sourced from the repository root.
#
#   ok "what"; not_ok "what"; check "what" <command...>
#   rb_log 'ruby expression over runs'         # runs: the JSON lines of $RUN_LOG, parsed; prints it
#   rb_log_check 'ruby condition over runs'    # exit 0 when true

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

#!/usr/bin/env bash
# contrib/prometheus/alerts.yml passes `promtool check rules`, and `promtool test rules
# test/prometheus/alerts_test.yml` shows each alert (stalled drain, growing oldest-ready age, dead
# letters rising, Redis disconnected, worker missing, a queue held by Redis memory, a queue at
# max_in_redis; queues held back on purpose left out of the first two) firing on the series of its problem and
# clearing when it ends. The Grafana dashboard (contrib/grafana/jobbuf.json) is JSON whose
# queries parse as PromQL and name only metrics that queries.yaml makes. No servers.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
JB_RUN_DASH=$(mktemp -d /tmp/jobbuf-rules.XXXXXX)
trap 'rm -rf "$JB_RUN_DASH"' EXIT
command -v promtool >/dev/null || { fail "promtool is not installed (make deps: Debian's prometheus)"; e2e_done; }
out=$(promtool check rules "$ROOT/contrib/prometheus/alerts.yml" 2>&1)
check "promtool check rules: $(grep -o '[0-9]* rules found' <<<"$out")" grep -q SUCCESS <<<"$out"
expect_eq "eight alerts" "$(grep -c '^ *- alert: ' "$ROOT/contrib/prometheus/alerts.yml")" 8
for alert in $(grep -oE 'alert: [A-Za-z]+' "$ROOT/contrib/prometheus/alerts.yml" | cut -d' ' -f2); do
  expect_eq "$alert is tested firing and cleared" \
    "$(grep -c "alertname: $alert$" "$ROOT/test/prometheus/alerts_test.yml")" 3
done
out=$(cd "$ROOT/test/prometheus" && promtool test rules alerts_test.yml 2>&1)
if grep -q SUCCESS <<<"$out"; then pass "promtool test rules alerts_test.yml"; else fail "promtool test rules: $out"; fi

# The dashboard: every query parses (as a recording rule) and names metrics the exporter makes.
rules=$JB_RUN_DASH/dashboard_rules.yml
ruby -rjson -ryaml -e '
  d = JSON.parse(File.read(ARGV[0]))
  exprs = d["panels"].flat_map { |p| p["targets"].map { |t| t["expr"].gsub("$datname", ".*").gsub("$queue", ".*") } }
  File.write(ARGV[1], { "groups" => [{ "name" => "dashboard", "rules" => exprs.each_with_index.map { |e, i| { "record" => "dashboard:q#{i}", "expr" => e } } }] }.to_yaml)
  names = exprs.flat_map { |e| e.scan(/jobbuf_[a-z0-9_]+/) }.uniq
  made = File.read(ARGV[2]).scan(/^(jobbuf[a-z_]*):/).flatten.product(File.read(ARGV[2]).scan(/^    - ([a-z0-9_]+):/).flatten).map { |a, b| "#{a}_#{b}" }
  puts names.reject { |n| made.include?(n) }.join(" ")
' "$ROOT/contrib/grafana/jobbuf.json" "$rules" "$ROOT/contrib/prometheus/queries.yaml" >"$JB_RUN_DASH/unknown" || fail "contrib/grafana/jobbuf.json is not valid JSON"
out=$(promtool check rules "$rules" 2>&1)
check "the dashboard's queries parse: $(grep -o '[0-9]* rules found' <<<"$out")" grep -q SUCCESS <<<"$out"
expect_eq "the dashboard names no metric the exporter does not make" "$(cat "$JB_RUN_DASH/unknown")" ""
e2e_done

#!/usr/bin/env bash
# contrib/prometheus/alerts.yml passes `promtool check rules`, and `promtool test rules
# test/prometheus/alerts_test.yml` shows each alert (stalled drain, growing oldest-ready age, dead
# letters rising, Redis disconnected, worker missing) firing on the series of its problem and
# clearing when it ends. No servers.
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
command -v promtool >/dev/null || { fail "promtool is not installed (make deps: Debian's prometheus)"; e2e_done; }
out=$(promtool check rules "$ROOT/contrib/prometheus/alerts.yml" 2>&1)
check "promtool check rules: $(grep -o '[0-9]* rules found' <<<"$out")" grep -q SUCCESS <<<"$out"
expect_eq "five alerts" "$(grep -c '^ *- alert: ' "$ROOT/contrib/prometheus/alerts.yml")" 5
for alert in $(grep -oE 'alert: [A-Za-z]+' "$ROOT/contrib/prometheus/alerts.yml" | cut -d' ' -f2); do
  expect_eq "$alert is tested firing and cleared" \
    "$(grep -c "alertname: $alert$" "$ROOT/test/prometheus/alerts_test.yml")" 3
done
out=$(cd "$ROOT/test/prometheus" && promtool test rules alerts_test.yml 2>&1)
if grep -q SUCCESS <<<"$out"; then pass "promtool test rules alerts_test.yml"; else fail "promtool test rules: $out"; fi
e2e_done

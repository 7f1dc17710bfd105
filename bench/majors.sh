#!/usr/bin/env bash
# `make bench PG="15 17 18"`: bench/run.sh on several PostgreSQL majors in one run, one after the
# other (never side by side: they share the machine's cores), and one table with a column per
# major. 15 runs on this machine (its PostgreSQL 15 and Redis 7.0); the others inside the Debian
# root that carries them (scripts/root.sh: 17 with Redis 8.0, 18 and 19 with Valkey 9), with the
# working tree copied in and built there. Each major's own output and summary are printed as they
# come; the combined table is printed last. See bench/README.md.
#   bash bench/majors.sh MAJOR...
# BENCH_PHASES defaults to "drain latency" here; every other BENCH_* setting of bench/run.sh is
# passed on unchanged. A root that cannot be made is reported as NOT MEASURED with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { sed -n '2,10p' "$0"; exit 2; }

export BENCH_PHASES=${BENCH_PHASES:-drain latency}
out=$(mktemp -d /tmp/jobbuf-bench-majors.XXXXXX)
trap 'rm -rf "$out"' EXIT
columns=() not_measured=() failed=()

# The BENCH_* settings of this run, passed into the roots as they are.
settings=$(env | grep -E '^BENCH_[A-Z_]+=' | grep -v '^BENCH_RESULTS=' | sed -E "s/^([^=]+)=(.*)$/\1='\2'/" | tr '\n' ' ')

for major in "$@"; do
  started=$SECONDS
  echo "##### bench on PostgreSQL $major"
  if [ "$major" = 15 ]; then
    if BENCH_RESULTS=$out/$major bash bench/run.sh; then columns+=("$major=$out/$major"); else failed+=("$major"); fi
  else
    name=$(bash scripts/root.sh of-major "$major")
    rc=0
    made=$(bash scripts/root.sh make "$name" 2>&1) || rc=$?
    [ -z "$made" ] || echo "$made"
    if [ $rc -ne 0 ]; then
      not_measured+=("$major: $(echo "$made" | grep 'NOT TESTED' | tail -n 1 | sed 's/NOT TESTED: //')")
      continue
    fi
    bash scripts/root.sh copy "$name"
    dir=$(bash scripts/root.sh path "$name")
    rm -f "$dir/build/bench-results"
    if bash scripts/root.sh run "$name" \
         "export PATH=/usr/lib/postgresql/$major/bin:\$PATH JB_REDIS=$(bash scripts/root.sh redis "$name") $settings
          cd /build/jobbuf && BENCH_RESULTS=/build/bench-results bash bench/run.sh"; then
      cp "$dir/build/bench-results" "$out/$major"
      columns+=("$major=$out/$major")
    else
      failed+=("$major")
    fi
  fi
  echo "##### bench on PostgreSQL $major took $((SECONDS - started)) s"
done

echo
echo "##### summary: $BENCH_PHASES on PostgreSQL $*"
echo "uptime at end: $(uptime)"
if [ ${#columns[@]} -gt 0 ]; then
  ruby bench/majors_report.rb "BENCH_JOBS=${BENCH_JOBS:-1000000} fsync=${BENCH_FSYNC:-off} batch=${BENCH_BATCH:-1000}" "${columns[@]}"
fi
for n in "${not_measured[@]}"; do echo "##### NOT MEASURED on PostgreSQL $n"; done
for n in "${failed[@]}"; do echo "##### bench FAILED on PostgreSQL $n (see above)"; done
[ ${#failed[@]} -eq 0 ]

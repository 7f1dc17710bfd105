#!/usr/bin/env bash
# The host's side of BENCH_FAIR_PERF_DIR (bench/run.sh phase_fair): perf is on the machine, not in
# the Debian roots, and a root shares the machine's process ids. Serves each profile request of the
# fair phase with `perf record -g -p PID`, then writes the report (perf finds the root's binaries
# and their symbols through /proc/PID/root by itself).
#   bash bench/fair_perf_host.sh HOST_DIR OUT_DIR
# HOST_DIR: BENCH_FAIR_PERF_DIR as the machine sees it (<the root's directory>/<the path>);
# OUT_DIR: where LABEL.data and LABEL.txt go. Runs until killed (by its pid).
set -euo pipefail
dir=$1 out=$2
mkdir -p "$dir" "$out"
while :; do
  [ -e "$dir/request" ] || { sleep 0.05; continue; }
  read -r label pid <"$dir/request"
  rm -f "$dir/request"
  perf record -F 999 -g -p "$pid" -o "$out/$label.data" >/dev/null 2>&1 &
  perf_pid=$!
  sleep 0.3
  touch "$dir/started"
  while [ ! -e "$dir/stop" ]; do sleep 0.05; done
  kill -INT "$perf_pid"; wait "$perf_pid" || true
  touch "$dir/stopped"
  { echo "### $label: inclusive (children), >= 1.5%"
    perf report -i "$out/$label.data" --stdio --children --sort sym -g none --percent-limit 1.5 2>/dev/null | grep -v '^#' | grep -v '^$'
    echo "### $label: self, >= 0.7%"
    perf report -i "$out/$label.data" --stdio --no-children --sort dso,sym -g none --percent-limit 0.7 2>/dev/null | grep -v '^#' | grep -v '^$'
  } >"$out/$label.txt" 2>&1 || true
done

#!/usr/bin/env bash
# Load beside a test run (test/run.sh starts it when STRESS=1, e.g. `make test STRESS=1`), so that
# a test that holds only on a quiet machine fails here first: one busy loop per core at nice 0,
# and a writer that rewrites a 64 MB file with fsync in a loop (in a directory of its own under
# TMPDIR, where the tests' clusters live too). Runs until it gets SIGTERM / SIGINT or until the
# process it watches (its first argument, default its parent) is gone, so that nothing of it
# outlives the run even when the run is killed; then stops its children and removes its file.
# Needs only bash and coreutils (it also runs inside the Debian roots of test/platforms.sh).
#   bash test/harness/stress.sh [PID] &   ...   kill $!
set -u
watched=${1:-$PPID}
dir=$(mktemp -d "${TMPDIR:-/tmp}/jobbuf-stress.XXXXXX") || exit 1
pids=()

stop() {
  trap '' TERM INT
  kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$dir"
  exit 0
}
trap stop TERM INT HUP

for _ in $(seq "$(nproc)"); do
  ( while :; do :; done ) &
  pids+=($!)
done

# dd runs as a child of the loop: the loop stops it (and waits for it) before it ends itself.
(
  dd=
  trap 'kill $dd 2>/dev/null; wait $dd 2>/dev/null; exit 0' TERM
  while :; do
    dd if=/dev/zero of="$dir/fsync.dat" bs=1M count=64 conv=fsync status=none &
    dd=$!
    wait "$dd"
  done
) &
pids+=($!)

while kill -0 "$watched" 2>/dev/null; do
  sleep 1 &
  wait $!
done
stop

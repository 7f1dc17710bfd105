#!/usr/bin/env bash
# Runs jobbuf's suites on the PostgreSQL majors and Redis servers that Debian 12 does not carry,
# each inside a Debian root made and cached by scripts/root.sh (see docs/internals/testing.md).
#   test/platforms.sh                 the part of `make test` after the host's own 15 run: the
#                                     suites below on 17, 18 and 19, and the Valkey 8 run
#   test/platforms.sh PART [SUITE]... one part, every suite unless suites are named (the names of
#                                     test/run.sh); `make test PG=17` runs `test/platforms.sh 17`
# Parts: 17 (Debian 13 root: PostgreSQL 17, Redis 8.0), 18 (forky root: PostgreSQL 18, Valkey 9),
#        19 (forky root with the newest postgresql-19 the mirror carries: today Debian experimental's
#        19~rc1; Valkey 9), valkey8 (Debian 12 root with backports: PostgreSQL 15, Valkey 8.0).
# The working tree (with its git history, which the upgrade tests build old releases from) is
# copied into the root's /build/jobbuf and built there. A root that cannot be made is reported
# as NOT TESTED with the reason: a failure for the required majors (17, 18, 19), a loud report for
# valkey8 (JOBBUF_ROOTS_REQUIRED=1 makes that a failure too).
set -euo pipefail
cd "$(dirname "$0")/.."

# On 17, 18 and 19: every suite that touches the server's C API (the direct insert, the worker, the
# launcher, the GUC walk and the settings' hooks, the catalog, updates from 1.0, 1.1 and 1.2, the
# installation identity and the storage rotation with its locks), and each framework's consumer
# against the root's own Sidekiq, ActiveJob and Celery (plain Sidekiq::Job made transactional too).
PG_SUITES=(
  regress pgtap isolation upgrade
  test/e2e/commit_rollback.sh test/e2e/plain_insert.sh test/e2e/take_paths.sh
  test/e2e/run_at.sh test/e2e/settings.sh test/e2e/worker_status.sh
  test/e2e/every_database.sh test/e2e/drop_database.sh test/e2e/drop_extension.sh
  test/e2e/create_extension_wakeup.sh test/e2e/not_preloaded.sh test/e2e/shutdown.sh
  test/e2e/backup_restore.sh test/e2e/claim_concurrency.sh test/e2e/retry_dead_after_restart.sh
  test/e2e/sidekiq_each.sh test/e2e/sidekiq_group.sh test/e2e/activejob_sidekiq.sh
  test/e2e/celery.sh test/e2e/bullmq.sh
  test/faults/hostile_gucs.sh test/faults/hostile_database_settings.sh
  test/faults/hostile_roles.sh test/faults/hostile_lifecycle.sh test/faults/kill_one_worker.sh
  test/faults/standby_promotion.sh
  test/e2e/copies.sh test/e2e/held_unique_keys.sh test/e2e/held_snapshot.sh test/faults/live_clone.sh
  test/faults/refused_settings.sh
  test/e2e/rotation_locks.sh test/e2e/rotation_snapshots.sh test/e2e/rotation_large_job.sh test/e2e/logical_replication.sh
  test/faults/clone_redis_outage.sh test/e2e/redis_password_masked.sh
  test/e2e/clients_sidekiq.sh
  test/e2e/failing_queue.sh test/e2e/drain_slots.sh test/e2e/census_steps.sh
)
# 17 and 18 ship one ActiveJob (7.2): the gem's own tests once, on 17.
PG17_EXTRA=(test/e2e/activejob_adapter.sh)
# On 18 the Redis-facing suites once on a Valkey 9 server: the pure C++ unit tests (also OpenSSL
# 3.5, hiredis 1.2), TLS, Sentinel and the delivery faults.
PG18_EXTRA=(unit test/e2e/tls.sh test/faults/sentinel_failover.sh test/faults/delivery_faults.sh test/faults/redis_memory_guard.sh)
# Valkey 8.0 on PostgreSQL 15: the Redis-facing suites (the server's C API is the host run's).
VALKEY8_SUITES=(unit test/e2e/tls.sh test/e2e/redis_outage.sh test/faults/sentinel_failover.sh
  test/faults/delivery_faults.sh test/faults/hostile_redis_runtime.sh test/faults/redis_maxmemory.sh test/faults/redis_memory_guard.sh
  test/faults/stale_batch_after_hang.sh)


part_root() {
  case $1 in
    valkey8) echo bookworm-valkey ;;
    17|18|19) bash scripts/root.sh of-major "$1" ;;
    *) echo "test/platforms.sh: no part '$1' (17, 18, 19, valkey8)" >&2; exit 2 ;;
  esac
}

not_tested=() not_run=() failed_parts=()

# not_run_here PART WHY SUITE...: names, in the output, the suites of a full run (test/run.sh's)
# that PART leaves out, and why; nothing when SUITE... is empty (a full run).
not_run_here() {
  local part=$1 why=$2; shift 2
  [ $# -gt 0 ] || return 0
  local named=" $* " s left=()
  for s in unit regress pgtap isolation upgrade test/e2e/*.sh test/faults/*.sh; do
    case $s in
      test/e2e/*) [[ $named == *" $s "* || $named == *" e2e "* ]] && continue ;;
      test/faults/*) [[ $named == *" $s "* || $named == *" faults "* ]] && continue ;;
      *) [[ $named == *" $s "* ]] && continue ;;
    esac
    left+=("$(basename "$s" .sh)")
  done
  [ ${#left[@]} -gt 0 ] || return 0
  echo "##### part $part: NOT RUN here (${#left[@]}; $why): ${left[*]}"
  not_run+=("$part: ${#left[@]} suites ($why)")
}

# run_part PART SUITE...: makes the root, copies the tree in, runs test/run.sh there.
run_part() {
  local part=$1; shift
  local name started=$SECONDS rc=0
  name=$(part_root "$part")
  echo "##### part $part: root $name"
  local made
  made=$(bash scripts/root.sh make "$name" 2>&1) || rc=$?
  [ -z "$made" ] || echo "$made"
  if [ $rc -ne 0 ]; then
    not_tested+=("$part: $(echo "$made" | grep 'NOT TESTED' | tail -n 1)")
    echo "##### part $part: NOT TESTED"
    case $part in 17|18|19) echo "##### part $part: PostgreSQL $part is a required major"; return 1 ;; esac
    return 0
  fi
  local major why
  major=$(bash scripts/root.sh pg "$name")
  case $part in
    valkey8) why="the Redis-facing suites only; the server's C API runs on the host's 15" ;;
    *) why="same code paths as on 15, where they run; docs/internals/testing.md" ;;
  esac
  not_run_here "$part" "$why" "$@"
  bash scripts/root.sh copy "$name"
  rc=0
  local failed_file=${JOBBUF_ROOTS:-/var/cache/jobbuf/roots}/$name/build/jobbuf/.failed-suites
  rm -f "$failed_file"
  bash scripts/root.sh run "$name" \
    "export PATH=/usr/lib/postgresql/$major/bin:\$PATH JB_REDIS=$(bash scripts/root.sh redis "$name") JOBBUF_ROOT=/build/jobbuf STRESS=${STRESS:-} JB_FAILED_FILE=/build/jobbuf/.failed-suites
     cd /build/jobbuf && bash test/run.sh $*" || rc=$?
  echo "##### part $part took $((SECONDS - started)) s ($([ $rc -eq 0 ] && echo passed || echo FAILED))"
  [ $rc -eq 0 ] || failed_parts+=("$part: $(cat "$failed_file" 2>/dev/null || echo "(its output above)")")
  return $rc
}

# The Node consumer's locked modules are installed here (npm is not in the roots).
bash test/consumers/install.sh

status=0
if [ $# -eq 0 ]; then
  run_part 17 "${PG_SUITES[@]}" "${PG17_EXTRA[@]}" || status=1
  run_part 18 "${PG18_EXTRA[@]}" "${PG_SUITES[@]}" || status=1
  run_part 19 "${PG_SUITES[@]}" || status=1
  run_part valkey8 "${VALKEY8_SUITES[@]}" || status=1
else
  part=$1; shift
  run_part "$part" "$@" || status=1
fi

for n in "${not_run[@]}"; do echo "##### NOT RUN on part $n: named above"; done
for n in "${not_tested[@]}"; do echo "##### NOT TESTED $n"; done
for n in "${failed_parts[@]}"; do echo "##### FAILED on part $n"; done
if [ ${#not_tested[@]} -gt 0 ] && [ "${JOBBUF_ROOTS_REQUIRED:-}" = 1 ]; then status=1; fi
if [ $status -eq 0 ]; then
  [ ${#not_tested[@]} -eq 0 ] && echo "##### platforms: all parts passed" ||
    echo "##### platforms: the parts that ran passed; ${#not_tested[@]} NOT TESTED (above)"
else
  echo "##### platforms: FAILURES (see above)"
fi
exit $status

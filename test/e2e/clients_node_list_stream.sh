#!/usr/bin/env bash
# End-to-end: the Node client's stage() into `list` and `stream` queues inside node-postgres and
# Knex transactions (every 10th rolled back), read by an ioredis consumer (BLPOP; XREADGROUP and
# XACK): each committed payload exactly once, the stream entry's id the one stage() returned,
# no rolled-back payload (clients/node/test/list_stream.cjs).
source "$(dirname "$0")/tools/lib.sh"
ROOT=$E2E_ROOT
bash "$ROOT/test/clients/install_node.sh"

e2e_start
jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('events_list', 'list');
SELECT jobbuf_create_queue('events_stream', 'stream');
SQL
node "$ROOT/clients/node/test/list_stream.cjs" stage "postgres://postgres@127.0.0.1:$JB_PGPORT/$JB_DB" \
  "$JB_RUN/expected.json" >"$JB_RUN/stage.out" 2>&1
expect_eq "staging through node-postgres and Knex" "$?" 0
sed 's/^/  /' "$JB_RUN/stage.out"
wait_staged 0   # delivered: the worker pushes, then commits
node "$ROOT/clients/node/test/list_stream.cjs" verify "redis://127.0.0.1:$JB_REDIS_PORT/0" "$JB_RUN/expected.json" \
  >"$JB_RUN/verify.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/verify.out"
expect_eq "the ioredis consumer read exactly the committed jobs" "$status" 0
e2e_done

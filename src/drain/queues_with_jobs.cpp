// Postgres regime: the queues a full pass looks at (see queues_with_jobs.h).
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "drain/pending_queues.h"
#include "drain/queues_with_jobs.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "utils/builtins.h"
}

namespace {

SPIPlanPtr queues_plan = nullptr;

}  // namespace

bool mark_queues_with_jobs(void)
{
    begin_worker_transaction("jobbuf: finding the queues that hold jobs");
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();
        return false;
    }
    // Two skip scans (a recursive step per queue: the first entry above the last queue found),
    // over jobs_waiting (queue, owner, id) WHERE group_id IS NULL and jobs_leased (queue,
    // lease_until) WHERE group_id IS NOT NULL. Schema-qualified throughout (worker_session.cpp).
    kept_plan(&queues_plan,
              "WITH RECURSIVE waiting(queue) AS ("
              "  (SELECT j.queue FROM jobbuf.jobs j WHERE j.group_id IS NULL ORDER BY j.queue LIMIT 1)"
              "  UNION ALL"
              "  SELECT (SELECT j.queue FROM jobbuf.jobs j"
              "          WHERE j.group_id IS NULL AND j.queue OPERATOR(pg_catalog.>) w.queue"
              "          ORDER BY j.queue LIMIT 1)"
              "  FROM waiting w WHERE w.queue IS NOT NULL"
              "), leased(queue) AS ("
              "  (SELECT j.queue FROM jobbuf.jobs j WHERE j.group_id IS NOT NULL ORDER BY j.queue LIMIT 1)"
              "  UNION ALL"
              "  SELECT (SELECT j.queue FROM jobbuf.jobs j"
              "          WHERE j.group_id IS NOT NULL AND j.queue OPERATOR(pg_catalog.>) l.queue"
              "          ORDER BY j.queue LIMIT 1)"
              "  FROM leased l WHERE l.queue IS NOT NULL"
              ")"
              " SELECT w.queue FROM waiting w WHERE w.queue IS NOT NULL"
              " UNION SELECT l.queue FROM leased l WHERE l.queue IS NOT NULL",
              0, nullptr);
    execute_kept(queues_plan, nullptr, nullptr, true, SPI_OK_SELECT, "finding the queues that hold jobs");
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull = false;
        Datum name = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        char* queue = TextDatumGetCString(name);
        want_queue_named(queue);
    }
    commit_worker_transaction();
    return true;
}

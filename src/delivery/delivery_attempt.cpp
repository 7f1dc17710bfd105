// Postgres regime: the brackets of a delivery attempt (see delivery_attempt.h).
#include "pg_includes.h"

#include "delivery/delivery_attempt.h"
#include "drain/active_queues.h"
#include "worker/worker_transaction.h"

bool begin_delivery_transaction(const char* activity, BatchResult* result)
{
    begin_worker_transaction(activity);
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();
        result->outcome = BatchOutcome::Locked;
        return false;
    }
    return true;
}

bool queue_list_still_current(BatchResult* result)
{
    if (!active_queues_changed())
        return true;
    abort_worker_transaction();
    result->outcome = BatchOutcome::Stale;
    return false;
}

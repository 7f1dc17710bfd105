// Postgres regime: queues a Redis deployment cannot take, kept staged and reported (see
// refused_targets.h).
#include "pg_includes.h"

#include "config/shared_state.h"
#include "delivery/delivery_stats.h"
#include "drain/refused_targets.h"
#include "status/problem_log.h"
#include "worker/worker_transaction.h"

namespace {

// The message of the last set of refused queues noted in jobbuf_stats() ("" when none).
char noted[kStatusErrorLen];

}  // namespace

bool target_refused(const jobbuf::redis::DrainSession* session, const ActiveQueue* q)
{
    char why[jobbuf::redis::kMessageLen];
    return jobbuf::redis::drain_session_refuses_target(session, q->target, why, sizeof(why));
}

void note_refused_targets(const jobbuf::redis::DrainSession* session, const ActiveQueue* queues, int nqueues)
{
    char names[kStatusErrorLen] = "";
    char why[jobbuf::redis::kMessageLen] = "";
    int refused = 0;
    for (int k = 0; k < nqueues; k++) {
        char reason[jobbuf::redis::kMessageLen];
        if (!jobbuf::redis::drain_session_refuses_target(session, queues[k].target, reason, sizeof(reason)))
            continue;
        if (refused++ == 0)
            strlcpy(why, reason, sizeof(why));
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s\"%s\"", refused > 1 ? ", " : "",
                 queues[k].name);
    }
    if (refused == 0) {
        noted[0] = '\0';
        report_recovered(ProblemKind::Target, "every queue's target can be delivered to this Redis deployment again");
        return;
    }
    char message[kStatusErrorLen];
    snprintf(message, sizeof(message),
             refused > 1 ? "queues %s are not delivered and their jobs stay staged: %s"
                         : "queue %s is not delivered and its jobs stay staged: %s",
             names, why);
    report_problem(ProblemKind::Target, message);
    if (strcmp(noted, message) == 0)
        return;
    begin_worker_transaction("jobbuf: noting queues this Redis deployment cannot take");
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();  // DDL holds them: noted at a later pass
        return;
    }
    for (int k = 0; k < nqueues; k++) {
        char reason[jobbuf::redis::kMessageLen];
        if (jobbuf::redis::drain_session_refuses_target(session, queues[k].target, reason, sizeof(reason)))
            record_batch(queues[k].name, 0, 0, reason);
    }
    commit_worker_transaction();
    strlcpy(noted, message, sizeof(noted));
}

// Postgres regime: the memory guard's room for a batch (see memory_room.h).
#include "pg_includes.h"

#include "delivery/memory_room.h"
#include "status/problem_log.h"

using jobbuf::redis::MemoryNotice;
using jobbuf::redis::SessionReport;

namespace {

// One guard line: a WARNING when the problem starts (report_problem: also last_error while it
// lasts), a LOG when it ends.
void log_notice(const MemoryNotice& notice, ProblemKind kind)
{
    if (notice.level == MemoryNotice::Level::Warning)
        report_problem(kind, notice.text);
    else if (notice.level == MemoryNotice::Level::Log)
        report_recovered(kind, notice.text);
}

}  // namespace

bool memory_room_for(DrainContext* ctx, const ActiveQueue* q, jobbuf::redis::MemoryRoom* room, BatchResult* result)
{
    jobbuf::redis::MemoryNotices notices;
    SessionReport report = jobbuf::redis::drain_session_memory_room(ctx->session, *ctx->waiter, q->target, room, &notices);
    ctx->waiter->raise_pending();
    log_notice(notices.info, ProblemKind::RedisInfo);
    log_notice(notices.eviction, ProblemKind::RedisEviction);
    log_notice(notices.memory, ProblemKind::RedisMemory);
    if (report.status == SessionReport::Status::Ok && (!room->limited || room->room_bytes > 0))
        return true;
    result->outcome = report.status == SessionReport::Status::Ok || report.status == SessionReport::Status::Full
                          ? BatchOutcome::MemoryFull
                          : outcome_of(report.status);
    set_batch_message(result, report.message);
    return false;
}

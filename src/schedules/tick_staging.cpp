// Postgres regime: when the drain worker stages ticks (tick_staging.h). It keeps the next tick of
// any schedule of its database, as jobbuf.stage_due_ticks() last returned it, and calls it again
// when that tick comes, when a commit changed jobbuf.schedules (schedules_generation in its
// slot), and at least every poll_interval: one index probe, whatever the number of schedules.
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "metadata/extension_version.h"
#include "schedules/tick_staging.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace {

constexpr long kRetryMs = 1000;  // after an error, or while DDL holds the tables

bool known = false;            // next_tick_at is what the last call returned
TimestampTz next_tick_at = 0;  // 0: no schedule fires (with known)
uint32 seen_generation = 0;    // schedules_generation at the last call
TimestampTz retry_at = 0;      // no call before this (an error, a lock)
TimestampTz checked_at = 0;    // the last call's end: called again a poll_interval later at most

uint32 current_generation(void)
{
    return my_drain_slot ? pg_atomic_read_u32(&my_drain_slot->schedules_generation) : 0;
}

bool lock_schedules(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    Oid relid = OidIsValid(schema) ? get_relname_relid("schedules", schema) : InvalidOid;
    return OidIsValid(relid) && ConditionalLockRelationOid(relid, RowExclusiveLock);
}

}  // namespace

// At least every poll_interval: a due schedule that a jobbuf_schedule in progress held locked,
// and that then rolled back, is taken at the next poll (a commit wakes the worker at once).
long ticks_due_in_ms(void)
{
    TimestampTz now = GetCurrentTimestamp();
    if (current_generation() != seen_generation || !known)
        return retry_at > now ? static_cast<long>((retry_at - now) / 1000) + 1 : 0;
    TimestampTz at = TimestampTzPlusMilliseconds(checked_at, jobbuf_poll_interval);
    if (next_tick_at != 0)
        at = Min(at, next_tick_at);
    at = Max(at, retry_at);
    return at <= now ? 0 : static_cast<long>((at - now) / 1000) + 1;
}

void stage_due_ticks_if_due(void)
{
    if (RecoveryInProgress() || ticks_due_in_ms() > 0)
        return;
    TimestampTz started = GetCurrentTimestamp();
    uint32 generation = current_generation();  // a change committed from now on is seen next time
    retry_at = TimestampTzPlusMilliseconds(started, kRetryMs);  // also after an error
    begin_worker_transaction("jobbuf: staging the due ticks of schedules");
    if (installed_jobbuf().state != InstalledExtension::Current) {
        commit_worker_transaction();  // no extension, or SQL older than the library: looked at later
        known = false;
        return;
    }
    if (!lock_schedules() || !lock_jobbuf_tables()) {
        abort_worker_transaction();  // DDL holds them: tried again shortly
        known = false;
        return;
    }
    if (SPI_execute("SELECT jobbuf.stage_due_ticks()", false, 1) != SPI_OK_SELECT || SPI_processed != 1)
        elog(ERROR, "jobbuf: jobbuf.stage_due_ticks() failed");
    bool isnull = false;
    Datum next = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    TimestampTz next_at = isnull ? 0 : DatumGetTimestampTz(next);
    commit_worker_transaction();
    next_tick_at = next_at;
    known = true;
    seen_generation = generation;
    retry_at = 0;
    checked_at = GetCurrentTimestamp();
}

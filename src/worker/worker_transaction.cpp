// Postgres regime: transaction brackets and kept-plan execution for the drain worker.
#include "pg_includes.h"

#include "worker/worker_transaction.h"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

void execute_kept(SPIPlanPtr plan, Datum* values, const char* nulls, bool read_only, int expected, const char* what)
{
    int rc = SPI_execute_plan(plan, values, nulls, read_only, 0);
    if (rc != expected)
        elog(ERROR, "jobbuf: %s failed: %s", what, SPI_result_code_string(rc));
}

void begin_worker_transaction(const char* activity)
{
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, activity);
}

void commit_worker_transaction(void)
{
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_stat(false);  // lets autovacuum see the worker's deletes
    pgstat_report_activity(STATE_IDLE, nullptr);
}

void abort_worker_transaction(void)
{
    SPI_finish();
    PopActiveSnapshot();
    AbortCurrentTransaction();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

double now_epoch_seconds(void)
{
    TimestampTz now = GetCurrentTimestamp();
    return static_cast<double>(now) / USECS_PER_SEC +
           static_cast<double>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
}

bool lock_jobbuf_tables(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    if (!OidIsValid(schema))
        return false;
    static const struct {
        const char* name;
        LOCKMODE mode;
    } tables[] = {{"queues", AccessShareLock},
                  {"jobs", RowExclusiveLock},
                  {"queue_stats", RowExclusiveLock},
                  {"dead", RowExclusiveLock},
                  {"delivery_counter", RowExclusiveLock}};
    for (const auto& table : tables) {
        Oid relid = get_relname_relid(table.name, schema);
        if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, table.mode))
            return false;
    }
    return true;
}

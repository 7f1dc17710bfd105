// Postgres regime: jobbuf_worker_status(), the drain workers' state as published in shared
// memory. Two C symbols: jobbuf_worker_status_all (1.1: one row per drain worker and per database
// left without one by jobbuf.max_workers, from any database; other databases' errors and
// delivery counters only for superusers and pg_monitor) and jobbuf_worker_status (what 1.0's
// SQL declares: one row, the worker of the current database).
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "launcher/database_list.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace {

constexpr int kColumns =
    9;  // pid, database, running, redis_connected, last_error, last_error_at, wakeups, batches, delivered

struct StatusRow {
    Datum values[kColumns];
    bool nulls[kColumns];
};

void no_worker_row(StatusRow* row, const char* database, const char* why)
{
    memset(row->nulls, 0, sizeof(row->nulls));
    row->nulls[0] = row->nulls[3] = row->nulls[5] = true;
    row->values[1] = CStringGetTextDatum(database);
    row->values[2] = BoolGetDatum(false);
    row->values[4] = CStringGetTextDatum(why);
    row->values[6] = row->values[7] = row->values[8] = Int64GetDatum(0);
}

// Whether the caller may read other databases' errors (they name Redis hosts, ports and TLS
// file paths) and delivery counters (another tenant's traffic): a superuser or a member of
// pg_monitor. The function runs as its definer, so the
// caller is the outer user.
bool sees_every_error(void)
{
    Oid caller = GetOuterUserId();
    return superuser_arg(caller) || has_privs_of_role(caller, ROLE_PG_MONITOR);
}

// show_private: last_error, last_error_at and the counters (NULL otherwise).
void slot_row(StatusRow* row, DrainSlot* s, bool show_private)
{
    SpinLockAcquire(&s->mutex);
    pid_t pid = s->worker_pid;
    bool connected = s->redis_connected;
    char last_error[kStatusErrorLen];
    memcpy(last_error, s->last_error, sizeof(last_error));
    TimestampTz last_error_at = s->last_error_at;
    SpinLockRelease(&s->mutex);
    last_error[kStatusErrorLen - 1] = '\0';
    char database[NAMEDATALEN];
    strlcpy(database, s->database_name, sizeof(database));

    memset(row->nulls, 0, sizeof(row->nulls));
    row->values[0] = Int32GetDatum(pid);
    row->nulls[0] = pid == 0;
    row->values[1] = CStringGetTextDatum(database);
    row->values[2] = BoolGetDatum(pid != 0);
    row->values[3] = BoolGetDatum(connected);
    row->values[4] = CStringGetTextDatum(last_error);
    row->nulls[4] = last_error[0] == '\0' || !show_private;
    row->values[5] = TimestampTzGetDatum(last_error_at);
    row->nulls[5] = last_error_at == 0 || !show_private;
    row->values[6] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->wakeups)));
    row->values[7] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->batches)));
    row->values[8] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->delivered)));
    row->nulls[6] = row->nulls[7] = row->nulls[8] = !show_private;
}

constexpr const char* kNotPreloaded = "jobbuf is not in shared_preload_libraries: no worker runs";

}  // namespace

// 1.1: every drain worker, then the databases the cap left without one.
JOBBUF_SQL_FUNCTION(jobbuf_worker_status_all)
{
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    StatusRow row;
    if (jobbuf_cluster == nullptr) {
        no_worker_row(&row, jobbuf_database ? jobbuf_database : "", kNotPreloaded);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
        return (Datum)0;
    }
    const bool every_error = sees_every_error();  // and every counter
    for (int i = 0; i < jobbuf_cluster->drain_slots; i++) {
        DrainSlot* s = &jobbuf_cluster->slots[i];
        if (!s->in_use)
            continue;
        slot_row(&row, s, every_error || s->database == MyDatabaseId);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    }
    char left_out[kLeftOutShown][NAMEDATALEN];
    SpinLockAcquire(&jobbuf_cluster->mutex);
    int count = jobbuf_cluster->left_out_count;
    int shown = Min(count, kLeftOutShown);
    memcpy(left_out, jobbuf_cluster->left_out_names, sizeof(left_out[0]) * shown);
    SpinLockRelease(&jobbuf_cluster->mutex);
    char why[kStatusErrorLen];
    snprintf(why, sizeof(why), "no drain worker: all jobbuf.max_workers (%d) are in use", jobbuf_max_workers);
    for (int i = 0; i < shown; i++) {
        left_out[i][NAMEDATALEN - 1] = '\0';
        no_worker_row(&row, left_out[i], why);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    }
    if (count > shown) {
        snprintf(why, sizeof(why), "%d more databases have no drain worker: all jobbuf.max_workers (%d) are in use",
                 count - shown, jobbuf_max_workers);
        no_worker_row(&row, "", why);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    }
    return (Datum)0;
}

// 1.0's SQL: one row, the drain worker of the current database.
JOBBUF_SQL_FUNCTION(jobbuf_worker_status)
{
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errmsg("jobbuf: jobbuf_worker_status must return a row")));
    desc = BlessTupleDesc(desc);

    StatusRow row;
    DrainSlot* slot = drain_slot_of_database(MyDatabaseId);
    if (jobbuf_cluster == nullptr)
        no_worker_row(&row, jobbuf_database ? jobbuf_database : "", kNotPreloaded);
    else if (slot == nullptr)
        no_worker_row(&row, get_database_name(MyDatabaseId), "no drain worker runs for this database");
    else
        slot_row(&row, slot, true);
    HeapTuple tuple = heap_form_tuple(desc, row.values, row.nulls);
    PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}

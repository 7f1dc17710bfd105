// Postgres regime: the BEFORE INSERT trigger of jobbuf.jobs. Every staged job passes through it,
// from jobbuf_stage or from a plain INSERT: it validates the row in the producer's transaction
// (bad input is an error there, never a problem for the worker), fills defaults, and marks the
// transaction so that its commit wakes the worker. It runs on whatever shape the table's owner
// gave jobbuf.jobs, so it finds the columns it reads by name (jobs_table_shape.h), and refuses a
// table whose columns it cannot read as the extension's.
#include "pg_includes.h"

#include "hooks/commit_wakeup.h"
#include "metadata/installation_identity.h"
#include "metadata/jobs_table_shape.h"
#include "staging/job_validation.h"
#include "staging/queue_cache.h"

extern "C" {
#include "access/htup_details.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
}

// Whether the row's owner is another installation (a restore, a copy: installation_identity.h).
static bool is_held(HeapTuple row, TupleDesc desc)
{
    AttrNumber owner_column = jobs_column_number_if_present(desc, kJobsOwner);
    if (owner_column == InvalidAttrNumber)
        return false;  // the 1.1 SQL, before ALTER EXTENSION jobbuf UPDATE
    bool isnull = false;
    Datum owner = heap_getattr(row, owner_column, desc, &isnull);
    pg_uuid_t own;
    return !isnull && own_installation_id(&own) && memcmp(DatumGetUUIDP(owner)->data, own.data, UUID_LEN) != 0;
}

JOBBUF_SQL_FUNCTION(jobbuf_staged_job_trigger)
{
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errmsg("jobbuf: staged_job_trigger must be called as a trigger")));
    auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
    if (!TRIGGER_FIRED_BEFORE(trigger->tg_event) || !TRIGGER_FIRED_FOR_ROW(trigger->tg_event) ||
        !TRIGGER_FIRED_BY_INSERT(trigger->tg_event))
        ereport(ERROR, (errmsg("jobbuf: staged_job_trigger must fire BEFORE INSERT FOR EACH ROW")));

    TupleDesc desc = RelationGetDescr(trigger->tg_relation);
    HeapTuple row = trigger->tg_trigtuple;
    AttrNumber queue_column = jobs_column_number(desc, kJobsQueue);
    AttrNumber payload_column = jobs_column_number(desc, kJobsPayload);
    AttrNumber run_at_column = jobs_column_number(desc, kJobsRunAt);
    AttrNumber staged_at_column = jobs_column_number(desc, kJobsStagedAt);
    AttrNumber id_column = jobs_column_number(desc, kJobsId);

    bool isnull = false;
    Datum queue_datum = heap_getattr(row, queue_column, desc, &isnull);
    char* queue = isnull ? nullptr : TextDatumGetCString(queue_datum);
    QueueTraits traits = staged_job_queue(queue);
    Datum payload_datum = heap_getattr(row, payload_column, desc, &isnull);
    check_staged_payload(queue, traits, isnull ? nullptr : DatumGetJsonbP(payload_datum));

    // An explicit NULL run_at or staged_at (ORMs send every column) means "now".
    bool run_at_null = false, staged_at_null = false;
    Datum run_at = heap_getattr(row, run_at_column, desc, &run_at_null);
    Datum staged_at = heap_getattr(row, staged_at_column, desc, &staged_at_null);
    if (!run_at_null)
        check_staged_time(queue, "run_at", run_at);
    if (!staged_at_null)
        check_staged_time(queue, "staged_at", staged_at);
    if (run_at_null || staged_at_null) {
        int natts = desc->natts;
        Datum* values = static_cast<Datum*>(palloc0(sizeof(Datum) * natts));
        bool* nulls = static_cast<bool*>(palloc0(sizeof(bool) * natts));
        bool* replace = static_cast<bool*>(palloc0(sizeof(bool) * natts));
        Datum now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
        if (run_at_null) {
            values[run_at_column - 1] = now;
            replace[run_at_column - 1] = true;
        }
        if (staged_at_null) {
            values[staged_at_column - 1] = now;
            replace[staged_at_column - 1] = true;
        }
        row = heap_modify_tuple(row, desc, values, nulls, replace);
    }

    Datum id = heap_getattr(row, id_column, desc, &isnull);
    note_jobs_staged(queue, isnull ? 0 : DatumGetInt64(id));
    if (is_held(row, desc))
        note_queues_changed();  // the worker counts held jobs when it reloads its queue list
    return PointerGetDatum(row);
}

JOBBUF_SQL_FUNCTION(jobbuf_queues_changed_trigger)
{
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errmsg("jobbuf: queues_changed_trigger must be called as a trigger")));
    auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
    invalidate_queue_caches(RelationGetRelid(trigger->tg_relation));
    note_queues_changed();         // a created, resumed or re-configured queue may have work
    return PointerGetDatum(NULL);  // not nullptr: PostgreSQL 19's PointerGetDatum() refuses it
}

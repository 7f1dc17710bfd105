// Postgres regime: the BEFORE INSERT trigger of jobbuf.jobs. Every staged job passes through it,
// from jobbuf_stage or from a plain INSERT: it validates the row in the producer's transaction
// (bad input is an error there, never a problem for the worker), fills defaults, and marks the
// transaction so that its commit wakes the worker.
#include "pg_includes.h"

#include "commit_wakeup.h"
#include "queue_cache.h"

extern "C" {
#include "access/htup_details.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
}

// Column numbers of jobbuf.jobs (see 00_schema.sql), 1-based.
enum JobsColumn { kQueue = 2, kPayload = 3, kRunAt = 4, kStagedAt = 7 };

static bool jsonb_has_key_of_type(Jsonb* jb, const char* key, enum jbvType type)
{
    JsonbValue value;
    JsonbValue* found = getKeyJsonValueFromContainer(&jb->root, key, strlen(key), &value);
    if (found == nullptr)
        return false;
    if (type == jbvArray)  // containers come back as jbvBinary
        return found->type == jbvBinary && JsonContainerIsArray(found->val.binary.data);
    return found->type == type;
}

static void check_sidekiq_payload(const char* queue, Jsonb* payload)
{
    if (!JB_ROOT_IS_OBJECT(payload) || !jsonb_has_key_of_type(payload, "class", jbvString))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("jobbuf: a job for sidekiq queue \"%s\" needs a string \"class\"", queue),
                 errhint("Stage a JSON object like {\"class\": \"HardWorker\", \"args\": [1, 2]}.")));
    if (!jsonb_has_key_of_type(payload, "args", jbvArray))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("jobbuf: a job for sidekiq queue \"%s\" needs an array \"args\"", queue),
                 errhint("Sidekiq calls perform(*args): use \"args\": [] for none.")));
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

    bool isnull = false;
    Datum queue_datum = heap_getattr(row, kQueue, desc, &isnull);
    if (isnull)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION), errmsg("jobbuf: queue must not be NULL"),
                        errhint("Name a queue created with jobbuf_create_queue.")));
    char* queue = TextDatumGetCString(queue_datum);

    QueueTraits traits;
    if (!lookup_queue_traits(queue, &traits))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("jobbuf: unknown queue \"%s\"", queue),
                        errhint("Create it first with jobbuf_create_queue('%s', target, options).", queue)));

    Datum payload_datum = heap_getattr(row, kPayload, desc, &isnull);
    if (isnull)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION),
                        errmsg("jobbuf: payload of a job for queue \"%s\" must not be NULL", queue),
                        errhint("Stage a JSON value, for example '{}'::jsonb.")));
    if (traits.sidekiq_each)
        check_sidekiq_payload(queue, DatumGetJsonbP(payload_datum));

    // An explicit NULL run_at or staged_at (ORMs send every column) means "now".
    bool run_at_null = false, staged_at_null = false;
    (void) heap_getattr(row, kRunAt, desc, &run_at_null);
    (void) heap_getattr(row, kStagedAt, desc, &staged_at_null);
    if (run_at_null || staged_at_null) {
        int natts = desc->natts;
        Datum* values = static_cast<Datum*>(palloc0(sizeof(Datum) * natts));
        bool* nulls = static_cast<bool*>(palloc0(sizeof(bool) * natts));
        bool* replace = static_cast<bool*>(palloc0(sizeof(bool) * natts));
        Datum now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
        if (run_at_null) {
            values[kRunAt - 1] = now;
            replace[kRunAt - 1] = true;
        }
        if (staged_at_null) {
            values[kStagedAt - 1] = now;
            replace[kStagedAt - 1] = true;
        }
        row = heap_modify_tuple(row, desc, values, nulls, replace);
    }

    note_jobs_staged(queue);
    return PointerGetDatum(row);
}

JOBBUF_SQL_FUNCTION(jobbuf_queues_changed_trigger)
{
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errmsg("jobbuf: queues_changed_trigger must be called as a trigger")));
    auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
    invalidate_queue_caches(RelationGetRelid(trigger->tg_relation));
    note_queues_changed();  // a created, resumed or re-configured queue may have work
    return PointerGetDatum(nullptr);
}

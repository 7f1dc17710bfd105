// Postgres regime: what the drain's direct takes share (see direct_take.h).
#include "pg_includes.h"
#include "pg_compat.h"

#include <new>

#include "delivery/direct_take.h"
#include "delivery/own_keys.h"
#include "metadata/installation_identity.h"
#include "metadata/jobs_table_shape.h"
#include "support/jsonb_text_size.h"

extern "C" {
#include "access/detoast.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::StagedJob;

namespace {

bool has_top_level_key(Jsonb* payload, const char* key)
{
    JsonbValue probe;
    probe.type = jbvString;
    probe.val.string.val = const_cast<char*>(key);
    probe.val.string.len = static_cast<int>(strlen(key));
    return JB_ROOT_IS_OBJECT(payload) && findJsonbValueFromContainer(&payload->root, JB_FOBJECT, &probe) != nullptr;
}

// The payload without the keys the target writes itself (TargetTraits::own_keys), as the batch
// statement's "payload - <own keys>"; the payload itself when it has none of them.
Jsonb* without_own_keys(Jsonb* payload, const jobbuf::redis::TargetTraits& target)
{
    bool any = false;
    for (size_t k = 0; k < target.own_key_count && !any; k++)
        any = has_top_level_key(payload, target.own_keys[k]);
    if (!any)
        return payload;
    Datum array = own_keys_array(target);
    return DatumGetJsonbP(DirectFunctionCall2(jsonb_delete_array, JsonbPGetDatum(payload), array));
}

double epoch_seconds(TimestampTz ts)
{
    // date_part('epoch', ts): the exact quotient rounded once to a double, as here.
    // SetEpochTimestamp() without its calendar arithmetic on every call (4% of the drain's CPU).
    // 'infinity' (INT64_MAX) would overflow the subtraction: bounded as the batch statement's rows are.
    constexpr TimestampTz kUnixEpoch =
        -static_cast<TimestampTz>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
    if (TIMESTAMP_NOT_FINITE(ts))
        return TIMESTAMP_IS_NOBEGIN(ts) ? 0 : jobbuf::redis::kLatestEpochSeconds;
    return jobbuf::redis::bounded_epoch_seconds(static_cast<double>(ts - kUnixEpoch) / USECS_PER_SEC);
}

// Appends the job in slot to *taken (which has room for it); its JSON text goes to *texts, and
// where it starts to text_start[] (views are made at the end: *texts moves as it grows). A text
// longer than bounds.job_bytes is never rendered. Every copy of the payload made here (detoasted,
// the target's own keys removed) is freed once rendered: the batch keeps the text and the row's stored
// value only.
void append_job(TupleTableSlot* slot, const jobbuf::redis::TargetTraits& target, TakeBounds bounds, TakenBatch* taken,
                StringInfo texts, size_t* text_start)
{
    uint64 i = taken->count;
    Assert(i < taken->capacity);
    const Datum* v = slot->tts_values;
    const bool* isnull = slot->tts_isnull;
    Datum stored = v[kJobsPayload - 1];
    Jsonb* payload = DatumGetJsonbP(stored);
    StagedJob* job = new (&taken->jobs[i]) StagedJob();
    job->id = DatumGetInt64(v[kJobsId - 1]);
    job->id_salt = installation_id_salt(*DatumGetUUIDP(v[kJobsOrigin - 1]));
    job->tick_id = isnull[kJobsTickId - 1] ? 0 : DatumGetInt64(v[kJobsTickId - 1]);
    job->staged_at = epoch_seconds(DatumGetTimestampTz(v[kJobsStagedAt - 1]));
    job->run_at = epoch_seconds(DatumGetTimestampTz(v[kJobsRunAt - 1]));
    job->payload_has_probed_key = target.probed_key != nullptr && has_top_level_key(payload, target.probed_key);
    Jsonb* pushed = without_own_keys(payload, target);
    text_start[i] = texts->len;
    size_t text_bytes = 0;
    if (VARSIZE(pushed) > bounds.job_bytes / kMaxTextBytesPerJsonbByte)
        text_bytes = jsonb_text_size(pushed, bounds.job_bytes);
    if (text_bytes > bounds.job_bytes)
        job->known_too_large = text_bytes;
    else
        JsonbToCString(texts, &pushed->root, VARSIZE(pushed));
    taken->text_bytes += texts->len - text_start[i];
    if (pushed != payload)
        pfree(pushed);
    if (reinterpret_cast<Pointer>(payload) != DatumGetPointer(stored))
        pfree(payload);

    taken_batch_keep_record(taken, i, stored, NullableDatum{v[kJobsPartitionKey - 1], isnull[kJobsPartitionKey - 1]},
                            NullableDatum{v[kJobsUniqueKey - 1], isnull[kJobsUniqueKey - 1]}, v[kJobsStagedAt - 1],
                            v[kJobsAttempts - 1], v[kJobsOrigin - 1]);
    taken->count++;
}

}  // namespace

bool direct_take_begin(DirectTake* take, const char* index_name, bool (*index_is_pristine)(Relation index),
                       int limit, TakenBatch* taken, Relation* index)
{
    if (!own_installation_id(&take->own))
        return false;
    Oid index_oid = InvalidOid;
    take->jobs = open_jobs_table(index_name, &index_oid);
    if (take->jobs == nullptr)
        return false;
    *index = index_open(index_oid, AccessShareLock);
    if (!jobs_table_is_pristine(take->jobs) || (*index)->rd_index->indrelid != RelationGetRelid(take->jobs) ||
        !index_is_pristine(*index)) {
        index_close(*index, NoLock);
        table_close(take->jobs, NoLock);
        return false;
    }
    taken_batch_init(taken, limit > 0 ? static_cast<uint64>(limit) : 1);
    take->text_start = static_cast<size_t*>(palloc(sizeof(size_t) * (taken->capacity + 1)));
    initStringInfo(&take->texts);
    take->snapshot = GetActiveSnapshot();
    take->slot = table_slot_create(take->jobs, nullptr);
    take->now = GetCurrentTransactionStartTimestamp();
    take->cid = GetCurrentCommandId(true);
    return true;
}

IndexScanDesc direct_take_scan(DirectTake* take, Relation index, int nkeys)
{
    return jobbuf_index_beginscan(take->jobs, index, take->snapshot, nkeys, 0);
}

bool direct_take_row_is_ready(const DirectTake* take, const jobbuf::redis::TargetTraits& target)
{
    const TupleTableSlot* slot = take->slot;
    return slot->tts_isnull[kJobsGroupId - 1]  // else claimed (an entry from before the claim)
           && (target.carries_run_at || DatumGetTimestampTz(slot->tts_values[kJobsRunAt - 1]) <= take->now);
}

RowTake direct_take_row(DirectTake* take, const jobbuf::redis::TargetTraits& target, TakeBounds bounds,
                        TakenBatch* taken)
{
    TupleTableSlot* slot = take->slot;
    if (taken->count >= taken->capacity)
        return RowTake::Full;  // never past the batch's arrays, whatever a caller's loop counts
    if (memcmp(DatumGetUUIDP(slot->tts_values[kJobsOwner - 1]), &take->own, sizeof(pg_uuid_t)) != 0)
        return RowTake::NotOurs;
    bool ready = direct_take_row_is_ready(take, target);
    // A batch that already holds jobs ends before one that would take it past its bytes (the
    // stored size: a jsonb's text is about as long); it is the next batch's first job.
    if (ready && !taken_batch_has_room(taken, bounds, toast_raw_datum_size(slot->tts_values[kJobsPayload - 1]))) {
        taken->full_by_bytes = true;
        return RowTake::Full;
    }
    // Skip, do not wait for, a row another transaction holds; a row locked, updated or deleted
    // since our snapshot is left too.
    TM_FailureData failure;
    if (ready && jobbuf_tuple_delete(take->jobs, &slot->tts_tid, take->cid, take->snapshot, &failure) == TM_Ok) {
        append_job(slot, target, bounds, taken, &take->texts, take->text_start);
        if (!taken_batch_has_room(taken, bounds, 0)) {
            taken->full_by_bytes = true;
            return RowTake::TakenFull;
        }
        return RowTake::Taken;
    }
    int64 id = DatumGetInt64(slot->tts_values[kJobsId - 1]);
    taken->lowest_passed_over = Min(taken->lowest_passed_over, id);
    return RowTake::PassedOver;
}

void direct_take_end(DirectTake* take, Relation index, TakenBatch* taken)
{
    take->text_start[taken->count] = take->texts.len;
    for (uint64 i = 0; i < taken->count; i++)
        taken->jobs[i].payload = std::string_view(take->texts.data + take->text_start[i],
                                                  take->text_start[i + 1] - take->text_start[i]);
    ExecDropSingleTupleTableSlot(take->slot);
    index_close(index, NoLock);
    table_close(take->jobs, NoLock);
}

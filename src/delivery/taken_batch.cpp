// Postgres regime: a batch's taken jobs, and the DestReceiver that collects the batch statement's
// rows into them (see taken_batch.h).
#include "pg_includes.h"
#include "pg_compat.h"

#include <algorithm>
#include <new>
#include <numeric>

#include "delivery/taken_batch.h"
#include "metadata/installation_identity.h"

extern "C" {
#include "executor/tuptable.h"
#include "utils/datum.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::StagedJob;

namespace {

struct TakenBatchReceiver {
    DestReceiver pub;  // first: the executor sees a DestReceiver*
    TakenBatch* batch;
    MemoryContext cxt;
    TakeBounds bounds;
};

void grow(TakenBatch* batch)
{
    batch->capacity *= 2;  // repalloc keeps each array in its memory context
    batch->jobs = static_cast<StagedJob*>(repalloc(batch->jobs, sizeof(StagedJob) * batch->capacity));
    batch->records = static_cast<TakenJobRecord*>(repalloc(batch->records, sizeof(TakenJobRecord) * batch->capacity));
}

bool receive_row(TupleTableSlot* slot, DestReceiver* self)
{
    auto* receiver = reinterpret_cast<TakenBatchReceiver*>(self);
    TakenBatch* batch = receiver->batch;
    if (batch->overflowed)
        return true;  // this statement's rows are given back (the transaction aborts)
    slot_getallattrs(slot);
    const Datum* v = slot->tts_values;
    const bool* isnull = slot->tts_isnull;
    text* json = DatumGetTextPP(v[1]);
    size_t len = VARSIZE_ANY_EXHDR(json);
    bool renderable = len <= receiver->bounds.job_bytes;
    if (renderable && !taken_batch_has_room(batch, receiver->bounds, len)) {
        batch->overflowed = true;
        return true;
    }

    MemoryContext old = MemoryContextSwitchTo(receiver->cxt);
    if (batch->count == batch->capacity)
        grow(batch);
    uint64 i = batch->count;
    StagedJob* job = new (&batch->jobs[i]) StagedJob();
    job->id = DatumGetInt64(v[0]);
    if (renderable) {
        char* bytes = static_cast<char*>(palloc(len + 1));
        memcpy(bytes, VARDATA_ANY(json), len);
        job->payload = std::string_view(bytes, len);
        batch->text_bytes += len;
    } else {
        job->known_too_large = len;
    }
    job->staged_at = jobbuf::redis::bounded_epoch_seconds(DatumGetFloat8(v[2]));
    job->run_at = jobbuf::redis::bounded_epoch_seconds(DatumGetFloat8(v[3]));
    job->payload_has_probed_key = DatumGetBool(v[4]);
    job->id_salt = installation_id_salt(*DatumGetUUIDP(v[10]));
    job->tick_id = isnull[11] ? 0 : DatumGetInt64(v[11]);
    taken_batch_keep_record(batch, i, v[5], NullableDatum{v[6], isnull[6]}, NullableDatum{v[7], isnull[7]}, v[8], v[9],
                            v[10]);

    if (i > 0 && batch->jobs[i - 1].id >= job->id)
        batch->in_id_order = false;
    batch->count++;
    MemoryContextSwitchTo(old);
    return true;
}

void startup_receiver(DestReceiver*, int, TupleDesc typeinfo)
{
    if (typeinfo->natts != 12)
        elog(ERROR, "jobbuf: the batch statement returns %d columns, expected 12", typeinfo->natts);
}

void shutdown_receiver(DestReceiver*) {}

void destroy_receiver(DestReceiver* self)
{
    pfree(self);
}

}  // namespace

DestReceiver* create_taken_batch_receiver(TakenBatch* batch, uint64 expected_rows, TakeBounds bounds)
{
    auto* receiver = static_cast<TakenBatchReceiver*>(palloc0(sizeof(TakenBatchReceiver)));
    receiver->pub.receiveSlot = receive_row;
    receiver->pub.rStartup = startup_receiver;
    receiver->pub.rShutdown = shutdown_receiver;
    receiver->pub.rDestroy = destroy_receiver;
    receiver->pub.mydest = DestNone;
    receiver->batch = batch;
    receiver->cxt = CurrentMemoryContext;
    receiver->bounds = bounds;
    taken_batch_init(batch, expected_rows > 0 ? expected_rows : 16);
    return &receiver->pub;
}

void taken_batch_init(TakenBatch* batch, uint64 capacity)
{
    *batch = TakenBatch{};
    batch->capacity = capacity > 0 ? capacity : 1;
    batch->jobs = static_cast<StagedJob*>(palloc(sizeof(StagedJob) * batch->capacity));
    batch->records = static_cast<TakenJobRecord*>(palloc(sizeof(TakenJobRecord) * batch->capacity));
    batch->in_id_order = true;
    batch->lowest_passed_over = PG_INT64_MAX;
}

bool taken_batch_has_room(const TakenBatch* batch, TakeBounds bounds, size_t text_bytes)
{
    return batch->count == 0 || batch->text_bytes + text_bytes <= bounds.batch_bytes;
}

void taken_batch_keep_record(TakenBatch* batch, uint64 i, Datum payload, NullableDatum partition_key,
                             NullableDatum unique_key, Datum staged_at, Datum attempts, Datum origin)
{
    TakenJobRecord* record = &batch->records[i];
    record->payload = datumCopy(payload, false, -1);
    record->partition_key = partition_key.isnull ? 0 : datumCopy(partition_key.value, false, -1);
    record->unique_key = unique_key.isnull ? 0 : datumCopy(unique_key.value, false, -1);
    record->staged_at = DatumGetTimestampTz(staged_at);
    record->attempts = DatumGetInt32(attempts);
    record->origin = *DatumGetUUIDP(origin);
}

void sort_taken_batch(TakenBatch* batch)
{
    if (batch->in_id_order)
        return;
    uint64 n = batch->count;
    auto* order = static_cast<uint64*>(palloc(sizeof(uint64) * n));
    std::iota(order, order + n, 0);
    std::sort(order, order + n, [batch](uint64 a, uint64 b) { return batch->jobs[a].id < batch->jobs[b].id; });
    auto* jobs = static_cast<StagedJob*>(palloc(sizeof(StagedJob) * n));
    auto* records = static_cast<TakenJobRecord*>(palloc(sizeof(TakenJobRecord) * n));
    for (uint64 i = 0; i < n; i++) {
        new (&jobs[i]) StagedJob(batch->jobs[order[i]]);
        records[i] = batch->records[order[i]];
    }
    batch->jobs = jobs;
    batch->records = records;
    batch->in_id_order = true;
}

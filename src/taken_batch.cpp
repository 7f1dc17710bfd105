// Postgres regime: the DestReceiver that collects a batch statement's rows (see taken_batch.h).
#include "pg_includes.h"

#include <algorithm>
#include <new>
#include <numeric>

#include "taken_batch.h"

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
};

void reserve(TakenBatch* batch, uint64 capacity, MemoryContext cxt)
{
    if (capacity <= batch->capacity)
        return;
    if (batch->jobs == nullptr) {
        batch->jobs = static_cast<StagedJob*>(MemoryContextAlloc(cxt, sizeof(StagedJob) * capacity));
        batch->records = static_cast<TakenJobRecord*>(MemoryContextAlloc(cxt, sizeof(TakenJobRecord) * capacity));
    } else {
        batch->jobs = static_cast<StagedJob*>(repalloc(batch->jobs, sizeof(StagedJob) * capacity));
        batch->records = static_cast<TakenJobRecord*>(repalloc(batch->records, sizeof(TakenJobRecord) * capacity));
    }
    batch->capacity = capacity;
}

Datum copy_text_or_zero(Datum value, bool isnull)
{
    return isnull ? static_cast<Datum>(0) : datumCopy(value, false, -1);
}

bool receive_row(TupleTableSlot* slot, DestReceiver* self)
{
    auto* receiver = reinterpret_cast<TakenBatchReceiver*>(self);
    TakenBatch* batch = receiver->batch;
    MemoryContext old = MemoryContextSwitchTo(receiver->cxt);
    if (batch->count == batch->capacity)
        reserve(batch, batch->capacity * 2, receiver->cxt);

    slot_getallattrs(slot);
    const Datum* v = slot->tts_values;
    const bool* isnull = slot->tts_isnull;
    uint64 i = batch->count;
    StagedJob* job = new (&batch->jobs[i]) StagedJob();
    job->id = DatumGetInt64(v[0]);
    text* json = DatumGetTextPP(v[1]);
    size_t len = VARSIZE_ANY_EXHDR(json);
    char* bytes = static_cast<char*>(palloc(len + 1));
    memcpy(bytes, VARDATA_ANY(json), len);
    job->payload = std::string_view(bytes, len);
    job->staged_at = DatumGetFloat8(v[2]);
    job->run_at = DatumGetFloat8(v[3]);
    job->payload_has_retry = DatumGetBool(v[4]);

    TakenJobRecord* record = &batch->records[i];
    record->payload = datumCopy(v[5], false, -1);
    record->partition_key = copy_text_or_zero(v[6], isnull[6]);
    record->unique_key = copy_text_or_zero(v[7], isnull[7]);
    record->staged_at = DatumGetTimestampTz(v[8]);
    record->attempts = DatumGetInt32(v[9]);

    if (i > 0 && batch->jobs[i - 1].id >= job->id)
        batch->in_id_order = false;
    batch->count++;
    MemoryContextSwitchTo(old);
    return true;
}

void startup_receiver(DestReceiver*, int, TupleDesc typeinfo)
{
    if (typeinfo->natts != 10)
        elog(ERROR, "jobbuf: the batch statement returns %d columns, expected 10", typeinfo->natts);
}

void shutdown_receiver(DestReceiver*) {}

void destroy_receiver(DestReceiver* self)
{
    pfree(self);
}

}  // namespace

DestReceiver* create_taken_batch_receiver(TakenBatch* batch, uint64 expected_rows)
{
    auto* receiver = static_cast<TakenBatchReceiver*>(palloc0(sizeof(TakenBatchReceiver)));
    receiver->pub.receiveSlot = receive_row;
    receiver->pub.rStartup = startup_receiver;
    receiver->pub.rShutdown = shutdown_receiver;
    receiver->pub.rDestroy = destroy_receiver;
    receiver->pub.mydest = DestNone;
    receiver->batch = batch;
    receiver->cxt = CurrentMemoryContext;
    *batch = TakenBatch{};
    batch->in_id_order = true;
    reserve(batch, expected_rows > 0 ? expected_rows : 16, receiver->cxt);
    return &receiver->pub;
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

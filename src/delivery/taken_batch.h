// Postgres regime: the jobs one batch took, kept compactly for the Redis push (and, for the rare
// job Redis rejects, for its dead letter). Filled by the direct take (job_taker.h) or, on the SQL
// path, by a DestReceiver as the DELETE ... RETURNING produces rows, so no SPITupleTable is
// built and no column is looked up twice.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "tcop/dest.h"
#include "utils/uuid.h"
}

#include "redis/job_types.h"

// What a dead letter needs besides the job's id and Redis's error.
struct TakenJobRecord {
    Datum payload;        // jsonb as stored (maybe compressed or a TOAST pointer: detoast to use)
    Datum partition_key;  // text, or 0 when NULL
    Datum unique_key;     // text, or 0 when NULL
    TimestampTz staged_at;
    int32 attempts;
    pg_uuid_t origin;  // the dead letter keeps it: a retried job has the ids consumers saw
};

// No job text longer than this is ever rendered, whatever Redis accepts: a batch's texts live in
// one Postgres buffer, which cannot exceed 1 GB.
constexpr size_t kMaxJobTextBytes = 512 * 1024 * 1024;

// What one batch may hold, in bytes of JSON text (see jobbuf.batch_max_bytes).
struct TakeBounds {
    size_t batch_bytes;  // a batch stops growing once its texts reach this; its first job always goes
    size_t job_bytes;    // a job whose text is longer is taken but never rendered (known_too_large)
};

struct TakenBatch {
    jobbuf::redis::StagedJob* jobs;  // for the push; payloads point into memory of the batch
    TakenJobRecord* records;         // parallel to jobs
    uint64 count;
    uint64 capacity;
    bool in_id_order;
    // The lowest id the take passed over and left waiting (not due, claimed, held by another
    // transaction); PG_INT64_MAX when none. The SQL statement cannot tell: it reports the first
    // id it could have taken.
    int64 lowest_passed_over;
    size_t text_bytes;   // the JSON text the batch holds
    bool full_by_bytes;  // the take stopped because the next job would not fit: more may be ready
    // The SQL path only: the statement returned more than the bounds allow (it cannot stop
    // early); the jobs beyond count were not kept, and the caller takes the batch again with
    // limit = count.
    bool overflowed;
    // Where the queue's cursor goes once the batch commits (the last job taken, or for fair_by
    // the walk of jobs without a partition key); 0: unchanged.
    int64 cursor_after;
    // fair_by: where each backlogged partition's walk stands, installed once the batch commits
    // (queue_progress.h); nullptr for a take in id order.
    struct PartitionCursors* partitions;
    // fair_by: the first round stopped at its bound on partitions visited (most of them found
    // with nothing left: delivered since the last vacuum) before it came round: more may be ready.
    bool partitions_left;
};

// Makes *batch empty, with room for capacity jobs (in the current memory context).
void taken_batch_init(TakenBatch* batch, uint64 capacity);

// Copies what a dead letter needs of job i (the values as read from its row) into batch->records[i].
void taken_batch_keep_record(TakenBatch* batch, uint64 i, Datum payload, NullableDatum partition_key,
                             NullableDatum unique_key, Datum staged_at, Datum attempts, Datum origin);

// A receiver that appends each row of the batch statement to *batch (allocated in the memory
// context current when it is created). Rows are: id, JSON text, staged_at and run_at as epoch
// seconds, payload sets "retry", payload, partition_key, unique_key, staged_at, attempts, origin.
// Texts longer than bounds.job_bytes are not kept (known_too_large); past bounds.batch_bytes the
// batch is marked overflowed and further rows are not kept.
DestReceiver* create_taken_batch_receiver(TakenBatch* batch, uint64 expected_rows, TakeBounds bounds);

// Whether a job with text_bytes more of text still fits into batch: the first job always does.
bool taken_batch_has_room(const TakenBatch* batch, TakeBounds bounds, size_t text_bytes);

// Puts the jobs (and their records) in id order, the order a batch is pushed in. They come in
// the order of the DELETE's index probe, which is id order in every plan the worker allows, so
// this is normally the one comparison per row the receiver already made.
void sort_taken_batch(TakenBatch* batch);

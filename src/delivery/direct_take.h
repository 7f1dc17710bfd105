// Postgres regime: what the drain's two direct takes share (job_taker.h takes a queue's jobs in
// id order, fair_taker.h the oldest job of each partition in turn): jobbuf.jobs and one of its
// waiting indexes, opened and checked to be as the extension created them, an index scan over
// it, and the step that deletes one ready row by its tuple id and appends it to the batch, as
// the worker's batch statement (drain_batch.cpp) would: a row another transaction holds is
// skipped as FOR UPDATE SKIP LOCKED skips it.
#pragma once
#include "pg_includes.h"

#include "delivery/taken_batch.h"
#include "redis/target_handle.h"

extern "C" {
#include "access/genam.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "utils/rel.h"
#include "utils/snapshot.h"
#include "utils/uuid.h"
}

struct DirectTake {
    Relation jobs;
    pg_uuid_t own;  // this installation's identity: held jobs (another owner) are never taken
    TupleTableSlot* slot;
    Snapshot snapshot;
    CommandId cid;
    TimestampTz now;
    StringInfoData texts;  // the batch's JSON texts, one after the other
    size_t* text_start;    // where each job's text starts in texts
};

// What direct_take_row did with the row in take->slot.
enum class RowTake {
    Taken,       // deleted and appended; the batch has room for more
    TakenFull,   // deleted and appended; the batch is full by bytes
    Full,        // left staged: it would not fit (taken->full_by_bytes)
    PassedOver,  // left waiting (not due, claimed, held by another transaction): noted in lowest_passed_over
    NotOurs,     // a held job (another installation's): neither taken nor waiting for this one
};

// Opens jobbuf.jobs and its index named index_name, checks both (index_is_pristine for the
// index), and makes *taken empty with room for limit jobs. False, with nothing opened, when the
// table or the index is missing or not as created.
bool direct_take_begin(DirectTake* take, const char* index_name, bool (*index_is_pristine)(Relation index),
                       int limit, TakenBatch* taken, Relation* index);

// An index scan of the index with nkeys keys (set with index_rescan before each walk).
IndexScanDesc direct_take_scan(DirectTake* take, Relation index, int nkeys);

// Takes the row in take->slot (all its attributes read) if it is ready, fits, is this
// installation's and no other transaction holds it.
RowTake direct_take_row(DirectTake* take, const jobbuf::redis::TargetTraits& target, TakeBounds bounds,
                        TakenBatch* taken);

// Whether the row in take->slot is one direct_take_row would take now (ready and this installation's).
bool direct_take_row_is_ready(const DirectTake* take, const jobbuf::redis::TargetTraits& target);

// Makes the batch's payload views and closes the table and the index (the scans must be ended).
void direct_take_end(DirectTake* take, Relation index, TakenBatch* taken);

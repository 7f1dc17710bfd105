// Postgres regime: the drain worker's per-queue progress: the id after which the queue's next
// batch starts, and whether the queue needs a batch now.
//
// Cursors persist from one wake-up to the next: a queue's next batch starts right after the last
// job delivered, never at the head of the queue, where the index entries of every job delivered
// since the last vacuum lie (and, while any older snapshot exists, cannot even be marked dead).
// A job that commits with an id below a cursor (transactions commit out of id order) publishes
// its id at commit, and the worker rewinds the cursors to it. Jobs no commit announces are found
// by full passes: run_at coming due and rows another transaction held were passed over by some
// batch, which noted the lowest such id, and a full pass restarts each cursor there (the queue's
// floor); released claims and two-phase commits can lie below it, and only head passes, which
// start every cursor at 0 again, find them.
#pragma once
#include "pg_includes.h"

// fair_by (fair_taker.h): where a backlogged partition's walk stands. The rows of that partition
// with an id up to after_id were taken, or passed over and noted in lowest_passed_over, as for
// the queue's own cursor; a commit below it rewinds it.
struct PartitionCursor {
    const char* key;  // the partition key's bytes (not terminated)
    int key_len;
    int64 after_id;
};
constexpr int kMaxPartitionCursors = 64;  // the partitions a batch left with more jobs: the rest start at their head
struct PartitionCursors {
    MemoryContext cxt;  // holds this struct and the keys
    int count;
    PartitionCursor cursors[kMaxPartitionCursors];
    const char* next_key;  // the next batch's first round starts after this partition (nullptr: at the first)
    int next_key_len;
    bool unkeyed_found;  // the batch took a job without a partition key
};

// A new, empty set in a context of its own (under TopMemoryContext); freed by install_partition_cursors
// or free_partition_cursors.
PartitionCursors* new_partition_cursors(void);
void free_partition_cursors(PartitionCursors* cursors);

struct QueueProgress {
    char queue[NAMEDATALEN];   // hash key
    int64 after_id;            // the next batch takes jobs with a larger id
    int64 lowest_passed_over;  // the lowest id a batch left waiting since the last full pass
    bool pending;              // the queue needs (another) batch in this round
    bool restarted;            // the cursor was restarted and no batch has run from it yet
    TimestampTz capped_until;  // max_in_redis: its depth filled the cap; read again from then (depth_cap.h)
    uint64 depth_pass;         // max_in_redis: the pass that listed it among its capped queues (depth_cap.h)
    int depth_candidate;       // ... at this place
    PartitionCursors* partitions;  // fair_by: the partitions' walks (nullptr: every partition at its head)
};

// The batch that made cursors committed: they replace the queue's (which are freed).
void install_partition_cursors(QueueProgress* progress, PartitionCursors* cursors);

// No cursor of the queue (its own and its partitions') stays past a job with this id.
void rewind_queue_progress(QueueProgress* progress, int64 id);

// Head pass: every cursor back to 0, nothing pending.
void forget_queue_progress(void);

// Full pass: every cursor back to its queue's floor (no further than the lowest id left waiting
// since the last full pass), nothing pending.
void restart_queue_cursors_at_floor(void);

// The progress of a queue, created with after_id 0 and not pending.
QueueProgress* queue_progress(const char* queue);

// The same through a cache the caller keeps per queue (valid until forget_queue_progress): what
// a pass over thousands of queues asks of each without hashing its name.
struct QueueProgressCache {
    QueueProgress* progress;
    uint32 generation;  // 0: empty
};
QueueProgress* cached_queue_progress(const char* queue, QueueProgressCache* cache);

// A job with this id committed: no cursor may stay past it.
void rewind_queue_cursors(int64 committed_id);

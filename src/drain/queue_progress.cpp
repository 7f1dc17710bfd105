// Postgres regime: the drain worker's per-queue progress (see queue_progress.h), kept in a small
// hash table in the worker's TopMemoryContext.
#include "pg_includes.h"

#include "drain/queue_progress.h"
#include "support/name_hash.h"

extern "C" {
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

static HTAB* progress = nullptr;
static uint32 progress_generation = 1;  // bumped when the table is made again (cached pointers die)

PartitionCursors* new_partition_cursors(void)
{
    MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "jobbuf partition cursors", ALLOCSET_SMALL_SIZES);
    auto* cursors = static_cast<PartitionCursors*>(MemoryContextAllocZero(cxt, sizeof(PartitionCursors)));
    cursors->cxt = cxt;
    return cursors;
}

void free_partition_cursors(PartitionCursors* cursors)
{
    if (cursors != nullptr)
        MemoryContextDelete(cursors->cxt);
}

void install_partition_cursors(QueueProgress* entry, PartitionCursors* cursors)
{
    free_partition_cursors(entry->partitions);
    entry->partitions = cursors;
}

void rewind_queue_progress(QueueProgress* entry, int64 id)
{
    entry->after_id = Min(entry->after_id, id - 1);
    if (entry->partitions != nullptr)
        for (int i = 0; i < entry->partitions->count; i++)
            entry->partitions->cursors[i].after_id = Min(entry->partitions->cursors[i].after_id, id - 1);
}

// Every partition starts at its head again (a full or head pass: what they passed over is found).
static void drop_partition_cursors(QueueProgress* entry)
{
    install_partition_cursors(entry, nullptr);
}

void forget_queue_progress(void)
{
    progress_generation++;
    if (progress != nullptr) {
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, progress);
        while (auto* entry = static_cast<QueueProgress*>(hash_seq_search(&scan)))
            drop_partition_cursors(entry);
        hash_destroy(progress);
    }
    progress = create_name_hash("jobbuf queue progress", sizeof(QueueProgress), 16);
}

void restart_queue_cursors_at_floor(void)
{
    if (progress == nullptr)
        return;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, progress);
    while (auto* entry = static_cast<QueueProgress*>(hash_seq_search(&scan))) {
        // Its partitions' walks too (a partition walk notes what it passes over in the same
        // lowest_passed_over): never back to their heads, where every delivered job's entry lies.
        rewind_queue_progress(entry, entry->lowest_passed_over);
        entry->lowest_passed_over = PG_INT64_MAX;
        entry->pending = false;
        entry->restarted = true;
    }
}

QueueProgress* queue_progress(const char* queue)
{
    if (progress == nullptr)
        forget_queue_progress();
    bool found = false;
    auto* entry = static_cast<QueueProgress*>(hash_search(progress, queue, HASH_ENTER, &found));
    if (!found) {
        entry->after_id = 0;
        entry->lowest_passed_over = PG_INT64_MAX;
        entry->pending = false;
        entry->restarted = true;
        entry->capped_until = 0;
        entry->depth_pass = 0;
        entry->depth_candidate = 0;
        entry->partitions = nullptr;
    }
    return entry;
}

void rewind_queue_cursors(int64 committed_id)
{
    if (progress == nullptr)
        return;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, progress);
    while (auto* entry = static_cast<QueueProgress*>(hash_seq_search(&scan)))
        rewind_queue_progress(entry, committed_id);
}

QueueProgress* cached_queue_progress(const char* queue, QueueProgressCache* cache)
{
    if (cache->generation != progress_generation || progress == nullptr) {
        cache->progress = queue_progress(queue);  // may make the table, bumping the generation
        cache->generation = progress_generation;
    }
    return cache->progress;
}

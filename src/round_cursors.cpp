// Postgres regime: per-queue cursors of a drain round (see round_cursors.h), kept in a small
// hash table in the worker's TopMemoryContext.
#include "pg_includes.h"

#include "name_hash.h"
#include "round_cursors.h"

extern "C" {
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

// Per-queue cursors of the current round (see drain_one_batch): the id after which the next
// batch starts. Created at the first round, emptied at the start of every round.
struct RoundCursor {
    char queue[NAMEDATALEN];  // hash key
    int64 after_id;
};
static HTAB* round_cursors = nullptr;

void reset_round_cursors(void)
{
    if (round_cursors != nullptr)
        hash_destroy(round_cursors);
    round_cursors = create_name_hash("jobbuf round cursors", sizeof(RoundCursor), 16);
}

int64* round_cursor(const char* queue)
{
    bool found = false;
    auto* entry = static_cast<RoundCursor*>(hash_search(round_cursors, queue, HASH_ENTER, &found));
    if (!found)
        entry->after_id = 0;
    return &entry->after_id;
}

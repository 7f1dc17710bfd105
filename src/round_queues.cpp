// Postgres regime: per-queue state of a drain round (see round_queues.h), kept in a small hash
// table in the worker's TopMemoryContext.
#include "pg_includes.h"

#include "name_hash.h"
#include "round_queues.h"

extern "C" {
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

static HTAB* round_queues = nullptr;

void reset_round_queues(void)
{
    if (round_queues != nullptr)
        hash_destroy(round_queues);
    round_queues = create_name_hash("jobbuf round queues", sizeof(RoundQueue), 16);
}

RoundQueue* round_queue(const char* queue, bool pending_if_new)
{
    bool found = false;
    auto* entry = static_cast<RoundQueue*>(hash_search(round_queues, queue, HASH_ENTER, &found));
    if (!found) {
        entry->after_id = 0;
        entry->pending = pending_if_new;
    }
    return entry;
}

// Postgres regime: backend-local cache of the queue metadata that validating a staged job needs.
// Invalidated through relcache callbacks when jobbuf.queues changes (in any backend).
#pragma once
#include "pg_includes.h"

struct QueueTraits {
    char target[NAMEDATALEN];  // jobbuf.queues.target
    bool each_delivery;        // delivery 'each': each payload must suit the target
};

// Looks up a queue; false when it does not exist.
bool lookup_queue_traits(const char* queue, QueueTraits* traits);

// Tells every backend to drop its cached metadata (queues_changed trigger).
void invalidate_queue_caches(Oid queues_relid);

// Registers the relcache callback; once per process from _PG_init.
void register_queue_cache_invalidation(void);

// Postgres regime: the queues the worker pushes, read from jobbuf.queues at each wake-up, and the
// identity (marker key, Sidekiq jid salt) of this cluster and database.
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"

struct ActiveQueue {
    char name[NAMEDATALEN];
    jobbuf::redis::TargetSpec spec;  // strings point into the worker's queue-list context
    int batch_size;                  // 0: jobbuf.batch_size (group delivery: jobbuf_claim's default)
    bool group_delivery;             // delivery 'group': one message per claimed group
    const char* group_class;         // sidekiq group delivery: the job class given [group_id]
};

// Loads the queues the worker pushes (not paused, target list/stream/sidekiq) into an array
// allocated in cxt, in its own transaction. Returns -1 when the extension is not installed.
int load_active_queues(MemoryContext cxt, ActiveQueue** queues);

// The extension's schema, quoted, as of the last load_active_queues ("" before).
const char* extension_schema(void);

// The marker key and Sidekiq jid salt, unique to this cluster and database.
void delivery_identity(char* marker_key, size_t len, uint32* jid_salt);

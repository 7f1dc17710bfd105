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

// The batch marker's key, unique to this cluster, database and installation of the extension
// (job ids start again at 1 after DROP EXTENSION; the old marker must not name the new jobs).
// As of the last load_active_queues ("" before).
const char* marker_key(void);

// The name of the worker's Redis connections: "jobbuf-<system identifier>-<database oid>".
void worker_client_name(char* name, size_t len);

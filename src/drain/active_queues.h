// Postgres regime: the queues the worker pushes, read from jobbuf.queues when they change, and what
// the installation's identity names (marker key, id salt: installation_identity.h).
#pragma once
#include "pg_includes.h"

#include "drain/queue_progress.h"
#include "redis/target_handle.h"

struct ActiveQueue {
    char name[NAMEDATALEN];
    jobbuf::redis::QueueTarget* target;         // made from the queue's target and options at each load
    const jobbuf::redis::TargetTraits* traits;  // the target's: what the take must know
    int batch_size;                             // 0: jobbuf.batch_size (group delivery: jobbuf_claim's default)
    bool group_delivery;                        // delivery 'group': one message per claimed group
    int weight;                                 // option weight (1-100): batches per pass while it has full ones
    bool fair_by_partition;                     // option fair_by "partition_key": partitions in turn (fair_taker.h)
    uint64 wake_hash;                           // queue_wake_hash(name): what a commit that staged into it names
    uint64 wake_bit;                            // queue_wake_bit(name): set when a commit staged into it
    mutable QueueProgressCache progress;        // the worker's cursor of the queue (queue_progress.h)
    mutable bool listed;                        // in the pass's list of pending queues (pending_queues.h)
};

// The queue of the last list with this wake hash, or NULL (a paused or unknown queue).
const ActiveQueue* active_queue_by_wake_hash(uint64 hash);

// What current_active_queues returns instead of a count when the worker may drain nothing.
constexpr int kNoExtension = -1;        // CREATE EXTENSION jobbuf has not run
constexpr int kOutdatedExtension = -2;  // older SQL installed: ALTER EXTENSION jobbuf UPDATE is due
constexpr int kQueuesLocked = -3;       // DDL holds jobbuf.queues (DROP EXTENSION, say): asked again next round

// The worker's queue list in cxt, reloaded (in its own transaction) only when a commit changed
// jobbuf.queues since the last load, when reload is true, or when the last load failed or found
// no extension or an outdated one; *reloaded says whether it was. Returns the number of queues,
// or kNoExtension / kOutdatedExtension / kQueuesLocked.
int current_active_queues(MemoryContext cxt, ActiveQueue** queues, bool reload, bool* reloaded);

// The extension version the last load found installed ("" when none).
const char* installed_extension_version(void);

// Whether a commit changed jobbuf.queues since the list was loaded. Asked by each batch after its
// take (queue_list_still_current): a take whose snapshot saw jobs staged after a jobbuf_pause (or
// any queue change) returned also sees that change here, and leaves the queue to the reloaded list.
bool active_queues_changed(void);

// Makes the next current_active_queues reload (after a database error, for instance).
void forget_active_queues(void);

// The batch marker's key, "jobbuf:marker:<installation identity>": unique to this installation
// of the extension (job ids start again at 1 after DROP EXTENSION, and a copy of the database
// has the same ids: neither may read a marker that names other jobs). As of the last load ("" before).
const char* marker_key(void);

// The delivery lease's key, "jobbuf:lease:<installation identity>" (drain_session.h). As of the
// last load ("" before).
const char* lease_key(void);

// How the lease (and the marker) names this start of this cluster: host, port, data directory,
// system identifier and the postmaster's start time (a drain worker restarted under the same
// postmaster is the same holder; a restart, or a clone that keeps host, port and directory, is
// another, which takes a lapsed lease only when its delivery counter proves it continues the
// holder: delivery_counter.h).
void worker_lease_value(char* value, size_t len);

// jobbuf.delivery_counter as of the last load: the committed delivery counter, and whether
// jobbuf_take_over() asked this cluster to take the lease.
int64 loaded_delivery_counter(void);
bool loaded_take_over_request(void);

// The key 1.1 gave the marker ("jobbuf:marker:<system identifier>:<database oid>:<extension oid>"),
// reconciled once after an update from 1.1. As of the last load ("" before).
const char* legacy_marker_key(void);

// The id salt of this installation's identity: what group messages' ids derive from.
uint32 installation_salt(void);

// The name of the worker's Redis connections, which a fresh connection fences off (kills):
// "jobbuf-<installation identity>" once the queue list was loaded (so a clone given an identity
// of its own never fences its original's), "jobbuf-<system identifier>-<database oid>" before.
void worker_client_name(char* name, size_t len);

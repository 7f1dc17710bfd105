// Postgres regime: the worker's queue list and delivery identity (see active_queues.h).
#include "pg_includes.h"

#include "worker/active_queues.h"
#include "commit_wakeup.h"
#include "extension_version.h"
#include "shared_state.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "access/xlog.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
}

namespace {

SPIPlanPtr queues_plan = nullptr;
char marker_key_buffer[128];
char installed_version[NAMEDATALEN];

// The list current_active_queues returned last, and the queues_generation it was read at.
bool list_loaded = false;
uint32 list_generation = 0;
ActiveQueue* list_queues = nullptr;
int list_count = 0;

}  // namespace

const char* installed_extension_version(void)
{
    return installed_version;
}

const char* marker_key(void)
{
    return marker_key_buffer;
}

void worker_client_name(char* name, size_t len)
{
    snprintf(name, len, "jobbuf-" UINT64_FORMAT "-%u", GetSystemIdentifier(), MyDatabaseId);
}

// Sets the marker key and returns the Sidekiq jid salt for this installation of the extension.
static uint32 note_installation(Oid extension_oid)
{
    uint64 sysid = GetSystemIdentifier();
    snprintf(marker_key_buffer, sizeof(marker_key_buffer), "jobbuf:marker:" UINT64_FORMAT ":%u:%u",
             sysid, MyDatabaseId, extension_oid);
    uint64 seed[3] = {sysid, MyDatabaseId, extension_oid};
    return hash_bytes(reinterpret_cast<const unsigned char*>(seed), sizeof(seed));
}

// Loads the queues the worker pushes (not paused, target list/stream/sidekiq) into an array
// allocated in cxt, in its own transaction. Returns kNoExtension or kOutdatedExtension when there
// is nothing the worker may drain.
static int load_active_queues(MemoryContext cxt, ActiveQueue** queues)
{
    begin_worker_transaction("jobbuf: loading queues");
    InstalledJobbuf installed = installed_jobbuf();
    strlcpy(installed_version, installed.version, sizeof(installed_version));
    if (installed.state != InstalledExtension::Current) {
        commit_worker_transaction();
        return installed.state == InstalledExtension::Missing ? kNoExtension : kOutdatedExtension;
    }
    Oid extension_oid = installed.extension_oid;
    if (queues_plan == nullptr)
        queues_plan = prepare_kept(
            // Schema-qualified throughout, operators included (see worker_session.cpp).
            "SELECT q.name,"
            "  CASE WHEN q.target OPERATOR(pg_catalog.=) 'list' THEN 0"
            "       WHEN q.target OPERATOR(pg_catalog.=) 'stream' THEN 1 ELSE 2 END,"
            "  coalesce(q.options OPERATOR(pg_catalog.->>) 'key', 'jobbuf:' OPERATOR(pg_catalog.||) q.name),"
            "  coalesce((q.options OPERATOR(pg_catalog.->>) 'maxlen')::bigint, 0),"
            "  coalesce(q.options OPERATOR(pg_catalog.->>) 'sidekiq_queue', q.name),"
            "  coalesce((q.options OPERATOR(pg_catalog.->>) 'namespace') OPERATOR(pg_catalog.||) ':', ''),"
            "  coalesce((q.options OPERATOR(pg_catalog.->>) 'sidekiq_version')::int, 7),"
            "  coalesce((q.options OPERATOR(pg_catalog.->>) 'batch_size')::int, 0),"
            "  (q.options OPERATOR(pg_catalog.->>) 'delivery') OPERATOR(pg_catalog.=) 'group',"
            "  coalesce(q.options OPERATOR(pg_catalog.->>) 'group_class', '')"
            " FROM jobbuf.queues q"
            " WHERE NOT q.paused AND q.target OPERATOR(pg_catalog.=) ANY ('{list,stream,sidekiq}'::pg_catalog.text[])"
            " ORDER BY q.name",
            0, nullptr);
    execute_kept(queues_plan, nullptr, nullptr, true, SPI_OK_SELECT, "loading queues");

    int count = static_cast<int>(SPI_processed);
    uint32 salt = note_installation(extension_oid);
    auto* list = static_cast<ActiveQueue*>(MemoryContextAllocZero(cxt, sizeof(ActiveQueue) * (count + 1)));
    for (int i = 0; i < count; i++) {
        HeapTuple tuple = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull = false;
        ActiveQueue* q = &list[i];
        strlcpy(q->name, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)), NAMEDATALEN);
        q->wake_bit = queue_wake_bit(q->name);
        q->spec.kind = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
        q->spec.key = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 3, &isnull)));
        q->spec.maxlen = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
        q->spec.sidekiq_queue = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 5, &isnull)));
        q->spec.namespace_prefix = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 6, &isnull)));
        q->spec.sidekiq_version = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
        q->spec.jid_salt = salt;
        q->batch_size = DatumGetInt32(SPI_getbinval(tuple, desc, 8, &isnull));
        Datum group = SPI_getbinval(tuple, desc, 9, &isnull);
        q->group_delivery = !isnull && DatumGetBool(group);
        q->group_class = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 10, &isnull)));
    }
    commit_worker_transaction();
    *queues = list;
    return count;
}

int current_active_queues(MemoryContext cxt, ActiveQueue** queues, bool reload, bool* reloaded)
{
    *reloaded = false;
    // Read before the load's snapshot is taken: a change committed after this read bumps the
    // generation again and is picked up by the next call.
    uint32 generation = jobbuf_shared ? pg_atomic_read_u32(&jobbuf_shared->queues_generation) : 0;
    if (reload || !list_loaded || generation != list_generation) {
        list_loaded = false;
        MemoryContextReset(cxt);
        list_count = load_active_queues(cxt, &list_queues);
        if (list_count < 0)
            return list_count;
        list_loaded = true;
        list_generation = generation;
        *reloaded = true;
    }
    *queues = list_queues;
    return list_count;
}

bool active_queues_changed(void)
{
    if (jobbuf_shared == nullptr)
        return false;
    pg_memory_barrier();  // read after the caller's snapshot, not before
    return !list_loaded || pg_atomic_read_u32(&jobbuf_shared->queues_generation) != list_generation;
}

void forget_active_queues(void)
{
    list_loaded = false;
}

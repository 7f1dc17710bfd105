// Postgres regime: the worker's queue list and delivery identity (see active_queues.h).
#include "pg_includes.h"

#include "active_queues.h"
#include "worker_transaction.h"

extern "C" {
#include "access/xlog.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
}

namespace {

SPIPlanPtr queues_plan = nullptr;
char schema_name[NAMEDATALEN * 2 + 3];
char marker_key_buffer[128];

}  // namespace

const char* extension_schema(void)
{
    return schema_name;
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

int load_active_queues(MemoryContext cxt, ActiveQueue** queues)
{
    begin_worker_transaction("jobbuf: loading queues");
    Oid extension_oid = get_extension_oid("jobbuf", true);
    if (extension_oid == InvalidOid) {
        commit_worker_transaction();
        return -1;
    }
    if (queues_plan == nullptr)
        queues_plan = prepare_kept(
            "SELECT name, CASE target WHEN 'list' THEN 0 WHEN 'stream' THEN 1 ELSE 2 END,"
            "  coalesce(options->>'key', 'jobbuf:' || name),"
            "  coalesce((options->>'maxlen')::bigint, 0),"
            "  coalesce(options->>'sidekiq_queue', name),"
            "  coalesce((options->>'namespace') || ':', ''),"
            "  coalesce((options->>'sidekiq_version')::int, 7),"
            "  coalesce((options->>'batch_size')::int, 0),"
            "  options->>'delivery' = 'group',"
            "  coalesce(options->>'group_class', ''),"
            "  (SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e"
            "     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'jobbuf')"
            " FROM jobbuf.queues"
            " WHERE NOT paused AND target IN ('list', 'stream', 'sidekiq')"
            " ORDER BY name",
            0, nullptr);
    int rc = SPI_execute_plan(queues_plan, nullptr, nullptr, true, 0);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: loading queues failed: %s", SPI_result_code_string(rc));

    int count = static_cast<int>(SPI_processed);
    uint32 salt = note_installation(extension_oid);
    auto* list = static_cast<ActiveQueue*>(MemoryContextAllocZero(cxt, sizeof(ActiveQueue) * (count + 1)));
    for (int i = 0; i < count; i++) {
        HeapTuple tuple = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull = false;
        ActiveQueue* q = &list[i];
        strlcpy(q->name, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)), NAMEDATALEN);
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
        Datum schema = SPI_getbinval(tuple, desc, 11, &isnull);
        if (!isnull)
            strlcpy(schema_name, TextDatumGetCString(schema), sizeof(schema_name));
    }
    commit_worker_transaction();
    *queues = list;
    return count;
}

// Postgres regime: the worker's queue list and delivery identity (see active_queues.h).
#include "pg_includes.h"

#include <algorithm>

#include "support/kept_plan.h"

#include "config/shared_state.h"
#include "delivery/delivery_counter.h"
#include "drain/active_queues.h"
#include "hooks/commit_wakeup.h"
#include "metadata/extension_version.h"
#include "metadata/installation_identity.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

namespace {

SPIPlanPtr queues_plan = nullptr;
SPIPlanPtr fingerprint_plan = nullptr;
char marker_key_buffer[128];
char legacy_marker_key_buffer[128];
char lease_key_buffer[128];
uint32 identity_salt = 0;
char installed_version[NAMEDATALEN];
// jobbuf.delivery_counter as of the last load (delivery_counter.h).
int64 loaded_counter = 0;
bool loaded_take_over = false;

// The list current_active_queues returned last, and the queues_generation it was read at.
bool list_loaded = false;
uint32 list_generation = 0;
ActiveQueue* list_queues = nullptr;
int list_count = 0;
// The list's indexes sorted by wake hash (active_queue_by_wake_hash), in the list's context.
int* list_by_hash = nullptr;
// What jobbuf.queues looked like at that load: the extension's oid and the rows' fingerprint.
Oid list_extension = InvalidOid;
int64 list_rows = -1;
int64 list_xmin_sum = 0;

}  // namespace

int64 loaded_delivery_counter(void)
{
    return loaded_counter;
}

bool loaded_take_over_request(void)
{
    return loaded_take_over;
}

const char* installed_extension_version(void)
{
    return installed_version;
}

const char* marker_key(void)
{
    return marker_key_buffer;
}

const char* lease_key(void)
{
    return lease_key_buffer;
}

void worker_lease_value(char* value, size_t len)
{
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        strlcpy(host, "?", sizeof(host));
    // The postmaster's start, in UTC to the microsecond: a drain worker restarted under the same
    // postmaster is the same start; a restart, or a clone that keeps host, port and data
    // directory (a VM or disk snapshot), is another (docs/copies.md).
    pg_time_t seconds = timestamptz_to_time_t(PgStartTime);
    long micros = static_cast<long>(((PgStartTime % USECS_PER_SEC) + USECS_PER_SEC) % USECS_PER_SEC);
    struct tm utc;
    char started[64] = "?";
    time_t as_time_t = static_cast<time_t>(seconds);
    if (gmtime_r(&as_time_t, &utc) != nullptr)
        strftime(started, sizeof(started), "%Y-%m-%d %H:%M:%S", &utc);
    snprintf(value, len, "host %s port %d data directory %s system " UINT64_FORMAT " start %s.%06ld UTC", host,
             PostPortNumber, DataDir, GetSystemIdentifier(), started, micros);
}

const char* legacy_marker_key(void)
{
    return legacy_marker_key_buffer;
}

uint32 installation_salt(void)
{
    return identity_salt;
}

void worker_client_name(char* name, size_t len)
{
    if (marker_key_buffer[0] != '\0')
        snprintf(name, len, "jobbuf-%s", marker_key_buffer + strlen("jobbuf:marker:"));
    else
        snprintf(name, len, "jobbuf-" UINT64_FORMAT "-%u", GetSystemIdentifier(), MyDatabaseId);
}

// Sets the marker keys and the id salt of this installation of the extension: the marker is
// named after the installation's identity, so that a copy of the database (which has an identity
// of its own) never reads or writes its original's; the key 1.1 used (cluster, database and
// extension oids) is still read once, for a batch that a 1.1 library left under it.
static void note_installation(Oid extension_oid)
{
    pg_uuid_t id;
    if (!own_installation_id(&id))
        elog(ERROR, "jobbuf: the installed SQL has no installation identity");
    char* text = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&id)));
    snprintf(marker_key_buffer, sizeof(marker_key_buffer), "jobbuf:marker:%s", text);
    snprintf(lease_key_buffer, sizeof(lease_key_buffer), "jobbuf:lease:%s", text);
    snprintf(legacy_marker_key_buffer, sizeof(legacy_marker_key_buffer), "jobbuf:marker:" UINT64_FORMAT ":%u:%u",
             GetSystemIdentifier(), MyDatabaseId, extension_oid);
    identity_salt = installation_id_salt(id);
}

// The targets of the last list (made by the C++ regime, so not freed by a context reset).
static void destroy_targets(void)
{
    for (int i = 0; i < list_count; i++)
        jobbuf::redis::queue_target_destroy(list_queues[i].target);
    list_count = 0;
    list_queues = nullptr;
}

struct TargetOptionList {
    jobbuf::redis::TargetOption* items;
    int count;
};

// The (name, value) text arrays of the queue's options as TargetOptions, in the current context.
static TargetOptionList target_options(Datum names, Datum values)
{
    Datum* name_items;
    Datum* value_items;
    int name_count = 0, value_count = 0;
    deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false, TYPALIGN_INT, &name_items, nullptr, &name_count);
    deconstruct_array(DatumGetArrayTypeP(values), TEXTOID, -1, false, TYPALIGN_INT, &value_items, nullptr,
                      &value_count);
    TargetOptionList list{static_cast<jobbuf::redis::TargetOption*>(
                              palloc(sizeof(jobbuf::redis::TargetOption) * (Min(name_count, value_count) + 1))),
                          Min(name_count, value_count)};
    for (int i = 0; i < list.count; i++)
        list.items[i] = {TextDatumGetCString(name_items[i]), TextDatumGetCString(value_items[i])};
    return list;
}

// A queue whose options its target cannot read (jobbuf.queues changed without
// jobbuf_alter_queue's checks) is left out, its jobs staged: one WARNING per queue and reason,
// however often the list is loaded.
static void warn_unusable_queue(const char* queue, const char* error)
{
    static char last_warning[NAMEDATALEN + 256];
    char warning[sizeof(last_warning)];
    snprintf(warning, sizeof(warning), "%s: %s", queue, error);
    if (strcmp(warning, last_warning) == 0)
        return;
    strlcpy(last_warning, warning, sizeof(last_warning));
    ereport(WARNING, (errmsg("jobbuf: queue \"%s\" is not delivered: %s", queue, error),
                      errhint("Fix its options with jobbuf_alter_queue.")));
}

// The fingerprint of jobbuf.queues in the current transaction: its row count and the sum of the
// rows' xmin (any INSERT, UPDATE or DELETE changes one or the other, even one that no trigger
// saw: a restore, session_replication_role = replica). One scan of the small table, no target made.
static void queues_fingerprint(int64* rows, int64* xmin_sum)
{
    kept_plan(&fingerprint_plan,
              "SELECT pg_catalog.count(*),"
              "  coalesce(pg_catalog.sum((q.xmin::pg_catalog.text)::pg_catalog.int8), 0)::pg_catalog.int8"
              " FROM jobbuf.queues q",
              0, nullptr);
    execute_kept(fingerprint_plan, nullptr, nullptr, true, SPI_OK_SELECT, "reading the queues' fingerprint");
    bool isnull = false;
    *rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    *xmin_sum = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
}

// jobbuf.queues locked for this transaction without waiting: false while DDL holds it (ALTER or
// DROP EXTENSION, a superuser's LOCK TABLE). Waiting would end in an error once a DROP EXTENSION
// commits (the table gone); the worker asks again at its next round instead.
static bool queues_table_locked(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    Oid relid = OidIsValid(schema) ? get_relname_relid("queues", schema) : InvalidOid;
    return OidIsValid(relid) && ConditionalLockRelationOid(relid, AccessShareLock);
}

// Whether the list loaded last still describes jobbuf.queues and the installed extension, in its
// own transaction: what a full pass asks instead of loading every queue's target again. While DDL
// holds jobbuf.queues the list stands (its batches find the tables locked and wait a round).
static bool loaded_list_still_current(void)
{
    begin_worker_transaction("jobbuf: checking the queue list");
    InstalledJobbuf installed = installed_jobbuf();
    bool current = installed.state == InstalledExtension::Current && installed.extension_oid == list_extension;
    if (current && !queues_table_locked()) {
        commit_worker_transaction();
        return true;
    }
    if (current) {
        int64 rows = 0, xmin_sum = 0;
        queues_fingerprint(&rows, &xmin_sum);
        current = rows == list_rows && xmin_sum == list_xmin_sum;
    }
    commit_worker_transaction();
    return current;
}

// Loads the queues the worker pushes (not paused, target other than none), each with its target,
// into an array allocated in cxt, in its own transaction. Returns kNoExtension or kOutdatedExtension when there
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
    if (!queues_table_locked()) {
        commit_worker_transaction();
        return kQueuesLocked;
    }
    Oid extension_oid = installed.extension_oid;
    kept_plan(
        &queues_plan,
        // Schema-qualified throughout, operators included (see worker_session.cpp). A queue's
        // options reach its target as text pairs (jsonb_each_text: strings unquoted, as ->>);
        // the target reads the ones it knows (src/redis/targets/).
        "SELECT q.name, q.target,"
        "  ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(q.options) e WHERE e.value IS NOT NULL ORDER BY e.key),"
        "  ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(q.options) e WHERE e.value IS NOT NULL ORDER BY e.key),"
        "  coalesce((q.options OPERATOR(pg_catalog.->>) 'batch_size')::int, 0),"
        "  (q.options OPERATOR(pg_catalog.->>) 'delivery') OPERATOR(pg_catalog.=) 'group',"
        "  coalesce((q.options OPERATOR(pg_catalog.->>) 'weight')::int, 1),"
        "  (q.options OPERATOR(pg_catalog.->>) 'fair_by') IS NOT DISTINCT FROM 'partition_key'"
        " FROM jobbuf.queues q"
        " WHERE NOT q.paused AND q.target OPERATOR(pg_catalog.<>) 'none'"
        " ORDER BY q.name",
        0, nullptr);
    execute_kept(queues_plan, nullptr, nullptr, true, SPI_OK_SELECT, "loading queues");

    int count = static_cast<int>(SPI_processed);
    SPITupleTable* queue_rows = SPI_tuptable;        // kept until SPI_finish
    queues_fingerprint(&list_rows, &list_xmin_sum);  // the same snapshot as the list
    read_delivery_counter(&loaded_counter, &loaded_take_over);
    list_extension = extension_oid;
    note_installation(extension_oid);
    auto* list = static_cast<ActiveQueue*>(MemoryContextAllocZero(cxt, sizeof(ActiveQueue) * (count + 1)));
    // Published before the targets are made: a list cut short by an error still has its targets
    // destroyed by the next load.
    list_queues = list;
    list_count = 0;
    int kept = 0;
    for (int i = 0; i < count; i++) {
        HeapTuple tuple = queue_rows->vals[i];
        TupleDesc desc = queue_rows->tupdesc;
        bool isnull = false;
        ActiveQueue* q = &list[kept];
        strlcpy(q->name, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)), NAMEDATALEN);
        char* target_name = TextDatumGetCString(SPI_getbinval(tuple, desc, 2, &isnull));
        TargetOptionList options =
            target_options(SPI_getbinval(tuple, desc, 3, &isnull), SPI_getbinval(tuple, desc, 4, &isnull));
        char error[256];
        q->target = jobbuf::redis::queue_target_create(target_name, q->name, options.items, options.count, error,
                                                       sizeof(error));
        if (q->target == nullptr) {
            warn_unusable_queue(q->name, error);
            continue;
        }
        list_count = ++kept;
        q->traits = jobbuf::redis::queue_target_traits(q->target);
        q->wake_hash = queue_wake_hash(q->name);
        q->wake_bit = queue_wake_bit(q->name);
        q->batch_size = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
        Datum group = SPI_getbinval(tuple, desc, 6, &isnull);
        q->group_delivery = !isnull && DatumGetBool(group);
        q->weight = Max(DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull)), 1);
        q->fair_by_partition = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
    }
    commit_worker_transaction();
    list_by_hash = static_cast<int*>(MemoryContextAlloc(cxt, sizeof(int) * (kept + 1)));
    for (int i = 0; i < kept; i++)
        list_by_hash[i] = i;
    std::sort(list_by_hash, list_by_hash + kept,
              [list](int a, int b) { return list[a].wake_hash < list[b].wake_hash; });
    *queues = list;
    return kept;
}

const ActiveQueue* active_queue_by_wake_hash(uint64 hash)
{
    if (!list_loaded || list_by_hash == nullptr)
        return nullptr;
    const int* found = std::lower_bound(list_by_hash, list_by_hash + list_count, hash,
                                        [](int index, uint64 h) { return list_queues[index].wake_hash < h; });
    if (found == list_by_hash + list_count || list_queues[*found].wake_hash != hash)
        return nullptr;
    return &list_queues[*found];
}

int current_active_queues(MemoryContext cxt, ActiveQueue** queues, bool reload, bool* reloaded)
{
    *reloaded = false;
    // Read before the load's snapshot is taken: a change committed after this read bumps the
    // generation again and is picked up by the next call.
    uint32 generation = my_drain_slot ? pg_atomic_read_u32(&my_drain_slot->queues_generation) : 0;
    if (!list_loaded || generation != list_generation || (reload && !loaded_list_still_current())) {
        list_loaded = false;
        destroy_targets();
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
    if (my_drain_slot == nullptr)
        return false;
    pg_memory_barrier();  // read after the caller's snapshot, not before
    return !list_loaded || pg_atomic_read_u32(&my_drain_slot->queues_generation) != list_generation;
}

void forget_active_queues(void)
{
    list_loaded = false;
}

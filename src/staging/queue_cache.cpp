// Postgres regime: the per-backend queue metadata cache used by the staged-job trigger, so that
// staging a job costs a hash lookup instead of a query. Any change to jobbuf.queues sends a
// relcache invalidation for that table, which every backend receives before its next use of the
// jobs table; the callback marks the cache stale.
//
// Why an entry can be trusted: every caller holds a lock on jobbuf.jobs (it is inserting into it),
// and jobbuf_drop_queue takes SHARE ROW EXCLUSIVE on jobbuf.jobs before it deletes the queue, so
// no drop commits while a stager holds its lock, and a stager that acquires its lock after a drop
// has committed has received the drop's invalidation (acquiring a lock processes them). A miss is
// read with a snapshot taken now, after that lock, not with the statement's or the transaction's
// snapshot: a READ COMMITTED statement that started before the drop, or a REPEATABLE READ
// transaction, would still see the dropped queue, and would cache it for later transactions too.
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "staging/queue_cache.h"
#include "support/name_hash.h"

extern "C" {
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

struct QueueCacheEntry {
    char name[NAMEDATALEN];  // hash key
    QueueTraits traits;
};

static HTAB* queue_cache = nullptr;
static bool queue_cache_stale = true;
static Oid cached_queues_relid = InvalidOid;
static SPIPlanPtr lookup_plan = nullptr;

static void on_relcache_invalidation(Datum arg, Oid relid)
{
    if (relid == InvalidOid || relid == cached_queues_relid)
        queue_cache_stale = true;
}

void register_queue_cache_invalidation(void)
{
    CacheRegisterRelcacheCallback(on_relcache_invalidation, (Datum)0);
}

void invalidate_queue_caches(Oid queues_relid)
{
    CacheInvalidateRelcacheByRelid(queues_relid);
}

static void reset_cache(void)
{
    if (queue_cache != nullptr)
        hash_destroy(queue_cache);
    queue_cache = create_name_hash("jobbuf queue cache", sizeof(QueueCacheEntry), 64);
    Oid schema = get_namespace_oid("jobbuf", false);
    cached_queues_relid = get_relname_relid("queues", schema);
    queue_cache_stale = false;
}

static SPIPlanPtr prepared_lookup(void)
{
    Oid argtypes[1] = {TEXTOID};
    return kept_plan(&lookup_plan,
                     "SELECT q.target,"
                     " coalesce(q.options OPERATOR(pg_catalog.->>) 'delivery', 'each') OPERATOR(pg_catalog.=) 'each'"
                     " FROM jobbuf.queues q WHERE q.name OPERATOR(pg_catalog.=) $1",
                     1, argtypes);
}

// The lookup runs inside the producer's statement, as the producer: with search_path pinned to
// pg_catalog, pg_temp for its duration (and schema-qualified), so that nothing a database owner
// created in public or in the caller's schemas is picked by it, whoever stages.
static bool fetch_queue_traits(const char* queue, QueueTraits* traits)
{
    int search_path_level = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed while looking up queue \"%s\"", queue);
    Datum args[1] = {CStringGetTextDatum(queue)};
    int rc =
        SPI_execute_snapshot(prepared_lookup(), args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true, false, 1);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: queue lookup failed: %s", SPI_result_code_string(rc));
    bool found = SPI_processed == 1;
    if (found) {
        bool isnull = false;
        Datum target = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        text_to_cstring_buffer(DatumGetTextPP(target), traits->target, sizeof(traits->target));
        Datum each = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
        traits->each_delivery = !isnull && DatumGetBool(each);
    }
    SPI_finish();
    AtEOXact_GUC(true, search_path_level);  // an ERROR before this restores it at abort
    return found;
}

bool lookup_queue_traits(const char* queue, QueueTraits* traits)
{
    if (strlen(queue) >= NAMEDATALEN)
        return false;  // longer than any valid queue name
    if (queue_cache == nullptr || queue_cache_stale)
        reset_cache();

    bool found = false;
    auto* entry = static_cast<QueueCacheEntry*>(hash_search(queue_cache, queue, HASH_FIND, &found));
    if (found) {
        *traits = entry->traits;
        return true;
    }
    QueueTraits fetched;
    if (!fetch_queue_traits(queue, &fetched))
        return false;
    // An invalidation that arrived during the lookup leaves the cache stale: do not cache then.
    if (!queue_cache_stale) {
        entry = static_cast<QueueCacheEntry*>(hash_search(queue_cache, queue, HASH_ENTER, &found));
        entry->traits = fetched;
    }
    *traits = fetched;
    return true;
}

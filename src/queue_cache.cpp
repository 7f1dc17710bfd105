// Postgres regime: the per-backend queue metadata cache used by the staged-job trigger, so that
// staging a job costs a hash lookup instead of a query. Any change to jobbuf.queues sends a
// relcache invalidation for that table, which every backend receives before its next use of the
// jobs table; the callback marks the cache stale.
#include "pg_includes.h"

#include "name_hash.h"
#include "queue_cache.h"

extern "C" {
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
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
    CacheRegisterRelcacheCallback(on_relcache_invalidation, (Datum) 0);
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

static bool fetch_queue_traits(const char* queue, QueueTraits* traits)
{
    SPI_connect();
    if (lookup_plan == nullptr) {
        Oid argtypes[1] = {TEXTOID};
        SPIPlanPtr plan = SPI_prepare(
            "SELECT target = 'sidekiq' AND coalesce(options->>'delivery', 'each') = 'each'"
            " FROM jobbuf.queues WHERE name = $1",
            1, argtypes);
        if (plan == nullptr)
            elog(ERROR, "jobbuf: could not prepare the queue lookup: %s",
                 SPI_result_code_string(SPI_result));
        SPI_keepplan(plan);
        lookup_plan = plan;
    }
    Datum args[1] = {CStringGetTextDatum(queue)};
    int rc = SPI_execute_plan(lookup_plan, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: queue lookup failed: %s", SPI_result_code_string(rc));
    bool found = SPI_processed == 1;
    if (found) {
        bool isnull = false;
        Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        traits->sidekiq_each = !isnull && DatumGetBool(d);
    }
    SPI_finish();
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

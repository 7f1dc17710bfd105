// Postgres regime: this installation's identity (see installation_identity.h).
#include "pg_includes.h"

#include "metadata/installation_identity.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace {

bool cached = false;
pg_uuid_t cached_id;
Oid cached_relid = InvalidOid;  // jobbuf.installation when cached

void on_relcache_invalidation(Datum, Oid relid)
{
    if (relid == InvalidOid || relid == cached_relid)
        cached = false;
}

// The identity of a database copied from the one the row names: both halves hashed from the
// row's identity and this database's oid, marked as an RFC 9562 version 8 UUID.
pg_uuid_t derived_for_this_database(const pg_uuid_t& row_id)
{
    unsigned char seed[UUID_LEN + sizeof(Oid)];
    memcpy(seed, row_id.data, UUID_LEN);
    memcpy(seed + UUID_LEN, &MyDatabaseId, sizeof(Oid));
    uint64 halves[2] = {hash_bytes_extended(seed, sizeof(seed), 0x6a6f62627566ULL),
                        hash_bytes_extended(seed, sizeof(seed), 0x636f7079ULL)};
    pg_uuid_t id;
    memcpy(id.data, halves, UUID_LEN);
    id.data[6] = static_cast<unsigned char>((id.data[6] & 0x0f) | 0x80);
    id.data[8] = static_cast<unsigned char>((id.data[8] & 0x3f) | 0x80);
    return id;
}

}  // namespace

void register_installation_identity_invalidation(void)
{
    CacheRegisterRelcacheCallback(on_relcache_invalidation, (Datum)0);
}

bool own_installation_id(pg_uuid_t* id)
{
    if (cached) {
        *id = cached_id;
        return true;
    }
    Oid schema = get_namespace_oid("jobbuf", true);
    Oid relid = OidIsValid(schema) ? get_relname_relid("installation", schema) : InvalidOid;
    if (!OidIsValid(relid))
        return false;
    // Read without a statement (no privilege on the table needed: producers and consumers stage
    // and claim without one), with the statement's snapshot (it sees a row inserted earlier in the
    // same transaction, as CREATE EXTENSION does).
    Relation rel = table_open(relid, AccessShareLock);
    Snapshot snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : GetLatestSnapshot();
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, nullptr);
    int rows = 0;
    pg_uuid_t row_id{};
    Oid database = InvalidOid;
    for (HeapTuple tuple; HeapTupleIsValid(tuple = systable_getnext(scan));) {
        bool id_null = false, database_null = false;
        Datum id_value = heap_getattr(tuple, 1, RelationGetDescr(rel), &id_null);
        Datum database_value = heap_getattr(tuple, 2, RelationGetDescr(rel), &database_null);
        if (++rows == 1 && !id_null && !database_null) {
            row_id = *DatumGetUUIDP(id_value);
            database = DatumGetObjectId(database_value);
        }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    if (rows != 1 || !OidIsValid(database))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("jobbuf: jobbuf.installation must hold exactly one row, the installation's identity"),
                        errhint("A superuser can make a new identity with SELECT jobbuf_reset_identity().")));
    cached_id = database == MyDatabaseId ? row_id : derived_for_this_database(row_id);
    cached_relid = relid;
    cached = true;
    *id = cached_id;
    return true;
}

uint32 installation_id_salt(const pg_uuid_t& id)
{
    return (static_cast<uint32>(id.data[0]) << 24) | (static_cast<uint32>(id.data[1]) << 16) |
           (static_cast<uint32>(id.data[2]) << 8) | static_cast<uint32>(id.data[3]);
}

// jobbuf.installation_id(): the default of jobbuf.jobs.origin and owner, and what claims compare
// owner with.
JOBBUF_SQL_FUNCTION(jobbuf_installation_id)
{
    auto* id = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
    if (!own_installation_id(id))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("jobbuf: this database's jobbuf has no installation identity"),
                        errhint("Run ALTER EXTENSION jobbuf UPDATE.")));
    PG_RETURN_UUID_P(id);
}

// The statement trigger of jobbuf.installation: every backend forgets the cached identity when a
// change of the row commits (jobbuf_reset_identity).
JOBBUF_SQL_FUNCTION(jobbuf_installation_changed_trigger)
{
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errmsg("jobbuf: installation_changed_trigger must be called as a trigger")));
    auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
    CacheInvalidateRelcacheByRelid(RelationGetRelid(trigger->tg_relation));
    return PointerGetDatum(NULL);  // not nullptr: PostgreSQL 19's PointerGetDatum() refuses it
}

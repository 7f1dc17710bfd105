// Postgres regime: the delivery counter (see delivery_counter.h).
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "delivery/delivery_counter.h"
#include "redis/delivery.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace {

SPIPlanPtr read_plan = nullptr;
SPIPlanPtr by_row_plan = nullptr;
SPIPlanPtr by_key_plan = nullptr;
SPIPlanPtr raise_plan = nullptr;
SPIPlanPtr staged_plan = nullptr;
SPIPlanPtr advance_by_row_plan = nullptr;
SPIPlanPtr advance_by_key_plan = nullptr;
TimestampTz written_at = 0;

// Where the counter's row was last written: the UPDATE goes to that address, and by key only when
// the row moved (written by someone else since, or a rollback): see delivery_stats.cpp, whose
// counters row this follows, for why an UPDATE by key slows down under a held snapshot.
ItemPointerData counter_ctid;
bool counter_ctid_valid = false;

Oid counter_table(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    return OidIsValid(schema) ? get_relname_relid("delivery_counter", schema) : InvalidOid;
}

bool counter_table_exists(void)
{
    return OidIsValid(counter_table());
}

void keep_ctid(void)
{
    counter_ctid_valid = false;
    if (SPI_processed != 1)
        return;
    bool isnull = false;
    Datum ctid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    if (isnull)
        return;
    counter_ctid = *reinterpret_cast<ItemPointer>(DatumGetPointer(ctid));
    counter_ctid_valid = true;
}

}  // namespace

void read_delivery_counter(int64* committed, bool* take_over_requested)
{
    *committed = 0;
    *take_over_requested = false;
    if (!counter_table_exists())
        return;
    kept_plan(&read_plan,
              "SELECT c.delivered_unit,"
              "  c.take_over_requested AND c.take_over_start IS NOT DISTINCT FROM pg_catalog.pg_postmaster_start_time(),"
              "  c.ctid FROM jobbuf.delivery_counter c", 0, nullptr);
    execute_kept(read_plan, nullptr, nullptr, true, SPI_OK_SELECT, "reading the delivery counter");
    if (SPI_processed < 1)
        return;
    bool isnull = false;
    Datum value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    *committed = isnull ? 0 : DatumGetInt64(value);
    value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
    *take_over_requested = !isnull && DatumGetBool(value);
    Datum ctid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
    if (!isnull) {
        counter_ctid = *reinterpret_cast<ItemPointer>(DatumGetPointer(ctid));
        counter_ctid_valid = true;
    }
}

void record_delivery_number(int64 number)
{
    Oid types[2] = {INT8OID, TIDOID};
    kept_plan(&by_row_plan,
              "UPDATE jobbuf.delivery_counter c SET delivered_unit = pg_catalog.int8larger(c.delivered_unit, $1)"
              " WHERE c.ctid OPERATOR(pg_catalog.=) $2 RETURNING c.ctid",
              2, types);
    kept_plan(&by_key_plan,
              "UPDATE jobbuf.delivery_counter c SET delivered_unit = pg_catalog.int8larger(c.delivered_unit, $1)"
              " WHERE c.one_row RETURNING c.ctid",
              1, types);
    Datum values[2] = {Int64GetDatum(number), PointerGetDatum(&counter_ctid)};
    if (counter_ctid_valid)
        execute_kept(by_row_plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING, "recording the delivery number");
    if (!counter_ctid_valid || SPI_processed == 0)
        execute_kept(by_key_plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING, "recording the delivery number");
    if (SPI_processed != 1)
        elog(ERROR, "jobbuf: jobbuf.delivery_counter must hold exactly one row");
    keep_ctid();
    written_at = GetCurrentTimestamp();
}

int64 advance_delivery_counter(int64 at_least)
{
    Oid relid = counter_table();
    if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, RowExclusiveLock))
        return 0;
    Oid types[2] = {INT8OID, TIDOID};
    const char* set =
        "UPDATE jobbuf.delivery_counter c"
        " SET delivered_unit = pg_catalog.int8larger(c.delivered_unit OPERATOR(pg_catalog.+) 1, $1)";
    kept_plan(&advance_by_row_plan,
              psprintf("%s WHERE c.ctid OPERATOR(pg_catalog.=) $2 RETURNING c.ctid, c.delivered_unit", set), 2,
              types);
    kept_plan(&advance_by_key_plan, psprintf("%s WHERE c.one_row RETURNING c.ctid, c.delivered_unit", set), 1,
              types);
    Datum values[2] = {Int64GetDatum(at_least), PointerGetDatum(&counter_ctid)};
    if (counter_ctid_valid)
        execute_kept(advance_by_row_plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING,
                     "advancing the delivery counter");
    if (!counter_ctid_valid || SPI_processed == 0)
        execute_kept(advance_by_key_plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING,
                     "advancing the delivery counter");
    if (SPI_processed != 1)
        elog(ERROR, "jobbuf: jobbuf.delivery_counter must hold exactly one row");
    bool isnull = false;
    int64 value = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
    keep_ctid();
    written_at = GetCurrentTimestamp();
    return value;
}

TimestampTz delivery_counter_written_at(void)
{
    return written_at;
}

void raise_delivery_counter(int64 number, bool clear_take_over)
{
    Oid types[2] = {INT8OID, BOOLOID};
    kept_plan(&raise_plan,
              "UPDATE jobbuf.delivery_counter c SET delivered_unit = pg_catalog.int8larger(c.delivered_unit, $1),"
              "  take_over_requested = c.take_over_requested AND NOT $2"
              " WHERE c.one_row RETURNING c.ctid",
              2, types);
    Datum values[2] = {Int64GetDatum(number), BoolGetDatum(clear_take_over)};
    execute_kept(raise_plan, values, nullptr, false, SPI_OK_UPDATE_RETURNING, "raising the delivery counter");
    keep_ctid();
    written_at = GetCurrentTimestamp();
}

bool marker_names_staged_jobs(const jobbuf::redis::MarkerView& marker)
{
    if (marker.count == 0)
        return marker.digest == jobbuf::redis::marker_digest(nullptr, nullptr, 0);
    Oid types[1] = {INT8ARRAYOID};
    kept_plan(&staged_plan,
              "SELECT j.id, pg_catalog.date_part('epoch', j.staged_at) FROM jobbuf.jobs j"
              " WHERE j.id OPERATOR(pg_catalog.=) ANY ($1) AND j.group_id IS NULL"
              "   AND j.owner OPERATOR(pg_catalog.=) jobbuf.installation_id()"
              " ORDER BY j.id",
              1, types);
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * marker.count));
    for (size_t i = 0; i < marker.count; i++)
        datums[i] = Int64GetDatum(marker.ids[i]);
    ArrayType* array = construct_array(datums, static_cast<int>(marker.count), INT8OID, sizeof(int64),
                                       FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
    Datum args[1] = {PointerGetDatum(array)};
    execute_kept(staged_plan, args, nullptr, true, SPI_OK_SELECT, "looking for the jobs a marker names");
    if (SPI_processed != marker.count)
        return false;
    auto* ids = static_cast<std::int64_t*>(palloc(sizeof(std::int64_t) * marker.count));
    auto* staged = static_cast<double*>(palloc(sizeof(double) * marker.count));
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull = false;
        ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
        staged[i] = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
    }
    return jobbuf::redis::marker_digest(ids, staged, marker.count) == marker.digest;
}

bool continues_lease_holder(const jobbuf::redis::ContinuityEvidence& evidence)
{
    begin_worker_transaction("jobbuf: does this start continue the lease's holder?");
    int64 committed = 0;
    bool take_over = false;
    read_delivery_counter(&committed, &take_over);
    bool continues = false;
    char why[256];
    if (!evidence.found && evidence.lease_counter == 0) {
        continues = committed == 0;
        snprintf(why, sizeof(why), "no delivery marker in Redis, this cluster's delivery counter " INT64_FORMAT,
                 committed);
    } else if (evidence.marker.legacy && evidence.lease_counter == 0) {
        continues = evidence.same_cluster_name;
        snprintf(why, sizeof(why), "a 1.2 marker, %s", continues ? "the holder's name is this cluster's" :
                                                                   "the holder's name is not this cluster's");
    } else {
        // The highest number in Redis: the markers' and the one the lease carries (the holder
        // advances its counter at least once per lease lifetime, batches or not).
        int64 marker_number = evidence.found && !evidence.marker.legacy ? evidence.marker.number : 0;
        int64 highest = Max(marker_number, evidence.lease_counter);
        bool cut_off = committed == highest - 1 && marker_number == highest &&
                       marker_names_staged_jobs(evidence.marker);
        continues = committed >= highest || cut_off;
        snprintf(why, sizeof(why),
                 "the last delivery number in Redis is " INT64_FORMAT " (marker " INT64_FORMAT ", lease " INT64_FORMAT
                 "), this cluster's delivery counter " INT64_FORMAT "%s",
                 highest, marker_number, evidence.lease_counter, committed,
                 cut_off ? " (its last batch was cut off before it committed)"
                 : committed == highest - 1 && marker_number == highest
                     ? " and the marker names jobs not staged here as they were pushed"
                     : "");
    }
    commit_worker_transaction();
    ereport(LOG, (errmsg("jobbuf: the delivery lease %s; this start %s it: %s",
                         evidence.lease_free ? "is free but Redis holds the delivery marker of an earlier start"
                                             : "of another start lapsed",
                         continues ? "continues" : "does not continue", why)));
    return continues;
}

// Postgres regime: direct inserts into jobbuf.jobs (see job_inserter.h).
#include "pg_includes.h"
#include "pg_compat.h"

#include "hooks/commit_wakeup.h"
#include "metadata/installation_identity.h"
#include "metadata/jobs_table_shape.h"
#include "staging/job_inserter.h"
#include "staging/job_validation.h"

extern "C" {
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
}

struct JobInserter {
    Relation jobs;
    Oid id_sequence;
    EState* estate;
    ResultRelInfo* result_rel;
    TupleTableSlot* slot;
    Datum now;           // transaction start: the default of run_at and staged_at
    pg_uuid_t identity;  // the default of origin and owner (installation_identity.h)
};

namespace {

// The permissions of INSERT INTO jobbuf.jobs (<columns>) ... RETURNING id: what a producer is
// granted (90_privileges.sql).
JobbufRangeTable insert_range_table(Relation rel, bool all_staging_columns)
{
    Bitmapset* inserted_columns = nullptr;
    static const int inserted[] = {kJobsQueue, kJobsPayload, kJobsRunAt, kJobsUniqueKey, kJobsPartitionKey};
    for (int column : inserted) {
        if (!all_staging_columns && column != kJobsQueue && column != kJobsPayload)
            continue;
        inserted_columns = bms_add_member(inserted_columns, column - FirstLowInvalidHeapAttributeNumber);
    }
    Bitmapset* selected_columns = bms_add_member(nullptr, kJobsId - FirstLowInvalidHeapAttributeNumber);
    return jobbuf_relation_range_table(rel, RowExclusiveLock, ACL_INSERT | ACL_SELECT, inserted_columns,
                                       selected_columns);
}

// Deferrable unique constraints are checked at commit by a trigger the executor queues: not here.
bool indexes_check_immediately(ResultRelInfo* result_rel)
{
    for (int i = 0; i < result_rel->ri_NumIndices; i++)
        if (!result_rel->ri_IndexRelationDescs[i]->rd_index->indimmediate)
            return false;
    return true;
}

}  // namespace

JobInserter* job_inserter_open(bool all_staging_columns)
{
    PreventCommandIfReadOnly("jobbuf_stage()");  // what the INSERT would say, before any lock
    Oid sequence = InvalidOid;
    Relation jobs = open_jobs_table("jobs_id_seq", &sequence);
    if (jobs == nullptr)
        return nullptr;
    // Under session_replication_role = replica the validation trigger does not fire: neither do we.
    if (!jobs_table_is_pristine(jobs) || SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA) {
        table_close(jobs, NoLock);
        return nullptr;
    }
    JobbufRangeTable range_table = insert_range_table(jobs, all_staging_columns);
    jobbuf_check_permissions(range_table);

    auto* inserter = static_cast<JobInserter*>(palloc0(sizeof(JobInserter)));
    inserter->jobs = jobs;
    inserter->id_sequence = sequence;
    inserter->estate = CreateExecutorState();
    jobbuf_init_range_table(inserter->estate, range_table);
    inserter->result_rel = makeNode(ResultRelInfo);
    InitResultRelInfo(inserter->result_rel, jobs, 1, nullptr, 0);
    ExecOpenIndices(inserter->result_rel, false);
    if (!indexes_check_immediately(inserter->result_rel)) {
        job_inserter_close(inserter);
        return nullptr;
    }
    inserter->slot = ExecInitExtraTupleSlot(inserter->estate, RelationGetDescr(jobs), &TTSOpsVirtual);
    inserter->now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
    if (!own_installation_id(&inserter->identity)) {
        job_inserter_close(inserter);
        return nullptr;
    }
    return inserter;
}

int64 job_inserter_insert(JobInserter* inserter, text* queue, const char* queue_name, Datum payload,
                          const Datum* run_at, const Datum* partition_key)
{
    TupleTableSlot* slot = inserter->slot;
    ExecClearTuple(slot);
    Datum* values = slot->tts_values;
    bool* nulls = slot->tts_isnull;
    for (int i = 0; i < kJobsColumns; i++)
        nulls[i] = true;
    auto set = [&](int column, Datum value) {
        values[column - 1] = value;
        nulls[column - 1] = false;
    };
    int64 id = nextval_internal(inserter->id_sequence, true);
    set(kJobsId, Int64GetDatum(id));
    set(kJobsQueue, PointerGetDatum(queue));
    set(kJobsPayload, payload);
    set(kJobsRunAt, run_at != nullptr ? *run_at : inserter->now);
    if (partition_key != nullptr)
        set(kJobsPartitionKey, *partition_key);
    set(kJobsStagedAt, inserter->now);
    set(kJobsAttempts, Int32GetDatum(0));
    set(kJobsOrigin, UUIDPGetDatum(&inserter->identity));
    set(kJobsOwner, UUIDPGetDatum(&inserter->identity));
    ExecStoreVirtualTuple(slot);

    EState* estate = inserter->estate;
    if (inserter->jobs->rd_att->constr != nullptr)
        ExecConstraints(inserter->result_rel, slot, estate);
    simple_table_tuple_insert(inserter->jobs, slot);
    jobbuf_insert_index_tuples(inserter->result_rel, slot, estate);
    ResetPerTupleExprContext(estate);
    note_jobs_staged(queue_name, id);
    return id;
}

void job_inserter_close(JobInserter* inserter)
{
    ExecCloseIndices(inserter->result_rel);
    ExecResetTupleTable(inserter->estate->es_tupleTable, false);
    FreeExecutorState(inserter->estate);
    table_close(inserter->jobs, NoLock);  // the lock is kept until the transaction ends
    pfree(inserter);
}

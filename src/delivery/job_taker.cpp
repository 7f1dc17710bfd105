// Postgres regime: the drain's direct take in id order (see job_taker.h).
#include "pg_includes.h"

#include "delivery/direct_take.h"
#include "delivery/job_taker.h"
#include "metadata/jobs_table_shape.h"

extern "C" {
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

bool waiting_index_is_pristine(Relation index)
{
    Form_pg_index form = index->rd_index;
    if (index->rd_rel->relam != BTREE_AM_OID || !form->indisvalid || !form->indisready || form->indnatts != 3 ||
        form->indnkeyatts != 3 || form->indkey.values[0] != kJobsQueue || form->indkey.values[1] != kJobsOwner ||
        form->indkey.values[2] != kJobsId || RelationGetIndexExpressions(index) != NIL)
        return false;
    List* predicate = RelationGetIndexPredicate(index);
    if (list_length(predicate) != 1 || !IsA(linitial(predicate), NullTest))
        return false;
    auto* test = static_cast<NullTest*>(linitial(predicate));
    return test->nulltesttype == IS_NULL && IsA(test->arg, Var) &&
           reinterpret_cast<Var*>(test->arg)->varattno == kJobsGroupId;
}

bool take_jobs_directly(const char* queue, const jobbuf::redis::TargetTraits& target, int limit, int64 after_id,
                        TakeBounds bounds, TakenBatch* taken)
{
    DirectTake take;
    Relation index = nullptr;
    if (!direct_take_begin(&take, "jobs_waiting", waiting_index_is_pristine, limit, taken, &index))
        return false;

    // queue = $1 AND owner = <own identity> AND id > $after_id, in (queue, owner, id) order: the
    // scan starts right at the cursor, and never meets a held job.
    ScanKeyData keys[3];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[0], F_TEXTEQ,
                           CStringGetTextDatum(queue));
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_UUID_EQ,
                           UUIDPGetDatum(&take.own));
    ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterStrategyNumber, InvalidOid, InvalidOid, F_INT8GT,
                           Int64GetDatum(after_id));
    IndexScanDesc scan = direct_take_scan(&take, index, 3);
    index_rescan(scan, keys, 3, nullptr, 0);
    while (taken->count < static_cast<uint64>(limit) && index_getnext_slot(scan, ForwardScanDirection, take.slot)) {
        slot_getallattrs(take.slot);
        RowTake step = direct_take_row(&take, target, bounds, taken);
        if (step == RowTake::Full || step == RowTake::TakenFull)
            break;
    }
    if (taken->count > 0)
        taken->cursor_after = taken->jobs[taken->count - 1].id;
    index_endscan(scan);
    direct_take_end(&take, index, taken);
    return true;
}

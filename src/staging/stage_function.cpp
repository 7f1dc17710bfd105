// Postgres regime: jobbuf_stage, the producer's entry point, in C. Jobs go through the direct
// insert path (job_inserter.h); a job with a unique_key, or a jobs table changed by its owner,
// goes through a kept SQL INSERT instead (with ON CONFLICT DO NOTHING for the unique_key), where
// the jobs trigger validates and notes it. Those statements name every function and operator
// schema-qualified, so that nothing a database owner created in the caller's search_path is
// picked by them; they keep the caller's search_path, as an INSERT the caller wrote would, for the
// triggers an owner may have added to jobbuf.jobs.
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "staging/job_inserter.h"
#include "staging/job_validation.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace {

SPIPlanPtr insert_plan = nullptr;
SPIPlanPtr insert_unique_plan = nullptr;  // a duplicate waiting unique_key stages nothing
SPIPlanPtr insert_many_plan = nullptr;

// The SQL path of one job. Returns the job id, or NULL when the unique_key is already waiting.
Datum stage_with_sql(FunctionCallInfo fcinfo, Datum payload, bool payload_null)
{
    Datum values[5];
    char nulls[5];
    for (int i = 0; i < 5; i++) {
        bool is_null = i == 1 ? payload_null : (PG_NARGS() <= i || PG_ARGISNULL(i));
        values[i] = i == 1 ? payload : (is_null ? (Datum)0 : PG_GETARG_DATUM(i));
        nulls[i] = is_null ? 'n' : ' ';
    }
    bool unique = nulls[3] == ' ';
    Oid types[5] = {TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID, TEXTOID};

    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed");
    SPIPlanPtr plan = unique ? kept_plan(&insert_unique_plan,
                                         "INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key)"
                                         " VALUES ($1, $2, coalesce($3, pg_catalog.now()), $4, $5)"
                                         " ON CONFLICT DO NOTHING RETURNING id",
                                         5, types)
                             : kept_plan(&insert_plan,
                                         "INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key)"
                                         " VALUES ($1, $2, coalesce($3, pg_catalog.now()), $4, $5) RETURNING id",
                                         5, types);
    int rc = SPI_execute_plan(plan, values, nulls, false, 1);
    if (rc != SPI_OK_INSERT_RETURNING)
        elog(ERROR, "jobbuf: staging insert failed: %s", SPI_result_code_string(rc));
    bool staged = SPI_processed == 1;
    Datum id = 0;
    if (staged) {
        bool isnull = false;
        id = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    }
    SPI_finish();
    if (!staged)
        PG_RETURN_NULL();
    PG_RETURN_DATUM(id);  // int8 is passed by value
}

// jobbuf_stage(queue, payload, run_at, unique_key, partition_key) for either payload form.
Datum stage(FunctionCallInfo fcinfo, Datum payload, bool payload_null)
{
    bool has_unique_key = PG_NARGS() > 3 && !PG_ARGISNULL(3);
    JobInserter* inserter = has_unique_key ? nullptr : job_inserter_open(true);
    if (inserter == nullptr)
        return stage_with_sql(fcinfo, payload, payload_null);

    text* queue = PG_ARGISNULL(0) ? nullptr : PG_GETARG_TEXT_PP(0);
    char* queue_name = queue != nullptr ? text_to_cstring(queue) : nullptr;
    QueueTraits traits = staged_job_queue(queue_name);
    check_staged_payload(queue_name, traits, payload_null ? nullptr : DatumGetJsonbP(payload));
    Datum run_at = PG_NARGS() > 2 && !PG_ARGISNULL(2) ? PG_GETARG_DATUM(2) : (Datum)0;
    if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
        check_staged_time(queue_name, "run_at", run_at);
    Datum partition_key = PG_NARGS() > 4 && !PG_ARGISNULL(4) ? PG_GETARG_DATUM(4) : (Datum)0;
    int64 id = job_inserter_insert(inserter, queue, queue_name, payload,
                                   PG_NARGS() > 2 && !PG_ARGISNULL(2) ? &run_at : nullptr,
                                   PG_NARGS() > 4 && !PG_ARGISNULL(4) ? &partition_key : nullptr);
    job_inserter_close(inserter);
    PG_RETURN_INT64(id);
}

// The result of the set-returning form: a tuplestore of job ids in the caller's per-query memory.
Tuplestorestate* id_result(FunctionCallInfo fcinfo, TupleDesc* desc)
{
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("jobbuf: jobbuf_stage(queue, payloads jsonb[]) must be called where a set is accepted")));
    MemoryContext caller = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
    *desc = CreateTemplateTupleDesc(1);
    TupleDescInitEntry(*desc, 1, "jobbuf_stage", INT8OID, -1, 0);
    Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
    MemoryContextSwitchTo(caller);
    rsinfo->returnMode = SFRM_Materialize;
    rsinfo->setResult = store;
    rsinfo->setDesc = *desc;
    return store;
}

// The SQL path of many jobs: one INSERT ... SELECT over the array, ids in payload order.
void stage_many_with_sql(Datum queue, Datum payloads, Tuplestorestate* store, TupleDesc desc)
{
    Oid types[2] = {TEXTOID, get_array_type(JSONBOID)};
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed");
    SPIPlanPtr plan = kept_plan(&insert_many_plan,
                                "INSERT INTO jobbuf.jobs (queue, payload)"
                                " SELECT $1, p.payload FROM pg_catalog.unnest($2) WITH ORDINALITY AS p (payload, n)"
                                " ORDER BY p.n RETURNING id",
                                2, types);
    Datum args[2] = {queue, payloads};
    int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
    if (rc != SPI_OK_INSERT_RETURNING)
        elog(ERROR, "jobbuf: staging insert failed: %s", SPI_result_code_string(rc));
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull = false;
        Datum id = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        tuplestore_putvalues(store, desc, &id, &isnull);
    }
    SPI_finish();
}

}  // namespace

// jobbuf_stage(queue text, payload jsonb, run_at timestamptz, unique_key text, partition_key text)
JOBBUF_SQL_FUNCTION(jobbuf_stage_jsonb)
{
    return stage(fcinfo, PG_ARGISNULL(1) ? (Datum)0 : PG_GETARG_DATUM(1), PG_ARGISNULL(1));
}

// jobbuf_stage(queue text, payload text): an untyped literal resolves here; parsed as jsonb.
JOBBUF_SQL_FUNCTION(jobbuf_stage_text)
{
    if (PG_ARGISNULL(1))
        return stage(fcinfo, (Datum)0, true);
    char* source = TextDatumGetCString(PG_GETARG_DATUM(1));
    return stage(fcinfo, DirectFunctionCall1(jsonb_in, CStringGetDatum(source)), false);
}

// jobbuf_stage(queue text, payloads jsonb[]) RETURNS SETOF bigint: ids in payload order; a NULL
// or empty array stages nothing.
JOBBUF_SQL_FUNCTION(jobbuf_stage_many)
{
    TupleDesc desc = nullptr;
    Tuplestorestate* store = id_result(fcinfo, &desc);
    if (PG_ARGISNULL(1))
        return (Datum)0;
    ArrayType* payloads = PG_GETARG_ARRAYTYPE_P(1);
    Datum* elements = nullptr;
    bool* element_nulls = nullptr;
    int count = 0;
    deconstruct_array(payloads, JSONBOID, -1, false, TYPALIGN_INT, &elements, &element_nulls, &count);
    if (count == 0)
        return (Datum)0;

    JobInserter* inserter = job_inserter_open(false);
    if (inserter == nullptr) {
        if (PG_ARGISNULL(0))
            staged_job_queue(nullptr);  // the same error the trigger would give
        stage_many_with_sql(PG_GETARG_DATUM(0), PointerGetDatum(payloads), store, desc);
        return (Datum)0;
    }
    text* queue = PG_ARGISNULL(0) ? nullptr : PG_GETARG_TEXT_PP(0);
    char* queue_name = queue != nullptr ? text_to_cstring(queue) : nullptr;
    QueueTraits traits = staged_job_queue(queue_name);
    for (int i = 0; i < count; i++) {
        check_staged_payload(queue_name, traits, element_nulls[i] ? nullptr : DatumGetJsonbP(elements[i]));
        Datum id = Int64GetDatum(job_inserter_insert(inserter, queue, queue_name, elements[i], nullptr, nullptr));
        bool id_null = false;
        tuplestore_putvalues(store, desc, &id, &id_null);
    }
    job_inserter_close(inserter);
    return (Datum)0;
}

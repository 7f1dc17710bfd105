// Postgres regime: jobbuf_stage, the producer's entry point, in C: one kept INSERT plan per form
// (with ON CONFLICT DO NOTHING only when a unique_key is given), so that staging a job costs
// little more than the INSERT itself. Validation and the commit wake-up are the jobs trigger's.
#include "pg_includes.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
}

namespace {

SPIPlanPtr insert_plan = nullptr;
SPIPlanPtr insert_unique_plan = nullptr;  // a duplicate waiting unique_key stages nothing

SPIPlanPtr kept_insert_plan(bool unique)
{
    SPIPlanPtr* slot = unique ? &insert_unique_plan : &insert_plan;
    if (*slot == nullptr) {
        Oid types[5] = {TEXTOID, JSONBOID, TIMESTAMPTZOID, TEXTOID, TEXTOID};
        SPIPlanPtr plan = SPI_prepare(
            unique ? "INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key)"
                     " VALUES ($1, $2, coalesce($3, now()), $4, $5)"
                     " ON CONFLICT DO NOTHING RETURNING id"
                   : "INSERT INTO jobbuf.jobs (queue, payload, run_at, unique_key, partition_key)"
                     " VALUES ($1, $2, coalesce($3, now()), $4, $5) RETURNING id",
            5, types);
        if (plan == nullptr)
            elog(ERROR, "jobbuf: could not prepare the staging insert: %s", SPI_result_code_string(SPI_result));
        SPI_keepplan(plan);
        *slot = plan;
    }
    return *slot;
}

// Stages one job; NULL arguments are passed on (the trigger gives clear errors for a NULL queue
// or payload). Returns the job id, or NULL when the unique_key is already waiting.
Datum stage(FunctionCallInfo fcinfo, Datum payload, bool payload_null)
{
    Datum values[5];
    char nulls[5];
    for (int i = 0; i < 5; i++) {
        bool is_null = i == 1 ? payload_null : (PG_NARGS() <= i || PG_ARGISNULL(i));
        values[i] = i == 1 ? payload : (is_null ? (Datum) 0 : PG_GETARG_DATUM(i));
        nulls[i] = is_null ? 'n' : ' ';
    }
    bool unique = nulls[3] == ' ';

    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed");
    int rc = SPI_execute_plan(kept_insert_plan(unique), values, nulls, false, 1);
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

}  // namespace

// jobbuf_stage(queue text, payload jsonb, run_at timestamptz, unique_key text, partition_key text)
JOBBUF_SQL_FUNCTION(jobbuf_stage_jsonb)
{
    return stage(fcinfo, PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1), PG_ARGISNULL(1));
}

// jobbuf_stage(queue text, payload text): an untyped literal resolves here; parsed as jsonb.
JOBBUF_SQL_FUNCTION(jobbuf_stage_text)
{
    if (PG_ARGISNULL(1))
        return stage(fcinfo, (Datum) 0, true);
    char* source = TextDatumGetCString(PG_GETARG_DATUM(1));
    return stage(fcinfo, DirectFunctionCall1(jsonb_in, CStringGetDatum(source)), false);
}

// Postgres regime: statements prepared once and kept (see kept_plan.h).
#include "pg_includes.h"

#include "support/kept_plan.h"

SPIPlanPtr kept_plan(SPIPlanPtr* kept, const char* sql, int nargs, Oid* types)
{
    if (*kept == nullptr) {
        SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
        if (plan == nullptr)
            elog(ERROR, "jobbuf: could not prepare a statement: %s", SPI_result_code_string(SPI_result));
        SPI_keepplan(plan);
        *kept = plan;
    }
    return *kept;
}

// Postgres regime: the worker's word about held jobs (see held_jobs.h).
#include "pg_includes.h"

#include "shared_state.h"
#include "worker/held_jobs.h"
#include "worker/worker_transaction.h"

namespace {

SPIPlanPtr count_plan = nullptr;
bool some_held = false;

}  // namespace

void note_held_jobs(void)
{
    begin_worker_transaction("jobbuf: counting held jobs");
    kept_plan(&count_plan,
              "SELECT pg_catalog.count(*), pg_catalog.count(DISTINCT j.queue) FROM jobbuf.jobs j"
              " WHERE j.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()",
              0, nullptr);
    execute_kept(count_plan, nullptr, nullptr, true, SPI_OK_SELECT, "counting held jobs");
    bool isnull = false;
    int64 held = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    int64 queues = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
    commit_worker_transaction();
    if (held > 0 && !some_held)
        ereport(WARNING,
                (errmsg("jobbuf: database \"%s\" holds " INT64_FORMAT " job(s) in " INT64_FORMAT
                        " queue(s) that another installation of jobbuf staged (restored from a dump, or a copy of a database); they are not delivered",
                        drain_database_name(), held, queues),
                 errhint("Once you know the original did not deliver them, adopt them with SELECT jobbuf_release_restored(); "
                         "otherwise delete them with SELECT jobbuf_discard_restored(). See docs/copies.md.")));
    else if (held == 0 && some_held)
        ereport(LOG, (errmsg("jobbuf: database \"%s\" holds no job of another installation any more", drain_database_name())));
    some_held = held > 0;
}

// Postgres regime: the worker's word about held jobs (see held_jobs.h).
#include "pg_includes.h"

#include "config/shared_state.h"
#include "delivery/held_jobs.h"
#include "support/kept_plan.h"
#include "worker/worker_transaction.h"

namespace {

bool some_held = false;
SPIPlanPtr discards_plan = nullptr;

}  // namespace

void note_held_count(int64 held, int64 queues)
{
    if (held > 0 && !some_held)
        ereport(
            WARNING,
            (errmsg(
                 "jobbuf: database \"%s\" holds " INT64_FORMAT " job(s) in " INT64_FORMAT
                 " queue(s) that another installation of jobbuf staged (restored from a dump, or a copy of a database); they are not delivered",
                 drain_database_name(), held, queues),
             errhint(
                 "Once you know the original did not deliver them, adopt them with SELECT jobbuf_release_restored(); "
                 "otherwise delete them with SELECT jobbuf_discard_restored(). See docs/copies.md.")));
    else if (held == 0 && some_held)
        ereport(LOG, (errmsg("jobbuf: database \"%s\" holds no job of another installation any more",
                             drain_database_name())));
    some_held = held > 0;
}

void note_held_discards(void)
{
    kept_plan(&discards_plan,
              "WITH d AS (DELETE FROM jobbuf.held_discards RETURNING queue)"
              " SELECT pg_catalog.count(*), pg_catalog.count(DISTINCT d.queue) FROM d",
              0, nullptr);
    execute_kept(discards_plan, nullptr, nullptr, false, SPI_OK_SELECT, "counting discarded held jobs");
    bool isnull = false;
    int64 discarded = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    int64 queues = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
    if (discarded > 0)
        ereport(LOG, (errmsg("jobbuf: database \"%s\" discarded " INT64_FORMAT " held job(s) in " INT64_FORMAT
                             " queue(s) of another installation: jobs staged here took their unique_key",
                             drain_database_name(), discarded, queues)));
}

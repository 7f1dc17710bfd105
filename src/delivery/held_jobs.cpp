// Postgres regime: the worker's word about held jobs (see held_jobs.h).
#include "pg_includes.h"

#include "config/shared_state.h"
#include "delivery/held_jobs.h"

namespace {

bool some_held = false;

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

// Postgres regime: jobbuf.check_staged_payload(queue, payload), what staging would say of a job
// of that queue with that payload, without staging it: jobbuf_schedule refuses a payload its
// queue's target cannot carry when the schedule is made, not at its first tick.
#include "pg_includes.h"

#include "staging/job_validation.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/jsonb.h"
}

JOBBUF_SQL_FUNCTION(jobbuf_check_staged_payload)
{
    char* queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
    QueueTraits traits = staged_job_queue(queue);
    check_staged_payload(queue, traits, PG_GETARG_JSONB_P(1));
    PG_RETURN_VOID();
}

// Postgres regime: jobbuf.check_each_payload, what jobbuf_alter_queue asks of every job of a
// queue that switches from delivery 'group' to 'each': jobs staged under 'group' were never checked
// against the target (the worker pushes one message per group), and from now on each one is a
// message of its own. ERROR naming the job and what to do; the switch then does not happen.
#include "pg_includes.h"

#include "staging/job_validation.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
}

// jobbuf.check_each_payload(queue text, target text, id bigint, payload jsonb) RETURNS void
JOBBUF_SQL_FUNCTION(jobbuf_check_each_payload)
{
    char* queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
    char* target = text_to_cstring(PG_GETARG_TEXT_PP(1));
    int64 id = PG_GETARG_INT64(2);
    Jsonb* payload = PG_GETARG_JSONB_P(3);
    MemoryContext caller_cxt = CurrentMemoryContext;
    ErrorData* refusal = nullptr;
    // The check only reads the payload: its error is re-raised at once with what to do.
    PG_TRY();
    {
        check_payload_for_target(queue, target, payload);
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_cxt);
        refusal = CopyErrorData();
        FlushErrorState();
    }
    PG_END_TRY();
    if (refusal != nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("jobbuf: queue \"%s\" cannot switch to delivery 'each': job " INT64_FORMAT
                               ", staged while it had delivery 'group', cannot be delivered on its own",
                               queue, id),
                        errdetail("%s", refusal->message),
                        errhint("Let the group consumers finish the jobs the queue holds (jobbuf_stats shows them) "
                                "and switch then, or remove that job (DELETE FROM jobbuf.jobs WHERE id = " INT64_FORMAT
                                ") or stage it again in the shape the target needs.",
                                id)));
    PG_RETURN_VOID();
}

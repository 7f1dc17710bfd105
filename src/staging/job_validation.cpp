// Postgres regime: validation of staged jobs (see job_validation.h).
#include "pg_includes.h"

#include "staging/job_validation.h"

static bool jsonb_has_key_of_type(Jsonb* jb, const char* key, enum jbvType type)
{
    JsonbValue value;
    JsonbValue* found = getKeyJsonValueFromContainer(&jb->root, key, strlen(key), &value);
    if (found == nullptr)
        return false;
    if (type == jbvArray)  // containers come back as jbvBinary
        return found->type == jbvBinary && JsonContainerIsArray(found->val.binary.data);
    return found->type == type;
}

QueueTraits staged_job_queue(const char* queue)
{
    if (queue == nullptr)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION), errmsg("jobbuf: queue must not be NULL"),
                        errhint("Name a queue created with jobbuf_create_queue.")));
    QueueTraits traits;
    if (!lookup_queue_traits(queue, &traits))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("jobbuf: unknown queue \"%s\"", queue),
                        errhint("Create it first with jobbuf_create_queue('%s', target, options).", queue)));
    return traits;
}

void check_staged_payload(const char* queue, const QueueTraits& traits, Jsonb* payload)
{
    if (payload == nullptr)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION),
                        errmsg("jobbuf: payload of a job for queue \"%s\" must not be NULL", queue),
                        errhint("Stage a JSON value, for example '{}'::jsonb.")));
    if (!traits.sidekiq_each)
        return;
    if (!JB_ROOT_IS_OBJECT(payload) || !jsonb_has_key_of_type(payload, "class", jbvString))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("jobbuf: a job for sidekiq queue \"%s\" needs a string \"class\"", queue),
                 errhint("Stage a JSON object like {\"class\": \"HardWorker\", \"args\": [1, 2]}.")));
    if (!jsonb_has_key_of_type(payload, "args", jbvArray))
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("jobbuf: a job for sidekiq queue \"%s\" needs an array \"args\"", queue),
                 errhint("Sidekiq calls perform(*args): use \"args\": [] for none.")));
}

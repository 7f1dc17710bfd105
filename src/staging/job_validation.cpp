// Postgres regime: validation of staged jobs (see job_validation.h).
#include "pg_includes.h"

#include "staging/job_validation.h"
#include "redis/target_handle.h"

using jobbuf::redis::JsonKind;
using jobbuf::redis::PayloadRule;

static bool is_of_kind(const JsonbValue* value, JsonKind kind)
{
    switch (kind) {
    case JsonKind::String:
        return value->type == jbvString;
    case JsonKind::Array:  // containers come back as jbvBinary
        return value->type == jbvBinary && JsonContainerIsArray(value->val.binary.data);
    case JsonKind::Object:
        return value->type == jbvBinary && JsonContainerIsObject(value->val.binary.data);
    }
    return false;
}

static const char* kind_phrase(JsonKind kind)
{
    switch (kind) {
    case JsonKind::String:
        return "a string";
    case JsonKind::Array:
        return "an array";
    case JsonKind::Object:
        return "an object";
    }
    return "a value";
}

static void refuse_payload(const char* queue, const char* target, const PayloadRule& rule, bool present)
{
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    present ? errmsg("jobbuf: in a job for %s queue \"%s\", \"%s\" must be %s", target, queue, rule.key,
                                     kind_phrase(rule.kind))
                            : errmsg("jobbuf: a job for %s queue \"%s\" needs %s \"%s\"", target, queue,
                                     kind_phrase(rule.kind), rule.key),
                    errhint("%s", rule.hint)));
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
    if (!traits.each_delivery)
        return;
    const jobbuf::redis::PayloadShape* shape = jobbuf::redis::target_payload_shape(traits.target);
    if (shape == nullptr || shape->rule_count == 0)
        return;
    // Rules in order: a payload that is not an object fails the first required one.
    for (size_t i = 0; i < shape->rule_count; i++) {
        const PayloadRule& rule = shape->rules[i];
        JsonbValue value;
        JsonbValue* found = JB_ROOT_IS_OBJECT(payload)
                                ? getKeyJsonValueFromContainer(&payload->root, rule.key, strlen(rule.key), &value)
                                : nullptr;
        if (found == nullptr ? rule.required : !is_of_kind(found, rule.kind))
            refuse_payload(queue, traits.target, rule, found != nullptr && rule.required == false);
    }
}

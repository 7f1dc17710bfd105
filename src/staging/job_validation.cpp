// Postgres regime: validation of staged jobs (see job_validation.h).
#include "pg_includes.h"

#include "staging/job_validation.h"

extern "C" {
#include "utils/timestamp.h"
}
#include "redis/target_handle.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/numeric.h"
}

using jobbuf::redis::JsonKind;
using jobbuf::redis::PayloadRule;

// A number as jsonb writes it: an integer has digits only.
static bool is_small_integer(const JsonbValue* value, long long max)
{
    if (value->type != jbvNumeric)
        return false;
    const char* text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(value->val.numeric)));
    size_t len = strlen(text);
    if (len == 0 || len > 18 || strspn(text, "0123456789") != len)
        return false;
    return strtoll(text, nullptr, 10) <= max;
}

static bool is_allowed_string(const JsonbValue* value, const char* const* strings)
{
    if (strings == nullptr)
        return true;
    for (; *strings != nullptr; strings++)
        if (strlen(*strings) == static_cast<size_t>(value->val.string.len) &&
            memcmp(*strings, value->val.string.val, value->val.string.len) == 0)
            return true;
    return false;
}

static bool is_of_kind(const JsonbValue* value, const PayloadRule& rule)
{
    JsonKind kinds = rule.kind;
    if (kinds == JsonKind::Any)
        return true;
    switch (value->type) {
        case jbvString:
            return allows(kinds, JsonKind::String) && is_allowed_string(value, rule.strings);
        case jbvBool:
            return allows(kinds, JsonKind::Boolean);
        case jbvNumeric:
            return allows(kinds, JsonKind::Integer) && is_small_integer(value, rule.integer_max);
        case jbvBinary:  // containers come back as jbvBinary
            return JsonContainerIsArray(value->val.binary.data) ? allows(kinds, JsonKind::Array)
                                                                : allows(kinds, JsonKind::Object);
        default:
            return false;
    }
}

// "a string", "an integer from 0 to 10 or an object", ...
// A rule with allowed strings, for a key that is present: the strings ("fixed" or "exponential").
static const char* strings_phrase(const PayloadRule& rule)
{
    StringInfoData phrase;
    initStringInfo(&phrase);
    for (const char* const* s = rule.strings; *s != nullptr; s++)
        appendStringInfo(&phrase, "%s\"%s\"", s == rule.strings ? "" : " or ", *s);
    return phrase.data;
}

static const char* kind_phrase(const PayloadRule& rule)
{
    static const struct {
        JsonKind kind;
        const char* phrase;
    } kPhrases[] = {{JsonKind::String, "a string"},
                    {JsonKind::Array, "an array"},
                    {JsonKind::Object, "an object"},
                    {JsonKind::Integer, "an integer"},
                    {JsonKind::Boolean, "a boolean"}};
    if (rule.kind == JsonKind::Any)
        return "a value";
    StringInfoData phrase;
    initStringInfo(&phrase);
    for (const auto& p : kPhrases) {
        if (!allows(rule.kind, p.kind))
            continue;
        if (phrase.len > 0)
            appendStringInfoString(&phrase, " or ");
        appendStringInfoString(&phrase, p.phrase);
        if (p.kind == JsonKind::Integer && rule.integer_max != PayloadRule{}.integer_max)
            appendStringInfo(&phrase, " from 0 to %lld", rule.integer_max);
        else if (p.kind == JsonKind::Integer)
            appendStringInfoString(&phrase, " >= 0");
    }
    return phrase.data;
}

static void refuse_payload(const char* queue, const char* target, const char* path, const PayloadRule& rule,
                           bool present)
{
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    present ? errmsg("jobbuf: in a job for %s queue \"%s\", \"%s%s\" must be %s", target, queue, path,
                                     rule.key, rule.strings != nullptr ? strings_phrase(rule) : kind_phrase(rule))
                            : errmsg("jobbuf: a job for %s queue \"%s\" needs %s \"%s%s\"", target, queue,
                                     kind_phrase(rule), path, rule.key),
                    errhint("%s", rule.hint)));
}

// A closed shape: every key of the object is one of its rules'.
static void refuse_other_keys(const char* queue, const char* target, const char* path,
                              const jobbuf::redis::PayloadShape& shape, JsonbContainer* object)
{
    JsonbIterator* it = JsonbIteratorInit(object);
    JsonbValue v;
    JsonbIteratorToken token;
    while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
        if (token != WJB_KEY)
            continue;
        bool known = false;
        for (size_t i = 0; i < shape.rule_count && !known; i++)
            known = strlen(shape.rules[i].key) == size_t(v.val.string.len) &&
                    memcmp(shape.rules[i].key, v.val.string.val, v.val.string.len) == 0;
        if (!known)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("jobbuf: in a job for %s queue \"%s\", \"%s%.*s\" is not a key %s can carry", target,
                                   queue, path, v.val.string.len, v.val.string.val, target),
                            errhint("%s", shape.closed_hint)));
    }
}

// Rules in order: a payload that is not an object fails the first required one. path is the
// keys above this object ("" at the top, "opts." inside opts).
static void check_shape(const char* queue, const char* target, const char* path,
                        const jobbuf::redis::PayloadShape& shape, JsonbContainer* object)
{
    for (size_t i = 0; i < shape.rule_count; i++) {
        const PayloadRule& rule = shape.rules[i];
        JsonbValue value;
        JsonbValue* found =
            object != nullptr ? getKeyJsonValueFromContainer(object, rule.key, strlen(rule.key), &value) : nullptr;
        if (found == nullptr ? rule.required : !is_of_kind(found, rule))
            refuse_payload(queue, target, path, rule, found != nullptr && (!rule.required || rule.strings != nullptr));
        if (found != nullptr && rule.members != nullptr && found->type == jbvBinary &&
            JsonContainerIsObject(found->val.binary.data))
            check_shape(queue, target, psprintf("%s%s.", path, rule.key), *rule.members, found->val.binary.data);
    }
    if (shape.closed && object != nullptr)
        refuse_other_keys(queue, target, path, shape, object);
}

QueueTraits staged_job_queue(const char* queue)
{
    if (queue == nullptr)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION), errmsg("jobbuf: queue must not be NULL"),
                        errhint("Name a queue created with jobbuf_create_queue.")));
    QueueTraits traits;
    if (!lookup_queue_traits(queue, &traits))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT), errmsg("jobbuf: unknown queue \"%s\"", queue),
                        errhint("Create it first with jobbuf_create_queue('%s', target, options).", queue)));
    return traits;
}

void check_staged_time(const char* queue, const char* column, Datum timestamp)
{
    if (TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(timestamp)))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("jobbuf: %s of a job for queue \"%s\" must be a finite time", column, queue),
                        errhint("Use a time in the future for a job that should wait, or NULL for now.")));
}

void check_staged_payload(const char* queue, const QueueTraits& traits, Jsonb* payload)
{
    if (payload == nullptr)
        ereport(ERROR, (errcode(ERRCODE_NOT_NULL_VIOLATION),
                        errmsg("jobbuf: payload of a job for queue \"%s\" must not be NULL", queue),
                        errhint("Stage a JSON value, for example '{}'::jsonb.")));
    if (traits.each_delivery)
        check_payload_for_target(queue, traits.target, payload);
}

void check_payload_for_target(const char* queue, const char* target, Jsonb* payload)
{
    const jobbuf::redis::PayloadShape* shape = jobbuf::redis::target_payload_shape(target);
    if (shape == nullptr || shape->rule_count == 0)
        return;
    check_shape(queue, target, "", *shape, JB_ROOT_IS_OBJECT(payload) ? &payload->root : nullptr);
}

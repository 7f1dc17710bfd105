// The plain data both regimes share about jobs and targets: what the Postgres side takes from
// jobbuf.jobs (StagedJob), what a target needs to know before the take (TargetTraits), a queue's
// options as text (TargetOption), and what happened to each job (JobResult). No Postgres header,
// no object with a destructor: the Postgres regime keeps these in palloc'd memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace jobbuf::redis {

// The targets the worker pushes to (a queue's jobbuf.queues.target; 'none' queues are claimed).
enum class TargetKind : std::uint8_t { List, Stream, Sidekiq, Bullmq, Celery };

struct StagedJob {
    std::int64_t id = 0;
    // The first 32 bits of the installation identity the job was staged under (its origin): with
    // visible_id(), what the ids consumers see derive from (Sidekiq jid, BullMQ and Celery ids, uid).
    std::uint32_t id_salt = 0;
    // A periodic job's tick (jobbuf.jobs.tick_id, derived from its schedule's name and tick; 0 for
    // every other job): a tick staged twice (a failover that lost the first staging) shows
    // consumers the same ids.
    std::int64_t tick_id = 0;
    std::string_view payload;             // the job's JSON text (jsonb canonical output), minus the target's own keys
    double staged_at = 0;                 // epoch seconds
    double run_at = 0;                    // epoch seconds
    bool payload_has_probed_key = false;  // the payload sets TargetTraits::probed_key itself
    // Nonzero when the job was never rendered because its text is longer than Redis accepts: at
    // least this many bytes. Such a job is not sent (JobResult::TooLarge); payload is empty.
    std::size_t known_too_large = 0;
    bool marked = true;  // named by the batch marker; false for group messages, whose jobs stay
                         // in Postgres (claimed) and must never be deleted by reconciliation

    // The number the ids consumers see derive from: the tick's for a tick, the job id otherwise.
    std::int64_t visible_id() const { return tick_id != 0 ? tick_id : id; }
};

// What the take must know of a queue's target.
struct TargetTraits {
    // The target keeps jobs until their run_at itself (Sidekiq's schedule): the take ignores
    // run_at. Otherwise only jobs whose run_at has come are taken.
    bool carries_run_at = false;
    // Payload keys the encoder writes itself: removed from the payload before it is sent.
    const char* const* own_keys = nullptr;
    std::size_t own_key_count = 0;
    // A payload key whose presence the encoder needs to know (StagedJob::payload_has_probed_key);
    // nullptr when none.
    const char* probed_key = nullptr;
};

// One top-level entry of a queue's options: strings as their text, other JSON values as JSON.
struct TargetOption {
    const char* name;
    const char* value;
};

// A job time as the encoders may use it: within [1970, 9999], whatever the row holds (staging
// refuses 'infinity', but rows restored or inserted with triggers off may still carry it).
constexpr double kLatestEpochSeconds = 253402300799.0;  // 9999-12-31T23:59:59Z
inline double bounded_epoch_seconds(double seconds)
{
    return seconds > kLatestEpochSeconds ? kLatestEpochSeconds : seconds >= 0 ? seconds : 0;
}

// What a target needs of each staged payload, checked in the producer's transaction
// (src/staging/job_validation.cpp): the payload is an object whose keys named here have one of
// the JSON types their rule allows, and the required ones are present. Defined with the target
// (src/redis/targets/).
enum class JsonKind : std::uint8_t {
    String = 1,
    Array = 2,
    Object = 4,
    Integer = 8,  // a number written without sign, fraction or exponent, at most integer_max
    Boolean = 16,
    Any = 31,  // any JSON value, null included
};

constexpr JsonKind operator|(JsonKind a, JsonKind b)
{
    return static_cast<JsonKind>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}

constexpr bool allows(JsonKind kinds, JsonKind one)
{
    return (static_cast<std::uint8_t>(kinds) & static_cast<std::uint8_t>(one)) != 0;
}

struct PayloadShape;

struct PayloadRule {
    const char* key;
    JsonKind kind;  // the kinds allowed (JsonKind values or'ed together)
    bool required;
    const char* hint;                          // the error's hint when the key is missing or of another type
    long long integer_max = 9007199254740991;  // JsonKind::Integer: the largest value allowed
    const PayloadShape* members = nullptr;     // an object value's own shape, checked in turn
    const char* const* strings = nullptr;      // JsonKind::String: the values allowed (ends with
                                               // nullptr); nullptr: any string
};

struct PayloadShape {
    const PayloadRule* rules = nullptr;  // none: any JSON value
    std::size_t rule_count = 0;
    bool closed = false;                // no keys but those of the rules
    const char* closed_hint = nullptr;  // closed: the hint when another key is present
};

// What happened to one job of a batch. TooLarge: never sent, Redis would refuse it.
enum class JobResult : std::uint8_t { Delivered, Rejected, Retry, TooLarge };

}  // namespace jobbuf::redis

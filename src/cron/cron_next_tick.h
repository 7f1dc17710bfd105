// Pure C++ regime: a schedule's next tick, as a Unix time (UTC seconds), in a time zone the
// caller describes by its UTC offset at any instant (the Postgres side reads it from its own tz
// data; this side never looks a zone up). SPEC "Periodic jobs", "DST, as cron does it".
#pragma once
#include <cstdint>

#include "cron/cron_spec.h"

namespace jobbuf::cron {

// A zone's UTC offset in seconds east of Greenwich (struct tm's tm_gmtoff: +3600 for CET) in
// effect at a Unix time. Returns false when the zone cannot tell; next_tick then reports
// kZoneError. It must not throw (it is called from noexcept code).
using OffsetFn = bool (*)(const void* context, std::int64_t unix_seconds, std::int32_t* offset) noexcept;

// A time zone as next_tick sees it: offset_at(context, t, &offset). A null offset_at is UTC.
// next_tick relies on what tz data gives for every zone since 1900: offsets within ±16 hours
// (kMaxUtcOffset) and at most one offset change in any 32 hours (real changes are days apart).
struct Zone {
    OffsetFn offset_at = nullptr;
    const void* context = nullptr;
};

constexpr std::int32_t kMaxUtcOffset = 16 * 3600;

// The Unix times next_tick works in: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
constexpr std::int64_t kMinUnixSeconds = -62135596800;
constexpr std::int64_t kMaxUnixSeconds = 253402300799;

// How far a calendar schedule is searched: 28 years of local dates (the calendar repeats its
// weekdays every 28 years between century years; Feb 29 comes back within 8).
constexpr int kSearchYears = 28;

enum class NextStatus {
    kFound,       // tick is the first tick strictly after `after`
    kNone,        // no tick within kSearchYears (e.g. "0 0 30 2 *") or before year 10000
    kZoneError,   // the zone's offset function failed, or gave offsets outside what tz data gives
    kOutOfRange,  // `after` is outside kMinUnixSeconds..kMaxUnixSeconds
};

struct NextResult {
    NextStatus status = NextStatus::kNone;
    std::int64_t tick = 0;     // set when kFound
    const char* message = "";  // static text for the statuses that are not kFound, one line
};

// The first tick of spec strictly after `after` (Unix seconds), in zone:
//   - "N seconds": the next multiple of N (Unix time), whatever the zone.
//   - A calendar schedule fires at the local whole minutes its fields match (local time = UTC +
//     the zone's offset at that instant), searched by fields (month, day, hour, minute), never
//     minute by minute: a call costs a few steps per month searched and a few offset calls.
//     * spec.fixed_time (neither minute nor hour has '*' or a step): a matching local time that
//       a forward change skips fires once, at the instant of the change (the first local time
//       that exists after the gap: 03:00 for a skipped 02:30 in Europe/Berlin); several skipped
//       matching times of one change make that single tick. A matching local time that a
//       backward change repeats fires once, at its first occurrence.
//     * otherwise (wall clock): every matching local time that exists fires, both passes of a
//       repeated hour included; skipped local times do not fire.
// Never throws and never loops without bound.
NextResult next_tick(const Spec& spec, std::int64_t after, const Zone& zone) noexcept;

}  // namespace jobbuf::cron

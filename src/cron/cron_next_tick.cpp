// Pure C++ regime: the next tick of a schedule in UTC, given its zone's offset function and
// SPEC's DST rules (fixed times fire skipped local times at the change and repeated ones once;
// wall-clock schedules fire every local time that exists).
//
// How: matching local minutes are visited in local order (cron_calendar's field-skipping
// search), and each is turned into the Unix times at which the local clock shows it. Local time
// c can only be shown within kMaxUtcOffset of c (read as UTC), and in that window the offset
// changes at most once, from `before` (at c - kMaxUtcOffset) to `after` (at c + kMaxUtcOffset):
// c is shown at c - before if the offset there is still `before`, at c - after if it is already
// `after` (both: a repeated time; neither: a skipped time, whose change instant is found by
// bisection). Local order is UTC order except inside a repeated stretch, so after the first tick
// found, only the local times that could still map to an earlier instant are visited.
#include "cron/regime.h"

#include "cron/cron_next_tick.h"

#include "cron/cron_calendar.h"

namespace jobbuf::cron {

namespace {

constexpr std::int64_t kWindow = kMaxUtcOffset;
constexpr std::int64_t kSearchSeconds = std::int64_t{kSearchYears} * 366 * kSecondsPerDay;
// Local minutes visited in one call; a consistent zone needs at most the minutes of one skipped
// or repeated stretch (a day at most) beyond the first match, so reaching this means the zone's
// offsets do not behave as tz data does.
constexpr int kMaxVisited = 20000;

constexpr const char* kNoOffset = "the time zone gave no UTC offset for an instant";
constexpr const char* kWildOffset = "the time zone gave a UTC offset beyond 16 hours";
constexpr const char* kUnsteadyOffset = "the time zone's UTC offset changes more than once within 32 hours";
constexpr const char* kNoTick = "the schedule has no tick within 28 years";
constexpr const char* kNoTickBefore10000 = "the schedule has no tick before year 10000";
constexpr const char* kOutOfRangeText = "the instant is outside the years 1 to 9999";
constexpr const char* kBadSpec = "the schedule's period is not 1 to 59 seconds";

class ZoneReader {
public:
    explicit ZoneReader(const Zone& zone) : zone_(zone) {}

    // The offset at t; false (and failure() says why) when the zone cannot tell or is out of bounds.
    bool offset(std::int64_t t, std::int64_t* out) noexcept
    {
        if (zone_.offset_at == nullptr) {
            *out = 0;
            return true;
        }
        std::int32_t offset = 0;
        if (!zone_.offset_at(zone_.context, t, &offset)) {
            failure_ = kNoOffset;
            return false;
        }
        if (offset < -kMaxUtcOffset || offset > kMaxUtcOffset) {
            failure_ = kWildOffset;
            return false;
        }
        *out = offset;
        return true;
    }

    bool fail(const char* why) noexcept
    {
        failure_ = why;
        return false;
    }

    const char* failure() const noexcept { return failure_; }

private:
    const Zone& zone_;
    const char* failure_ = kNoOffset;
};

// Where local time c (civil seconds of the zone) is shown on the clock.
struct Occurrences {
    std::int64_t before = 0;  // offset at c - kWindow
    std::int64_t after = 0;   // offset at c + kWindow
    bool first_ok = false;    // shown at `first` (with offset `before`)
    std::int64_t first = 0;
    bool second_ok = false;  // shown (again, or only) at `second` (with offset `after`)
    std::int64_t second = 0;
    bool skipped = false;  // a forward change skips c; it happens at `change`
    std::int64_t change = 0;
};

bool resolve(ZoneReader& zone, std::int64_t c, Occurrences* occ) noexcept
{
    Occurrences o;
    if (!zone.offset(c - kWindow, &o.before) || !zone.offset(c + kWindow, &o.after))
        return false;
    std::int64_t at_first = 0;
    o.first = c - o.before;
    if (!zone.offset(o.first, &at_first))
        return false;
    o.first_ok = at_first == o.before;
    if (o.before == o.after) {
        if (!o.first_ok)
            return zone.fail(kUnsteadyOffset);
        *occ = o;
        return true;
    }
    std::int64_t at_second = 0;
    o.second = c - o.after;
    if (!zone.offset(o.second, &at_second))
        return false;
    o.second_ok = at_second == o.after;
    if (!o.first_ok && !o.second_ok) {
        if (o.before > o.after)
            return zone.fail(kUnsteadyOffset);
        // Skipped: the change lies in (second, first]; the offset is `before` at second and no
        // longer at first. Bisect for the first instant that has the new offset.
        std::int64_t low = o.second;
        std::int64_t high = o.first;
        while (high - low > 1) {
            const std::int64_t mid = low + (high - low) / 2;
            std::int64_t at_mid = 0;
            if (!zone.offset(mid, &at_mid))
                return false;
            if (at_mid == o.before)
                low = mid;
            else
                high = mid;
        }
        o.skipped = true;
        o.change = high;
    }
    *occ = o;
    return true;
}

NextResult result(NextStatus status, std::int64_t tick, const char* message) noexcept
{
    NextResult r;
    r.status = status;
    r.tick = tick;
    r.message = message;
    return r;
}

NextResult next_every_seconds(int n, std::int64_t after) noexcept
{
    if (n < kEverySecondsMin || n > kEverySecondsMax)
        return result(NextStatus::kNone, 0, kBadSpec);
    const std::int64_t tick = (floor_div(after, n) + 1) * n;
    if (tick > kMaxUnixSeconds)
        return result(NextStatus::kNone, 0, kNoTickBefore10000);
    return result(NextStatus::kFound, tick, "");
}

}  // namespace

NextResult next_tick(const Spec& spec, std::int64_t after, const Zone& zone) noexcept
{
    if (after < kMinUnixSeconds || after > kMaxUnixSeconds)
        return result(NextStatus::kOutOfRange, 0, kOutOfRangeText);
    if (spec.every_seconds != 0)
        return next_every_seconds(spec.every_seconds, after);

    ZoneReader reader(zone);
    const auto zone_error = [&reader]() { return result(NextStatus::kZoneError, 0, reader.failure()); };

    // The lowest local time shown after `after`: its own, unless a backward change comes before
    // the clock gets back to it, which shows the repeated stretch again.
    std::int64_t now_offset = 0;
    std::int64_t later_offset = 0;
    if (!reader.offset(after, &now_offset) || !reader.offset(after + 2 * kWindow, &later_offset))
        return zone_error();
    std::int64_t from = after + now_offset;
    if (later_offset < now_offset) {
        std::int64_t soon = 0;
        if (!reader.offset(after + (now_offset - later_offset), &soon))
            return zone_error();
        if (soon == later_offset)
            from = after + later_offset;
    }
    std::int64_t until = from + kSearchSeconds;
    if (until > kMaxUnixSeconds + kWindow)
        until = kMaxUnixSeconds + kWindow;

    bool found = false;
    std::int64_t best = 0;
    // Local times at or past `bound` cannot be shown before `best`.
    std::int64_t bound = until + 1;
    std::int64_t local = 0;
    for (int visited = 0; next_matching_minute(spec, from, bound - 1, &local); ++visited) {
        if (visited == kMaxVisited) {
            reader.fail(kUnsteadyOffset);
            return zone_error();
        }
        Occurrences occ;
        if (!resolve(reader, local, &occ))
            return zone_error();
        std::int64_t ticks[2];
        int count = 0;
        if (spec.fixed_time) {
            // Once, at the first occurrence; a skipped time at the change.
            if (occ.first_ok)
                ticks[count++] = occ.first;
            else if (occ.second_ok)
                ticks[count++] = occ.second;
            else
                ticks[count++] = occ.change;
        } else {
            if (occ.first_ok)
                ticks[count++] = occ.first;
            if (occ.second_ok && occ.after != occ.before)
                ticks[count++] = occ.second;
        }
        for (int i = 0; i < count; ++i) {
            if (ticks[i] > after && (!found || ticks[i] < best)) {
                found = true;
                best = ticks[i];
                // A skipped time's tick is the change itself: no later local time is shown
                // before it. Otherwise a later local time L is shown at L - (an offset of this
                // window) at the earliest.
                const std::int64_t reach =
                    occ.skipped ? local + 60 - best : (occ.before > occ.after ? occ.before : occ.after);
                if (best + reach < bound)
                    bound = best + reach;
            }
        }
        if (occ.skipped && found && best == occ.change)
            break;
        from = local + 60;
    }
    if (!found)
        return result(NextStatus::kNone, 0, kNoTick);
    if (best > kMaxUnixSeconds)
        return result(NextStatus::kNone, 0, kNoTickBefore10000);
    return result(NextStatus::kFound, best, "");
}

}  // namespace jobbuf::cron

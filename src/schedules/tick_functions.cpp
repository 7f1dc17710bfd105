// Postgres regime: the SQL-callable face of src/cron/ (70_schedules.sql): jobbuf.next_tick, the
// first tick of a cron text after an instant in a time zone, and jobbuf.ticks_between, the ticks
// due between two instants (what catch_up chooses from). Time zones come from PostgreSQL's own
// tz data (pg_tzset, pg_localtime); an invalid cron text is an error that shows the valid form.
#include "pg_includes.h"

#include "cron/cron_next_tick.h"
#include "cron/cron_parse.h"

extern "C" {
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace {

// Seconds between the Unix epoch and PostgreSQL's (2000-01-01).
constexpr int64 kEpochShift = static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;

// How many ticks ticks_between walks at most (it keeps the latest): a calendar schedule's ticks of
// a long gap are walked one by one ("N seconds" ones are not: see jobbuf_ticks_between).
constexpr int64 kMaxWalk = 32 * 1000 * 1000;

bool zone_offset(const void* context, std::int64_t unix_seconds, std::int32_t* offset) noexcept
{
    pg_time_t t = static_cast<pg_time_t>(unix_seconds);
    struct pg_tm* tm = pg_localtime(&t, static_cast<const pg_tz*>(context));
    if (tm == nullptr)
        return false;
    *offset = static_cast<std::int32_t>(tm->tm_gmtoff);
    return true;
}

jobbuf::cron::Spec parsed_cron(text* cron_text)
{
    char* cron = text_to_cstring(cron_text);
    jobbuf::cron::Spec spec;
    char error[256];
    if (!jobbuf::cron::parse_into(cron, &spec, error, sizeof(error)))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("jobbuf: invalid cron text %s: %s", quote_literal_cstr(cron), error),
                        errhint("five fields (minute hour day month weekday) such as '*/5 * * * *' or '0 3 * * mon-fri', "
                                "@hourly, @daily, @weekly, @monthly, @yearly, or 'N seconds' (N from 1 to 59)")));
    return spec;
}

jobbuf::cron::Zone zone_named(text* zone_text)
{
    char* name = text_to_cstring(zone_text);
    pg_tz* tz = pg_tzset(name);
    if (tz == nullptr)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("jobbuf: unknown time zone %s", quote_literal_cstr(name)),
                        errhint("give a name from pg_timezone_names, such as 'Europe/Berlin' or 'UTC'")));
    jobbuf::cron::Zone zone;
    zone.offset_at = zone_offset;
    zone.context = tz;
    return zone;
}

// The first tick strictly after `after`; false when there is none.
bool tick_after(const jobbuf::cron::Spec& spec, const jobbuf::cron::Zone& zone, TimestampTz after, TimestampTz* tick)
{
    if (TIMESTAMP_NOT_FINITE(after))
        return false;
    // Ticks are whole seconds: the first one after a fraction of a second is after its second.
    int64 seconds = after / USECS_PER_SEC - (after % USECS_PER_SEC < 0 ? 1 : 0);
    jobbuf::cron::NextResult next = jobbuf::cron::next_tick(spec, seconds + kEpochShift, zone);
    switch (next.status) {
        case jobbuf::cron::NextStatus::kFound:
            *tick = (next.tick - kEpochShift) * USECS_PER_SEC;
            return true;
        case jobbuf::cron::NextStatus::kZoneError:
            ereport(ERROR, (errmsg("jobbuf: %s", next.message)));
            break;
        default:
            break;
    }
    return false;
}

}  // namespace

JOBBUF_SQL_FUNCTION(jobbuf_next_tick)
{
    jobbuf::cron::Spec spec = parsed_cron(PG_GETARG_TEXT_PP(0));
    jobbuf::cron::Zone zone = zone_named(PG_GETARG_TEXT_PP(1));
    TimestampTz tick = 0;
    if (!tick_after(spec, zone, PG_GETARG_TIMESTAMPTZ(2), &tick))
        PG_RETURN_NULL();
    PG_RETURN_TIMESTAMPTZ(tick);
}

// ticks_between(cron, time_zone, first, upto, keep): first (a tick) and the ticks after it up to
// upto, the latest keep of them, oldest first; empty when first is after upto.
JOBBUF_SQL_FUNCTION(jobbuf_ticks_between)
{
    jobbuf::cron::Spec spec = parsed_cron(PG_GETARG_TEXT_PP(0));
    jobbuf::cron::Zone zone = zone_named(PG_GETARG_TEXT_PP(1));
    TimestampTz first = PG_GETARG_TIMESTAMPTZ(2);
    TimestampTz upto = PG_GETARG_TIMESTAMPTZ(3);
    int32 keep = PG_GETARG_INT32(4);
    if (keep < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("jobbuf: ticks_between keeps at least one tick")));
    Datum* ring = static_cast<Datum*>(palloc(sizeof(Datum) * keep));
    int64 count = 0;
    TimestampTz tick = first;
    // "N seconds" after a long gap: only the latest keep ticks are walked (the last multiple of N
    // at or before upto, and the keep - 1 before it), not a year of them.
    if (spec.every_seconds > 0 && !TIMESTAMP_NOT_FINITE(first) && !TIMESTAMP_NOT_FINITE(upto) && upto >= first) {
        int64 step = spec.every_seconds;
        int64 upto_s = upto / USECS_PER_SEC - (upto % USECS_PER_SEC < 0 ? 1 : 0) + kEpochShift;
        int64 last = upto_s - ((upto_s % step) + step) % step;
        int64 window_start = last - (static_cast<int64>(keep) - 1) * step;
        TimestampTz start = (window_start - kEpochShift) * USECS_PER_SEC;
        if (start > first)
            tick = start;
    }
    while (!TIMESTAMP_NOT_FINITE(tick) && tick <= upto && count < kMaxWalk) {
        CHECK_FOR_INTERRUPTS();
        ring[count % keep] = TimestampTzGetDatum(tick);
        count++;
        if (!tick_after(spec, zone, tick, &tick))
            break;
    }
    int n = static_cast<int>(Min(count, static_cast<int64>(keep)));
    Datum* ordered = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++)
        ordered[i] = ring[(count - n + i) % keep];
    PG_RETURN_ARRAYTYPE_P(construct_array(ordered, n, TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

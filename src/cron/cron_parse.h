// Pure C++ regime: a schedule's cron text read into a Spec, or refused with a one-line message
// for the user who typed it (SPEC "Periodic jobs"). Both calls are noexcept and never throw.
//
// Accepted text (leading and trailing white space ignored, items separated by runs of spaces or
// tabs; newlines and other white space count as spaces):
//   - five fields "minute hour day-of-month month weekday" as Vixie cron reads them: minute 0-59,
//     hour 0-23, day-of-month 1-31, month 1-12 or jan-dec, weekday 0-7 (0 and 7 are Sunday) or
//     sun-sat; names are three letters, in any case. Each field is a list of items separated by
//     commas (no spaces), an item being "*", a value "5", a range "1-5" (low to high; names
//     allowed, "mon-fri"), a step over either "*/15", "0-30/5", or "a/n" meaning a through the
//     field's highest value ("5/15" is 5,20,35,50 in the minute field; 7 in the weekday field).
//     A step runs from 1 to the number of values the field holds (60 for minutes, 8 for
//     weekdays).
//   - a macro alone, in any case: @yearly and @annually ("0 0 1 1 *"), @monthly ("0 0 1 * *"),
//     @weekly ("0 0 * * 0"), @daily and @midnight ("0 0 * * *"), @hourly ("0 * * * *").
//     @reboot is refused: a schedule fires on the calendar, never at a server start.
//   - "N seconds" or "N second" (the word in any case, after white space), N a whole number from
//     1 to 59: a tick at every Unix time that is a multiple of N.
// Refused: anything else. The message names the field and the text at fault and shows the valid
// form, e.g. `minute field "61": 61 is out of range; minute values are 0-59`.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "cron/cron_spec.h"

namespace jobbuf::cron {

struct ParseResult {
    bool ok = false;
    Spec spec;          // set when ok
    std::string error;  // one line, set when !ok
};

// The Spec of text, or its refusal. Out of memory (the only thing that could throw) is reported
// as a refusal whose message says so.
ParseResult parse(std::string_view text) noexcept;

// The same without an object that owns memory, for a caller that must not hold one (a frame that
// can ereport): true and *spec set, or false and the message in error (NUL-terminated, cut to
// error_size - 1 bytes; error may be null when error_size is 0).
bool parse_into(std::string_view text, Spec* spec, char* error, std::size_t error_size) noexcept;

}  // namespace jobbuf::cron

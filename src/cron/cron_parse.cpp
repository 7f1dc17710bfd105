// Pure C++ regime: reading a schedule's cron text (five Vixie fields, a macro or "N seconds")
// into a Spec, with a one-line refusal that names the field and shows the valid form.
#include "cron/regime.h"

#include "cron/cron_parse.h"

#include <cstdint>
#include <cstring>
#include <new>

namespace jobbuf::cron {

namespace {

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kWeekdayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

struct FieldInfo {
    const char* name;  // as the messages name the field
    int low;
    int high;
    const char* const* names;  // three-letter names of low, low + 1, ... (or null)
    int name_count;
    const char* values;  // the valid values, for the messages
};

constexpr FieldInfo kFields[5] = {
    {"minute", kMinuteMin, kMinuteMax, nullptr, 0, "minute values are 0-59"},
    {"hour", kHourMin, kHourMax, nullptr, 0, "hour values are 0-23"},
    {"day-of-month", kDayMin, kDayMax, nullptr, 0, "day-of-month values are 1-31"},
    {"month", kMonthMin, kMonthMax, kMonthNames, 12, "month values are 1-12 or jan-dec"},
    {"weekday", kWeekdayMin, kWeekdayMax, kWeekdayNames, 7, "weekday values are 0-7 (0 and 7 are Sunday) or sun-sat"},
};

constexpr const char* kForm =
    "a field is *, a value, a range such as 1-5, a list such as 1,15,30 or a step such as */15 or 0-30/5";

constexpr const char* kExpected = "expected five fields (minute hour day-of-month month weekday), a macro such as "
                                  "@daily, or \"N seconds\" with N from 1 to 59";

constexpr const char* kMacros = "@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly";

struct Macro {
    const char* name;  // lower case, without '@'
    const char* fields;
};

constexpr Macro kMacroTable[] = {
    {"yearly", "0 0 1 1 *"}, {"annually", "0 0 1 1 *"}, {"monthly", "0 0 1 * *"}, {"weekly", "0 0 * * 0"},
    {"daily", "0 0 * * *"},  {"midnight", "0 0 * * *"}, {"hourly", "0 * * * *"},
};

// Quoting user text into a one-line message: control characters become spaces and a long text
// is cut (at a UTF-8 character boundary) with "...".
constexpr std::size_t kQuoteMax = 64;

std::string quoted(std::string_view text)
{
    std::string out = "\"";
    std::size_t n = text.size();
    bool cut = false;
    if (n > kQuoteMax) {
        n = kQuoteMax;
        while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80)
            --n;
        cut = true;
    }
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
    }
    out += cut ? "...\"" : "\"";
    return out;
}

bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_ignoring_case(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i]))
            return false;
    }
    return true;
}

bool all_digits(std::string_view text)
{
    if (text.empty())
        return false;
    for (char c : text) {
        if (!is_digit(c))
            return false;
    }
    return true;
}

// The value of a non-empty run of digits, saturated at 1,000,000 (a field never goes near it).
long digits_value(std::string_view text)
{
    long v = 0;
    for (char c : text)
        v = v >= 1000000 ? v : v * 10 + (c - '0');
    return v;
}

// A run of digits as the message repeats it (cut when very long).
std::string number_text(std::string_view digits)
{
    return digits.size() > 12 ? std::string(digits.substr(0, 12)) + "..." : std::string(digits);
}

// Up to six words of text (enough to tell "too many"), and their count.
struct Words {
    std::string_view word[6];
    int count = 0;
};

Words split_words(std::string_view text)
{
    Words w;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_space(text[i]))
            ++i;
        if (i == text.size())
            break;
        const std::size_t start = i;
        while (i < text.size() && !is_space(text[i]))
            ++i;
        if (w.count < 6)
            w.word[w.count] = text.substr(start, i - start);
        ++w.count;
    }
    return w;
}

std::string_view trimmed(std::string_view text)
{
    while (!text.empty() && is_space(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && is_space(text.back()))
        text.remove_suffix(1);
    return text;
}

class FieldReader {
public:
    FieldReader(const FieldInfo& field, std::string_view text, std::string* error)
        : field_(field), text_(text), error_(error)
    {
    }

    // Reads the whole field into *mask (bit v for value v); false with *error set on refusal.
    bool read(std::uint64_t* mask)
    {
        std::uint64_t bits = 0;
        std::size_t start = 0;
        while (true) {
            const std::size_t comma = text_.find(',', start);
            const std::string_view item =
                text_.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
            if (!read_item(item, &bits))
                return false;
            if (comma == std::string_view::npos)
                break;
            start = comma + 1;
        }
        *mask = bits;
        return true;
    }

private:
    bool refuse(const std::string& problem, bool show_form)
    {
        *error_ = std::string(field_.name) + " field " + quoted(text_) + ": " + problem + "; " +
                  (show_form ? std::string(kForm) + "; " : std::string()) + field_.values;
        return false;
    }

    // One value: digits, or a three-letter name where the field has names.
    bool read_value(std::string_view text, int* value)
    {
        if (all_digits(text)) {
            const long v = digits_value(text);
            if (v < field_.low || v > field_.high)
                return refuse(number_text(text) + " is out of range", false);
            *value = static_cast<int>(v);
            return true;
        }
        for (int i = 0; i < field_.name_count; ++i) {
            if (equals_ignoring_case(text, field_.names[i])) {
                *value = field_.low == 0 ? i : i + 1;  // sun is 0, jan is 1
                return true;
            }
        }
        if (text.find('*') != std::string_view::npos)
            return refuse("'*' stands alone or before a step (*/15)", true);
        if (field_.names != nullptr)
            return refuse(quoted(text) + " is neither a number nor a " + field_.name + " name", false);
        return refuse(quoted(text) + " is not a number", true);
    }

    bool read_item(std::string_view item, std::uint64_t* bits)
    {
        if (item.empty())
            return refuse("an item of the list is empty", true);
        const std::size_t slash = item.find('/');
        const std::string_view base = item.substr(0, slash);
        int step = 1;
        if (slash != std::string_view::npos) {
            const std::string_view step_text = item.substr(slash + 1);
            if (base.empty())
                return refuse("a step needs *, a value or a range before '/'", true);
            if (!all_digits(step_text)) {
                return refuse(step_text.empty() ? std::string("a step needs a number after '/'")
                                                : "step " + quoted(step_text) + " is not a whole number",
                              true);
            }
            const long v = digits_value(step_text);
            const int span = field_.high - field_.low + 1;
            if (v == 0)
                return refuse("a step of 0 never moves on; a step is 1 or more", false);
            if (v > span)
                return refuse("step " + number_text(step_text) + " is larger than the field's " + std::to_string(span) +
                                  " values",
                              false);
            step = static_cast<int>(v);
        }
        int low = field_.low;
        int high = field_.high;
        if (base != "*") {
            const std::size_t dash = base.find('-');
            if (dash == std::string_view::npos) {
                if (!read_value(base, &low))
                    return false;
                // "a/n" runs from a to the field's highest value; a lone value is itself.
                high = slash == std::string_view::npos ? low : field_.high;
            } else {
                const std::string_view first = base.substr(0, dash);
                const std::string_view last = base.substr(dash + 1);
                if (first.empty() || last.empty())
                    return refuse("a range needs a value on each side of '-' (as in 1-5)", true);
                if (last.find('-') != std::string_view::npos)
                    return refuse("a range has a single '-' (as in 1-5)", true);
                if (!read_value(first, &low) || !read_value(last, &high))
                    return false;
                if (low > high) {
                    return refuse("range " + quoted(base) + " runs backwards (" + std::to_string(low) + " is after " +
                                      std::to_string(high) + "); a range runs from low to high",
                                  false);
                }
            }
        }
        for (int v = low; v <= high; v += step)
            *bits |= std::uint64_t{1} << v;
        return true;
    }

    const FieldInfo& field_;
    std::string_view text_;
    std::string* error_;
};

// A '*' or a '/' anywhere in the field: it follows the wall clock (see Spec::fixed_time).
bool follows_wall_clock(std::string_view field)
{
    return field.find_first_of("*/") != std::string_view::npos;
}

bool parse_fields(const std::string_view (&fields)[5], Spec* spec, std::string* error)
{
    std::uint64_t mask[5];
    for (int i = 0; i < 5; ++i) {
        FieldReader reader(kFields[i], fields[i], error);
        if (!reader.read(&mask[i]))
            return false;
    }
    Spec s;
    s.minutes = mask[0];
    s.hours = static_cast<std::uint32_t>(mask[1]);
    s.days = static_cast<std::uint32_t>(mask[2]);
    s.months = static_cast<std::uint16_t>(mask[3]);
    // Weekday 7 is Sunday, kept as 0.
    s.weekdays = static_cast<std::uint8_t>((mask[4] & 0x7f) | ((mask[4] >> 7) & 1u));
    s.day_restricted = fields[2].front() != '*';
    s.weekday_restricted = fields[4].front() != '*';
    s.fixed_time = !follows_wall_clock(fields[0]) && !follows_wall_clock(fields[1]);
    s.every_seconds = 0;
    *spec = s;
    return true;
}

bool is_seconds_word(std::string_view word)
{
    return equals_ignoring_case(word, "seconds") || equals_ignoring_case(word, "second");
}

bool parse_text(std::string_view text, Spec* spec, std::string* error)
{
    const std::string_view body = trimmed(text);
    const Words words = split_words(body);
    if (words.count == 0) {
        *error = std::string("empty cron text: ") + kExpected;
        return false;
    }
    if (words.word[0].front() == '@') {
        const std::string_view name = words.word[0].substr(1);
        if (equals_ignoring_case(name, "reboot")) {
            *error = "\"@reboot\" is refused: a schedule fires on the calendar, not when the server starts; use " +
                     std::string(kMacros) + ", five fields or \"N seconds\"";
            return false;
        }
        const Macro* macro = nullptr;
        for (const Macro& m : kMacroTable) {
            if (equals_ignoring_case(name, m.name))
                macro = &m;
        }
        if (macro == nullptr) {
            *error = "unknown macro " + quoted(words.word[0]) + ": use " + kMacros;
            return false;
        }
        if (words.count != 1) {
            *error = quoted(body) + ": a macro stands alone, with nothing after it (" + kMacros + ")";
            return false;
        }
        const Words expanded = split_words(macro->fields);
        const std::string_view fields[5] = {expanded.word[0], expanded.word[1], expanded.word[2], expanded.word[3],
                                            expanded.word[4]};
        return parse_fields(fields, spec, error);
    }
    if (words.count == 2 && is_seconds_word(words.word[1])) {
        const std::string_view n = words.word[0];
        if (!all_digits(n) || digits_value(n) < kEverySecondsMin || digits_value(n) > kEverySecondsMax) {
            *error = quoted(body) + ": \"N seconds\" takes a whole number N from 1 to 59; for a minute or longer use " +
                     "five fields, such as */5 * * * * for every 5 minutes";
            return false;
        }
        Spec s;
        s.every_seconds = static_cast<int>(digits_value(n));
        *spec = s;
        return true;
    }
    if (words.count != 5) {
        *error = std::string(kExpected) + "; got " + std::to_string(words.count) +
                 (words.count == 1 ? " field in " : " fields in ") + quoted(body);
        return false;
    }
    const std::string_view fields[5] = {words.word[0], words.word[1], words.word[2], words.word[3], words.word[4]};
    return parse_fields(fields, spec, error);
}

constexpr const char* kOutOfMemory = "out of memory while reading the cron text";

}  // namespace

ParseResult parse(std::string_view text) noexcept
{
    try {
        ParseResult result;
        result.ok = parse_text(text, &result.spec, &result.error);
        if (result.ok)
            result.error.clear();
        else
            result.spec = Spec{};
        return result;
    } catch (...) {
        // Only std::bad_alloc gets here. The message may not fit either: then it stays empty.
        ParseResult result;
        try {
            result.error = kOutOfMemory;
        } catch (...) {
        }
        return result;
    }
}

namespace {

// Copies message into error (error_size bytes), cut at a UTF-8 character boundary.
void copy_message(std::string_view message, char* error, std::size_t error_size) noexcept
{
    if (error_size == 0)
        return;
    std::size_t n = message.size();
    if (n > error_size - 1) {
        n = error_size - 1;
        while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xc0) == 0x80)
            --n;
    }
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
}

}  // namespace

bool parse_into(std::string_view text, Spec* spec, char* error, std::size_t error_size) noexcept
{
    try {
        std::string problem;
        Spec s;
        if (parse_text(text, &s, &problem)) {
            *spec = s;
            copy_message("", error, error_size);
            return true;
        }
        copy_message(problem, error, error_size);
        return false;
    } catch (...) {
        copy_message(kOutOfMemory, error, error_size);
        return false;
    }
}

}  // namespace jobbuf::cron

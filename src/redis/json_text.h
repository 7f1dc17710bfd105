// Pure C++ regime: small JSON text writers (string escaping, epoch timestamps) for the encoders.
// Locale independent: numbers go through std::to_chars only. They append to a std::string and
// may throw std::bad_alloc; callers are inside a noexcept boundary that catches it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace jobbuf::redis {

// Appends text as a JSON string literal, quotes included.
void append_json_string(std::string_view text, std::string* out);

// Epoch seconds as a decimal with exactly 6 fraction digits ("1700000000.123456"): always a
// decimal point, never an exponent. Non-finite values are written as 0.000000.
void append_epoch_seconds(double epoch_seconds, std::string* out);

// Epoch seconds as integer epoch milliseconds, rounded ("1700000000123").
void append_epoch_millis(double epoch_seconds, std::string* out);

// The low `digits` hex digits of value, lowercase, zero-padded ("0000abcd").
void append_hex(std::uint64_t value, int digits, std::string* out);

// Epoch seconds as ISO 8601 UTC with microseconds and offset, as Python's isoformat() writes an
// aware datetime ("2030-01-02T03:04:05.678000+00:00").
void append_iso8601_utc(double epoch_seconds, std::string* out);

}  // namespace jobbuf::redis

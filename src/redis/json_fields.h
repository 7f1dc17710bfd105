// Pure C++ regime: reading a staged payload's top-level fields without building a document. The
// payloads come from jsonb's text output (valid JSON, validated in the producer's transaction),
// but a reader must not trust that: malformed text is reported, never read past.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace jobbuf::redis {

// The text of the values of the top-level keys `names` of the JSON object `object`: values[i]
// is the value's JSON text for names[i], or a view with data() == nullptr when the key is
// absent. Keys are compared as written (the names are plain ASCII). False when object is not a
// well-formed JSON object text (then values are unspecified).
bool json_object_fields(std::string_view object, const std::string_view* names, std::size_t count,
                        std::string_view* values);

// The text of a JSON string literal (quotes included) decoded into UTF-8 in *out. False when it
// is not one.
bool json_string_value(std::string_view literal, std::string* out);

// True when text is a JSON non-negative integer without fraction or exponent, at most max;
// *value receives it.
bool json_small_integer(std::string_view text, long long max, long long* value);

}  // namespace jobbuf::redis

// Postgres regime: the length of a jsonb value's text (as jsonb_out / JsonbToCString write it)
// without writing it, so that the worker never renders a payload Redis could not accept.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/jsonb.h"
}

// The byte length of payload's canonical JSON text; once the count passes stop_after, the walk
// stops and returns a number above stop_after and at most the whole length. Memory: the iterator and
// one number's text at a time.
size_t jsonb_text_size(Jsonb* payload, size_t stop_after);

// At most this many bytes of text per byte of jsonb (a number such as 1e131071 is a few bytes
// in jsonb and 131072 digits as text): a jsonb smaller than limit / this cannot exceed limit.
constexpr size_t kMaxTextBytesPerJsonbByte = 20000;

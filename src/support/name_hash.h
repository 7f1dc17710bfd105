// Postgres regime: backend-local hash tables keyed by a queue name (NAMEDATALEN bytes, the first
// field of the entry), allocated in TopMemoryContext.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/hsearch.h"
}

HTAB* create_name_hash(const char* table_name, Size entry_size, long expected_entries);

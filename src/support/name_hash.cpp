// Postgres regime: create_name_hash (see name_hash.h).
#include "pg_includes.h"

#include "support/name_hash.h"

extern "C" {
#include "utils/memutils.h"
}

HTAB* create_name_hash(const char* table_name, Size entry_size, long expected_entries)
{
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = NAMEDATALEN;
    ctl.entrysize = entry_size;
    ctl.hcxt = TopMemoryContext;
    return hash_create(table_name, expected_entries, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

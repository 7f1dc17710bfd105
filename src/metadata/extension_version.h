// Postgres regime: which version of the extension's SQL a database has installed, compared with
// the version this library was built for. Between installing a new build (and restarting) and
// ALTER EXTENSION jobbuf UPDATE, the library runs against the old SQL: the worker then waits
// instead of guessing at objects that may not exist yet.
#pragma once
#include "pg_includes.h"

// The SQL version this library implements (the extension's default_version).
constexpr const char* kJobbufSqlVersion = "1.3";

enum class InstalledExtension {
    Missing,   // CREATE EXTENSION jobbuf has not run in this database
    Outdated,  // another version's SQL: ALTER EXTENSION jobbuf UPDATE is due
    Current,   // the SQL this library was built for
};

struct InstalledJobbuf {
    InstalledExtension state;
    Oid extension_oid;          // InvalidOid when missing
    char version[NAMEDATALEN];  // "" when missing
};

// Reads pg_extension (no SQL statement: nothing a role could shadow), with the active snapshot
// when one is set. Needs a transaction. When the row is found, returns only once the transaction
// that wrote it has published its catalog changes to this backend's caches (see
// extension_version.cpp): the extension's objects can then be named in SQL, and the rows its
// script inserted are visible to statements run with that snapshot.
InstalledJobbuf installed_jobbuf(void);

// Postgres regime: jobbuf.database, the databases the launcher gives a drain worker: '*' (every
// database that allows connections and has the extension) or a comma-separated list of names
// (each gets a worker that waits for CREATE EXTENSION jobbuf if need be).
#pragma once
#include "pg_includes.h"

extern char* jobbuf_database;  // jobbuf.database (postmaster; settings.cpp defines the GUC): '*' or a list

// Whether value is a valid jobbuf.database; otherwise false with the reason in detail.
bool database_list_valid(const char* value, char* detail, size_t detail_len);

// Whether jobbuf.database is '*'.
bool database_list_is_every(void);

// Whether jobbuf.database names datname (false for '*').
bool database_list_names(const char* datname);

// Calls fn with each name jobbuf.database lists (none for '*').
void database_list_each(void (*fn)(const char* datname));

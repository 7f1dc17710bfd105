// Postgres regime: this installation's identity (jobbuf.installation, made by CREATE EXTENSION,
// never dumped). Jobs record it when staged (jobbuf.jobs.origin and owner); the ids consumers see
// derive from a job's origin; a job whose owner is another identity is held (restored from a
// dump, copied with CREATE DATABASE ... TEMPLATE, applied by logical replication). The worker's
// delivery marker is named after it. See docs/copies.md.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/uuid.h"
}

// The identity of the installation in this database, cached per backend until jobbuf.installation
// changes. In a database copied by CREATE DATABASE ... TEMPLATE (the row names another database)
// an identity derived from the row's and this database's oid, the same in every backend.
// False when the installed SQL has no jobbuf.installation (1.1 and older). Needs a transaction.
bool own_installation_id(pg_uuid_t* id);

// The 32 bits of an identity that prefix the ids consumers see (Sidekiq jid, BullMQ and Celery
// ids, the stream field uid): its first four bytes, so that they read as the identity's first
// eight hex digits.
uint32 installation_id_salt(const pg_uuid_t& id);

// Registers (once per process) the cache's invalidation by changes of jobbuf.installation.
void register_installation_identity_invalidation(void);

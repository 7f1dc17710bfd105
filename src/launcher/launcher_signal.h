// Postgres regime: how a backend tells the launcher, through shared memory and its latch, that a
// database may need a drain worker now: CREATE EXTENSION jobbuf ran in it, or a database was
// created, altered (ALLOW_CONNECTIONS), renamed or dropped. Announced at commit; nothing on abort. This is
// what spares the launcher a connection per database per poll.
#pragma once
#include "pg_includes.h"

// Whether statement is CREATE EXTENSION jobbuf (asked before it runs: see note_database_statement).
bool creates_jobbuf(Node* statement);

// From the ProcessUtility hook, after a statement ran: remembers for the commit whether it was
// one the launcher must hear of. jobbuf_existed: the extension was installed before the statement
// ran (a CREATE EXTENSION then created nothing). (DROP EXTENSION jobbuf gives the database's own
// worker a commit wake-up instead.)
void note_database_statement(Node* statement, bool jobbuf_existed);

// Registers the transaction callback that announces them; once per process, from _PG_init.
void register_launcher_signal(void);

// The launcher's side: the databases CREATE EXTENSION named since the last call (up to max in
// out; the count is returned, or -1 when more came than were kept: look at all of them), and
// whether databases changed.
int take_created_extensions(Oid* out, int max);
bool take_databases_changed(uint32* seen);

// Postgres regime: jobbuf's one ProcessUtility hook. It dispatches to the files of each concern,
// in this order: before DROP DATABASE of a database with a drain worker, the DROP DATABASE guard
// (drop_database_guard.h); before DROP EXTENSION jobbuf, the count of what it will discard, said
// after the drop succeeded (drop_extension_report.h); after any statement, the notes for the
// launcher (CREATE EXTENSION jobbuf, CREATE / ALTER / RENAME / DROP DATABASE: launcher_signal.h).
#pragma once

// Installs the hook (chained to the one installed before); from _PG_init when preloaded.
void install_utility_hook(void);

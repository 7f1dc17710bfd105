// Postgres regime: statements prepared once per process and kept (SPI_prepare + SPI_keepplan),
// for the worker and the staging path alike.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "executor/spi.h"
}

// The plan in *kept, prepared from sql the first time (an ERROR names the statement's purpose if
// it cannot be). Must run inside SPI_connect.
SPIPlanPtr kept_plan(SPIPlanPtr* kept, const char* sql, int nargs, Oid* types);

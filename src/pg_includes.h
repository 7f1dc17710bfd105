// Postgres regime: the one place Postgres headers are included from C++. PG15 headers carry no
// extern "C" of their own, so they are wrapped here; every Postgres-side .cpp includes this first.
#pragma once
#ifdef JOBBUF_PURE_CPP_REGIME
#error "a pure C++ regime file (src/redis) must not include Postgres headers"
#endif

extern "C" {
#include "postgres.h"
#include "fmgr.h"
#include "miscadmin.h"
}

// PG_FUNCTION_INFO_V1 declares the function without C linkage in PG15: use this instead.
#define JOBBUF_SQL_FUNCTION(name)                                                                                      \
    extern "C" {                                                                                                       \
    PGDLLEXPORT Datum name(PG_FUNCTION_ARGS);                                                                          \
    PG_FUNCTION_INFO_V1(name);                                                                                         \
    }                                                                                                                  \
    Datum name(PG_FUNCTION_ARGS)

// Pure C++ regime marker: every .cpp under src/redis includes this first. Files of this regime
// never see a Postgres header (no ereport, no palloc, no longjmp); the build fails if they do.
#pragma once
#ifdef POSTGRES_H
#error "src/redis is the pure C++ regime: it must not include Postgres headers"
#endif
#define JOBBUF_PURE_CPP_REGIME 1

// Pure C++ regime marker for src/cron (periodic jobs: cron text, civil calendar, next tick): every
// .cpp under src/cron includes this first. Files of this regime never see a Postgres header (no
// ereport, no palloc, no longjmp); the build fails if they do. The headers of src/cron do not
// include it, so that the Postgres side can include them to call in (they hold nothing that
// needs a Postgres header, nor anything that clashes with one).
#pragma once
#ifdef POSTGRES_H
#error "src/cron is the pure C++ regime: it must not include Postgres headers"
#endif
#define JOBBUF_PURE_CPP_REGIME 1

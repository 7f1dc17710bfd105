// Postgres regime: reconciliation, the recovery half of the delivery marker protocol: delete the
// jobs that the marker names (Redis took them; Postgres did not record it) instead of pushing
// them again. Run after every (re)connect and after any failed batch.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"

// In its own transaction; returns the session's report. *done is false when the marker could
// not be acted on yet (Redis failed, or jobbuf's tables are locked): the caller retries before
// any batch. Postgres errors propagate.
jobbuf::redis::SessionReport reconcile_delivered(DrainContext* ctx, bool* done);

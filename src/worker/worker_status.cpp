// Postgres regime: jobbuf_worker_status(), the drain worker's state as published in shared memory.
#include "pg_includes.h"

#include "settings.h"
#include "shared_state.h"

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
}

JOBBUF_SQL_FUNCTION(jobbuf_worker_status)
{
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errmsg("jobbuf: jobbuf_worker_status must return a row")));
    desc = BlessTupleDesc(desc);

    Datum values[9];
    bool nulls[9] = {false};
    values[1] = CStringGetTextDatum(jobbuf_database ? jobbuf_database : "");

    if (jobbuf_shared == nullptr) {
        // Not preloaded: no worker can run. Say so rather than fail.
        nulls[0] = nulls[3] = nulls[5] = true;
        values[2] = BoolGetDatum(false);
        values[4] = CStringGetTextDatum("jobbuf is not in shared_preload_libraries: no worker runs");
        values[6] = values[7] = values[8] = Int64GetDatum(0);
    } else {
        JobbufSharedState* s = jobbuf_shared;
        SpinLockAcquire(&s->mutex);
        pid_t pid = s->worker_pid;
        bool connected = s->redis_connected;
        char last_error[kStatusErrorLen];
        memcpy(last_error, s->last_error, sizeof(last_error));
        TimestampTz last_error_at = s->last_error_at;
        SpinLockRelease(&s->mutex);
        last_error[kStatusErrorLen - 1] = '\0';

        values[0] = Int32GetDatum(pid);
        nulls[0] = pid == 0;
        values[2] = BoolGetDatum(pid != 0);
        values[3] = BoolGetDatum(connected);
        values[4] = CStringGetTextDatum(last_error);
        nulls[4] = last_error[0] == '\0';
        values[5] = TimestampTzGetDatum(last_error_at);
        nulls[5] = last_error_at == 0;
        values[6] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->wakeups)));
        values[7] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->batches)));
        values[8] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&s->delivered)));
    }
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}

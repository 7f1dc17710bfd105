// Postgres regime: storage rotation of jobbuf.jobs. Delivered jobs are deleted row by row; while
// an old snapshot holds the xmin horizon (a REPEATABLE READ transaction, pg_dump, a session idle
// in transaction) vacuum cannot remove them, and the table and its indexes grow with everything
// delivered meanwhile. Rotation reclaims them without vacuum: when the table's file has grown
// past a threshold and is mostly dead rows, the worker takes jobbuf.jobs' ACCESS EXCLUSIVE lock
// without waiting for it, copies the rows still alive (waiting, scheduled, claimed, held, in
// backoff: every column as it is), gives the table a new file (storage_truncation.h) and writes
// the live rows into it with their ids and tuple headers, as CLUSTER's rewrite does, in the same
// transaction: a snapshot never sees a job committed after it was taken, and logical decoding
// sees nothing. jobbuf.queue_stats, whose counters row the worker updates in every batch, is
// rotated the same way. See docs/storage.md.
#pragma once
#include "pg_includes.h"

// Rotates each of those tables that is due (see above), each in a transaction of its own. Never waits for a
// lock: when any session holds one on jobbuf.jobs, its TOAST table or an index of either (a
// producer's open transaction, pg_dump's ACCESS SHARE, autovacuum, a VACUUM of the TOAST table), it
// tries again later; a wait nothing foresaw ends at lock_timeout (100 ms) and counts the same. Cheap when not due: a size check at most every
// 200 ms.
void rotate_storage_if_due(void);

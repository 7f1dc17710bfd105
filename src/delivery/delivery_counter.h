// Postgres regime: the delivery counter, what tells a later start of this cluster from a copy
// (docs/copies.md, "Clones"). Every unit the worker pushes carries a delivery number in its marker
// (src/redis/delivery.h), and the batch's own transaction records it in jobbuf.delivery_counter,
// which is WAL-logged and so survives a crash, an immediate shutdown and a failover to a standby
// that replayed it. A copy of a running cluster keeps the number it was copied with and falls
// behind at the original's next batch.
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"

// The committed counter and whether jobbuf_take_over() asked this cluster to deliver (in this
// postmaster's start: a request a standby or base backup carried from its original is not
// honoured), read in the current transaction (0 and false when the table is missing: an older SQL version).
void read_delivery_counter(int64* committed, bool* take_over_requested);

// Records the number of the unit just pushed, in the batch's transaction (one UPDATE by address).
void record_delivery_number(int64 number);

// Raises the committed counter to at least number (and, with clear_take_over, forgets a
// jobbuf_take_over() request), in the current transaction.
void raise_delivery_counter(int64 number, bool clear_take_over);

// Advances the committed counter without a batch, in the current transaction, to at least
// at_least and at least one above its value (by address, as a batch records its number): the
// holder of the lease does this at least once per lease lifetime, and carries the value in the
// lease once committed, so that a copy of an idle cluster falls behind too. Returns the new value;
// 0 when the table is missing or locked (nothing written: tried again at the next refresh).
int64 advance_delivery_counter(int64 at_least);

// When this process last wrote the counter (a batch's number, an advance, a raise); 0: never.
TimestampTz delivery_counter_written_at(void);

// Whether every job the marker names is staged here as it was pushed (same ids, same staged_at,
// this installation's), in the current transaction: the marker names this cluster's own batch in
// flight, not jobs a copy staged under the same ids.
bool marker_names_staged_jobs(const jobbuf::redis::MarkerView& marker);

// Whether this start continues the holder of a lapsed lease (or the writer of the markers a free
// lease left), in its own transaction: this
// cluster's counter is at least the highest number in Redis (the markers' delivery numbers and the
// counter the lease carries), or is one behind it with the marker of that number naming jobs
// staged here as they were pushed (the batch whose commit a crash cut off); a 1.2 holder (no
// number) when the holder's name is this cluster's. Logs the reason either way.
bool continues_lease_holder(const jobbuf::redis::ContinuityEvidence& evidence);

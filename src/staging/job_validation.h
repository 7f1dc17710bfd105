// Postgres regime: the checks every staged job passes in the producer's transaction, whichever
// way it is staged (jobbuf_stage's direct insert, or an INSERT INTO jobbuf.jobs through the jobs
// trigger): bad input is an error there, with a hint, and never a problem for the worker.
#pragma once
#include "pg_includes.h"

#include "staging/queue_cache.h"

extern "C" {
#include "utils/jsonb.h"
}

// The traits of the queue a job names; ERROR when the name is NULL (nullptr) or unknown.
QueueTraits staged_job_queue(const char* queue);

// ERROR when a job's run_at or staged_at (column) is 'infinity' or '-infinity': no Redis format
// carries it (a Sidekiq score or a BullMQ delay would be garbage).
void check_staged_time(const char* queue, const char* column, Datum timestamp);

// ERROR when the payload is NULL (nullptr) or cannot be carried by the queue's target.
void check_staged_payload(const char* queue, const QueueTraits& traits, Jsonb* payload);

// ERROR when the payload cannot be carried by target one job at a time (delivery 'each').
void check_payload_for_target(const char* queue, const char* target, Jsonb* payload);

// Postgres regime: a target's own payload keys (TargetTraits::own_keys, defined once with the
// target in src/redis/targets/) as the text[] that jsonb's "-" and "?|" take, for both takes.
#pragma once
#include "pg_includes.h"

#include "redis/job_types.h"

// A text[] Datum of target.own_keys (empty when it has none), in the current memory context.
Datum own_keys_array(const jobbuf::redis::TargetTraits& target);

// Pure C++ regime: DeliveryPlan, one batch as the commands of one Redis unit, with which jobs
// each push carries and which jobs were left out for their size. Targets fill in the pushes
// (targets/queue_target.h); delivery.h adds MULTI, the marker and EXEC around them.
#pragma once
#include <cstddef>
#include <vector>

#include "redis/command_pipeline.h"

namespace jobbuf::redis {

struct DeliveryPlan {
    CommandPipeline unit;
    // For each command of the unit after MULTI and before the marker: the half-open range of
    // job indexes whose delivery that command carries.
    struct PushRange {
        std::size_t first, last;
    };
    std::vector<PushRange> pushes;
    // Jobs left out of the unit because Redis would refuse them (larger than max_bulk_bytes), with
    // the size of the bulk string they would have been.
    struct Oversized {
        std::size_t job;
        std::size_t bytes;
        bool at_least;
    };
    std::vector<Oversized> oversized;
    std::size_t max_bulk_bytes = 0;
};

// Which jobs of a batch are sent: empty (all of them), or 1 for each job left out.
using SkippedJobs = std::vector<char>;

inline bool is_sent(const SkippedJobs& skip, std::size_t i)
{
    return skip.empty() || !skip[i];
}

// How many jobs of [first, last) are sent.
inline std::size_t count_sent(const SkippedJobs& skip, std::size_t first, std::size_t last)
{
    std::size_t n = last - first;
    if (!skip.empty())
        for (std::size_t i = first; i < last; ++i)
            n -= skip[i] ? 1 : 0;
    return n;
}

}  // namespace jobbuf::redis

// Pure C++ regime: delivery markers as plain data for the Postgres side (drain_session.h), and the
// evidence a connection gathers when another start's lease has lapsed (session_lease.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace jobbuf::redis {

// One marker as read, plain data: the ids it names and, for a 1.3 marker (not legacy), its unit's
// delivery number, the digest of the named jobs (ids and staged_at, marker_digest in delivery.h)
// and whether this start (own) wrote it.
struct MarkerView {
    const std::int64_t* ids;
    std::size_t count;
    std::int64_t number;
    std::uint64_t digest;
    bool legacy;  // 1.2's marker: ids only
    bool own;     // written by this start (the same lease value)
};

// What a connection found when another start's lease had lapsed, or the lease was free with
// markers in Redis: the marker with the highest delivery number (found false: none), and whether
// the holder's name without its start is this cluster's (host, port, data directory, system
// identifier: 1.2's rule, for a 1.2 marker).
// lease_counter: the committed delivery counter the lapsed lease carried (0: none). lease_free: the
// lease was free (no key) and the markers alone are the evidence (then found, numbered).
struct ContinuityEvidence {
    bool found;
    MarkerView marker;
    bool same_cluster_name;
    std::int64_t lease_counter;
    bool lease_free;
};

}  // namespace jobbuf::redis

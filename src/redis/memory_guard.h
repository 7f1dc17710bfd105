// Pure C++ regime: the memory guard's decisions (SPEC 1.3, "Flow control at the drain": Redis
// memory and Eviction). From jobbuf.redis_memory_limit and one `INFO memory` reply, what the drain
// may send to that Redis. Decisions only: no I/O, no clock, no state but the caller's held_before;
// the worker reads INFO, keeps the hold per node, logs and reports.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace jobbuf::redis {

// The parsed form of jobbuf.redis_memory_limit.
struct MemoryLimit {
    enum class Kind { Off, Fraction, Size };
    Kind kind = Kind::Off;
    double fraction = 0;      // Fraction: of maxmemory, 0 < fraction <= 1
    std::uint64_t bytes = 0;  // Size: 1 .. INT64_MAX bytes (fits a bigint in jobbuf_flow_status)
};

// Parses the setting's text (the caller passes it; no default is invented here):
//   "off" (any case): no guard;
//   a bare number 0 < f <= 1 ("0.8", ".5", "1", "1.0"): a fraction of maxmemory;
//   a size: a number, optional blanks, a unit as PostgreSQL writes memory units, case-sensitive:
//   B, kB, MB, GB, TB (1kB = 1024 B): "512MB", "100 MB", "1.5GB" (rounded to the byte, as
//   PostgreSQL rounds a fractional size).
// Blanks around the text are ignored. No sign, exponent, "%" or other unit.
// On failure returns false, leaves *out alone and sets *error to one line that names the
// refused text and shows the valid forms; never throws.
bool parse_memory_limit(std::string_view text, MemoryLimit* out, std::string* error) noexcept;

// The same check for the setting's check hook (Postgres regime): no object crosses; on failure
// the reason is copied into reason (truncated to reason_len - 1 bytes).
bool check_memory_limit(const char* text, char* reason, std::size_t reason_len) noexcept;

// What one `INFO memory` reply says (the fields the guard reads).
struct RedisMemory {
    std::uint64_t used_memory = 0;            // used_memory: bytes Redis's allocator holds
    std::uint64_t not_counted_for_evict = 0;  // mem_not_counted_for_evict (0 when not reported)
    bool not_counted_reported = false;        // false: the reply has no mem_not_counted_for_evict
    std::uint64_t maxmemory = 0;              // maxmemory: 0 means none
    char maxmemory_policy[32] = {};           // maxmemory_policy, NUL-terminated; empty: not reported

    std::string_view policy() const noexcept { return maxmemory_policy; }
};

// Parses the bulk text of `INFO memory`: "key:value" lines ending in CRLF (a bare LF is taken
// too), "# Section" headers and blank lines skipped, other sections' lines ignored. Requires
// used_memory and maxmemory (unsigned decimal); mem_not_counted_for_evict is optional (older
// servers) and maxmemory_policy too (then empty, which evaluate() treats as "not noeviction").
// A field that is present but malformed refuses the reply. On failure returns false, leaves
// *out alone and sets *error to one line; never throws.
bool parse_info_memory(std::string_view reply, RedisMemory* out, std::string* error) noexcept;

// room_bytes when no limit applies.
constexpr std::uint64_t kUnlimitedRoom = std::numeric_limits<std::uint64_t>::max();

// Why a limit applies, or why none does.
enum class LimitBasis {
    Off,                 // jobbuf.redis_memory_limit = off
    Size,                // a size: applies whatever maxmemory and the policy
    Fraction,            // a fraction of maxmemory, under noeviction
    NoMaxmemory,         // a fraction, but maxmemory is 0: no limit (only a size works then)
    PolicyNotNoeviction  // a fraction, but the policy is not noeviction (or not reported): no limit
};

// A default MemoryVerdict is the verdict of "off": nothing limited, unlimited room.
struct MemoryVerdict {
    LimitBasis basis = LimitBasis::Off;
    bool limited = false;                       // a limit applies (basis Size or Fraction)
    std::uint64_t limit_bytes = 0;              // the limit that applies; 0 when !limited
    std::uint64_t resume_below = 0;             // once held, delivery resumes when counted < this (90 % of the
                                                // limit, rounded up); 0 when !limited
    std::uint64_t counted_bytes = 0;            // used_memory - mem_not_counted_for_evict, never below 0
    bool held = false;                          // nothing may be sent to this Redis
    std::uint64_t room_bytes = kUnlimitedRoom;  // limit - counted; 0 when held; kUnlimitedRoom when !limited
    double ratio = std::numeric_limits<double>::quiet_NaN();  // counted / limit; NaN when !limited
    bool evicts_jobs = false;  // maxmemory > 0 and an allkeys-* policy: delivered jobs can be lost
};

// The verdict for one reading. held_before: the last verdict the caller kept for this node said
// held (false at a node's first reading, a new master's after a failover included). At or above
// the limit holds; once held, delivery resumes only below 90 % of the limit. A fraction's limit
// is floor(fraction * maxmemory), at least 1 byte. Never throws.
MemoryVerdict evaluate(const MemoryLimit& limit, const RedisMemory& memory, bool held_before) noexcept;

// A single job larger than the limit itself: it can never be delivered under this limit and is
// dead-lettered with that reason by the caller. False when no limit applies; a job of exactly
// the limit does not exceed it.
bool job_exceeds_limit(std::size_t job_bytes, const MemoryVerdict& verdict) noexcept;

// How many of batch_bytes may be sent now: all when no limit applies, else never more than the
// room (0 while held). The caller splits the batch at job boundaries to fit.
std::size_t bytes_to_send(std::size_t batch_bytes, const MemoryVerdict& verdict) noexcept;

}  // namespace jobbuf::redis

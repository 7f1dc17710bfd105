// Pure C++ regime: Redis Cluster's key-to-slot mapping (CRC16/XMODEM of the key, or of its
// {hash tag} when the key has a non-empty one, modulo 16384), and the reverse: a short tag that
// lands in a given slot, which gives each slot its own delivery marker key.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace jobbuf::redis {

constexpr int kClusterSlots = 16384;

// CRC16 as Redis Cluster computes it (XMODEM: polynomial 0x1021, initial value 0).
std::uint16_t crc16_xmodem(std::string_view bytes) noexcept;

// The part of key that is hashed: the text between the first '{' and the first '}' after it
// when that text is not empty; otherwise the whole key.
std::string_view hash_tag_of(std::string_view key) noexcept;

// The slot of key, as CLUSTER KEYSLOT answers.
int key_slot(std::string_view key) noexcept;

// The shortest tag of [0-9a-z] (the first in length-then-lexicographic order) whose CRC16 lands
// in slot: "<anything>{<tag>}" is then a key of that slot. Deterministic, so a restarted worker
// finds the same marker keys.
std::string slot_tag(int slot);

}  // namespace jobbuf::redis

// Pure C++ regime: Redis Cluster's key-to-slot mapping (see slot_hash.h).
#include "redis/regime.h"

#include "redis/cluster/slot_hash.h"

namespace jobbuf::redis {

std::uint16_t crc16_xmodem(std::string_view bytes) noexcept
{
    std::uint16_t crc = 0;
    for (unsigned char c : bytes) {
        crc ^= static_cast<std::uint16_t>(c) << 8;
        for (int bit = 0; bit < 8; ++bit)
            crc =
                (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
    }
    return crc;
}

std::string_view hash_tag_of(std::string_view key) noexcept
{
    std::size_t open = key.find('{');
    if (open == std::string_view::npos)
        return key;
    std::size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1)
        return key;
    return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) noexcept
{
    return crc16_xmodem(hash_tag_of(key)) & (kClusterSlots - 1);
}

std::string slot_tag(int slot)
{
    static const char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    constexpr int kLetters = sizeof(kAlphabet) - 1;
    // Up to three letters cover most slots; four cover every one.
    for (int length = 1; length <= 4; ++length) {
        long combinations = 1;
        for (int i = 0; i < length; ++i)
            combinations *= kLetters;
        std::string tag(static_cast<std::size_t>(length), '0');
        for (long n = 0; n < combinations; ++n) {
            long rest = n;
            for (int i = length - 1; i >= 0; --i) {
                tag[static_cast<std::size_t>(i)] = kAlphabet[rest % kLetters];
                rest /= kLetters;
            }
            if ((crc16_xmodem(tag) & (kClusterSlots - 1)) == slot)
                return tag;
        }
    }
    return std::string();  // unreachable for 0 <= slot < kClusterSlots
}

}  // namespace jobbuf::redis

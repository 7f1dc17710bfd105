// Test helper: an independent, obviously-correct RESP encoder to compare wire bytes against.
#pragma once
#include <string>
#include <vector>

namespace jobbuf::test {

inline std::string resp(const std::vector<std::vector<std::string>>& commands)
{
    std::string out;
    for (const auto& cmd : commands) {
        out += "*" + std::to_string(cmd.size()) + "\r\n";
        for (const auto& a : cmd)
            out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
    return out;
}

}  // namespace jobbuf::test

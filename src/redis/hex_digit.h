// C++ regime: the value of one hexadecimal digit (URL escapes, JSON \u escapes).
#pragma once
#include "redis/regime.h"

namespace jobbuf::redis {

// 0-15, or -1 when c is not a hexadecimal digit.
inline int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

}  // namespace jobbuf::redis

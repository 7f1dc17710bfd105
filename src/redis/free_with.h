// Pure C++ regime: FreeWith<free_fn>, the std::unique_ptr deleter that hands an object back to
// the C library that made it: std::unique_ptr<SSL, FreeWith<SSL_free>>.
#pragma once

namespace jobbuf::redis {

template <auto free_fn>
struct FreeWith {
    template <typename T>
    void operator()(T* object) const
    {
        free_fn(object);
    }
};

}  // namespace jobbuf::redis

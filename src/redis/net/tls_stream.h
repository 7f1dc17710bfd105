// Pure C++ regime: the TLS byte stream (rediss://), OpenSSL 3 in non-blocking mode over the socket
// that connect_socket opens. The handshake waits through the IoWaiter under the connect's
// deadline; the server certificate is checked as endpoint.tls_options says (chain against the CA
// file or the system trust store, and the host name or IP address), with SNI sent for host names;
// a client certificate and key are presented when configured (mutual TLS).
#pragma once
#include <memory>

#include "redis/net/byte_stream.h"

namespace jobbuf::redis {

// Connects and completes the TLS handshake within the deadline. On failure *stream is empty and
// the status (ConnectFailed, Timeout or Interrupted) says why in one line: for a certificate
// that was not accepted, the verification's reason; never a key or a password.
RedisStatus open_tls_stream(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                            std::unique_ptr<ByteStream>* stream) noexcept;

}  // namespace jobbuf::redis

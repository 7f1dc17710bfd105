// Pure C++ regime: the TLS byte stream over OpenSSL 3 (see tls_stream.h).
//
// OpenSSL's non-blocking rules, kept here:
// - a call that returns SSL_ERROR_WANT_READ / WANT_WRITE is repeated once the socket is ready,
//   and SSL_write with the same buffer and length: send() copies a bounded chunk of the caller's
//   pieces into a buffer the stream owns and retries from it until OpenSSL took all of it (the
//   caller only advances past bytes reported Moved, so the chunk always holds its next bytes);
// - the thread's error queue is cleared before each call so that SSL_get_error tells the truth.
// Socket writes go through send(MSG_NOSIGNAL) (a BIO of our own) so that a peer that closed the
// connection gives an error, never SIGPIPE.
#include "redis/regime.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "redis/free_with.h"
#include "redis/net/socket_stream.h"
#include "redis/net/tls_stream.h"

namespace jobbuf::redis {
namespace {

using Code = RedisStatus::Code;

// One SSL_write: a few TLS records (16 KB each), so that a pipeline of small commands is not sent
// as one record per command.
constexpr std::size_t kWriteChunk = 64 * 1024;

using SslCtxPtr = std::unique_ptr<SSL_CTX, FreeWith<SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, FreeWith<SSL_free>>;

// The reason of the thread's last OpenSSL error, and the queue cleared.
std::string openssl_reason()
{
    unsigned long code = ERR_peek_last_error();
    std::string reason = "unknown TLS error";
    if (code != 0) {
        const char* text = ERR_reason_error_string(code);
        if (text != nullptr) {
            reason = text;
        } else {
            char buf[256];
            ERR_error_string_n(code, buf, sizeof buf);
            reason = buf;
        }
    }
    ERR_clear_error();
    return reason;
}

// --- a socket BIO whose writes never raise SIGPIPE ---------------------------------------------

int bio_write(BIO* bio, const char* data, int len)
{
    BIO_clear_retry_flags(bio);
    int fd = static_cast<int>(BIO_get_fd(bio, nullptr));
    for (;;) {
        ssize_t n = ::send(fd, data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
        if (n >= 0)
            return static_cast<int>(n);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_write(bio);
        return -1;
    }
}

int bio_read(BIO* bio, char* data, int len)
{
    BIO_clear_retry_flags(bio);
    int fd = static_cast<int>(BIO_get_fd(bio, nullptr));
    for (;;) {
        ssize_t n = ::recv(fd, data, static_cast<std::size_t>(len), 0);
        if (n == 0)
            BIO_set_flags(bio, BIO_FLAGS_IN_EOF);  // what BIO_eof() tells OpenSSL
        if (n >= 0)
            return static_cast<int>(n);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_read(bio);
        return -1;
    }
}

// The controls OpenSSL asks of a socket BIO (OpenSSL 3.5 deprecates borrowing the plain socket
// BIO's own with BIO_meth_get_*): the descriptor kept as the BIO's data, whether freeing the BIO
// closes it, and end of file.
int bio_create(BIO* bio)
{
    BIO_set_data(bio, nullptr);
    BIO_set_init(bio, 0);
    return 1;
}

int bio_fd(BIO* bio)
{
    return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
}

int bio_destroy(BIO* bio)
{
    if (bio == nullptr)
        return 0;
    if (BIO_get_init(bio) && BIO_get_shutdown(bio))
        ::close(bio_fd(bio));
    BIO_set_init(bio, 0);
    return 1;
}

long bio_ctrl(BIO* bio, int cmd, long num, void* ptr)
{
    switch (cmd) {
        case BIO_C_SET_FD:
            BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(*static_cast<int*>(ptr))));
            BIO_set_shutdown(bio, static_cast<int>(num));
            BIO_set_init(bio, 1);
            return 1;
        case BIO_C_GET_FD:
            if (!BIO_get_init(bio))
                return -1;
            if (ptr != nullptr)
                *static_cast<int*>(ptr) = bio_fd(bio);
            return bio_fd(bio);
        case BIO_CTRL_GET_CLOSE:
            return BIO_get_shutdown(bio);
        case BIO_CTRL_SET_CLOSE:
            BIO_set_shutdown(bio, static_cast<int>(num));
            return 1;
        case BIO_CTRL_EOF:
            return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0;
        case BIO_CTRL_DUP:
        case BIO_CTRL_FLUSH:
            return 1;
        default:
            return 0;
    }
}

// Made once per process and kept (a plain pointer: no static object with a destructor).
BIO_METHOD* nosignal_socket_method()
{
    static BIO_METHOD* method = nullptr;
    if (method != nullptr)
        return method;
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "jobbuf socket");
    if (m == nullptr)
        return nullptr;
    if (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) || !BIO_meth_set_ctrl(m, bio_ctrl) ||
        !BIO_meth_set_create(m, bio_create) || !BIO_meth_set_destroy(m, bio_destroy)) {
        BIO_meth_free(m);
        return nullptr;
    }
    method = m;
    return method;
}

// --- the stream ---------------------------------------------------------------------------------

StreamIo stream_failure(std::string text)
{
    StreamIo io;
    io.state = StreamIo::State::Failed;
    io.error = std::move(text);
    return io;
}

// Marks an SSL whose server asked for a client certificate when none is configured (its app
// data points here): a server that requires one then drops the connection (TLS 1.3: after the
// handshake, at the first read or write), and the failure says why.
char asked_for_client_certificate;

int note_certificate_request(SSL* ssl, X509**, EVP_PKEY**)
{
    SSL_set_app_data(ssl, &asked_for_client_certificate);
    return 0;  // none to send
}

constexpr const char* kClientCertificateHint =
    " (the server asked for a client certificate: set jobbuf.redis_tls_cert_file and jobbuf.redis_tls_key_file)";

class TlsStream final : public ByteStream {
public:
    TlsStream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
    ~TlsStream() override
    {
        SSL_free(ssl_);
        ::close(fd_);
    }

    int fd() const noexcept override { return fd_; }

    StreamIo send(const std::string_view* pieces, std::size_t count, std::size_t offset) noexcept override
    {
        if (chunk_start_ == chunk_end_ && !fill_chunk(pieces, count, offset))
            return stream_failure("out of memory writing to Redis");
        ERR_clear_error();
        int n = SSL_write(ssl_, chunk_.get() + chunk_start_, static_cast<int>(chunk_end_ - chunk_start_));
        if (n > 0) {
            chunk_start_ += static_cast<std::size_t>(n);
            if (chunk_start_ == chunk_end_)
                chunk_start_ = chunk_end_ = 0;
            return StreamIo::moved(static_cast<std::size_t>(n));
        }
        return blocked_or_failed(n, "error writing to Redis over TLS");
    }

    StreamIo receive(char* buf, std::size_t len) noexcept override
    {
        ERR_clear_error();
        int n = SSL_read(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
        if (n > 0)
            return StreamIo::moved(static_cast<std::size_t>(n));
        return blocked_or_failed(n, "error reading from Redis over TLS");
    }

    long queued_for_peer() const noexcept override { return socket_bytes_queued(fd_); }

private:
    // Copies the caller's next bytes (up to kWriteChunk) into the chunk that SSL_write is given.
    bool fill_chunk(const std::string_view* pieces, std::size_t count, std::size_t offset)
    {
        if (!chunk_)
            chunk_.reset(new (std::nothrow) char[kWriteChunk]);
        if (!chunk_)
            return false;
        std::size_t filled = 0;
        for (std::size_t p = 0; p < count && filled < kWriteChunk; ++p) {
            std::size_t skip = p == 0 ? offset : 0;
            std::size_t n = std::min(pieces[p].size() - skip, kWriteChunk - filled);
            std::memcpy(chunk_.get() + filled, pieces[p].data() + skip, n);
            filled += n;
        }
        chunk_start_ = 0;
        chunk_end_ = filled;
        return true;
    }

    StreamIo blocked_or_failed(int rc, const char* doing)
    {
        StreamIo io = classify(rc, doing);
        if (io.state != StreamIo::State::Blocked && SSL_get_app_data(ssl_) != nullptr) {
            try {
                if (io.state == StreamIo::State::Closed)
                    io = stream_failure("Redis closed the connection");
                io.error += kClientCertificateHint;
            } catch (...) {
            }
        }
        return io;
    }

    StreamIo classify(int rc, const char* doing)
    {
        int err = SSL_get_error(ssl_, rc);
        switch (err) {
            case SSL_ERROR_WANT_READ:
                return StreamIo::blocked(true, false);
            case SSL_ERROR_WANT_WRITE:
                return StreamIo::blocked(false, true);
            case SSL_ERROR_ZERO_RETURN:
                return StreamIo{StreamIo::State::Closed, 0, false, false, {}};
            case SSL_ERROR_SYSCALL:
                if (errno == 0)
                    return StreamIo{StreamIo::State::Closed, 0, false, false, {}};
                try {
                    return stream_failure(std::string(doing) + ": " + errno_text(errno));
                } catch (...) {
                    return stream_failure({});
                }
            default:
                try {
                    return stream_failure(std::string(doing) + ": " + openssl_reason());
                } catch (...) {
                    return stream_failure({});
                }
        }
    }

    int fd_;
    SSL* ssl_;
    std::unique_ptr<char[]> chunk_;
    std::size_t chunk_start_ = 0, chunk_end_ = 0;  // chunk_[start, end): handed to SSL_write, not yet taken
};

// --- the handshake ------------------------------------------------------------------------------

// OpenSSL must never ask a terminal for a key's passphrase: an encrypted key fails to load.
int no_passphrase(char*, int, int, void*)
{
    return 0;
}

RedisStatus file_failure(const char* setting, const std::string& path)
{
    std::string what = "cannot use " + std::string(setting) + " \"" + path + "\"";
    return io_failure(Code::ConnectFailed, what.c_str(), openssl_reason());
}

// The context for one connection: trust, verification and client certificate as configured.
RedisStatus make_context(const TlsOptions& opts, SslCtxPtr* out)
{
    SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
    if (!ctx)
        return io_failure(Code::ConnectFailed, "cannot create a TLS context", openssl_reason());
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_default_passwd_cb(ctx.get(), no_passphrase);
    // RESP replies carry their own lengths: a connection closed without close_notify is just closed.
    SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (opts.verify != TlsOptions::Verify::None) {
        bool loaded = opts.ca_file.empty()
                          ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                          : SSL_CTX_load_verify_locations(ctx.get(), opts.ca_file.c_str(), nullptr) == 1;
        if (!loaded)
            return file_failure("jobbuf.redis_tls_ca_file",
                                opts.ca_file.empty() ? "(system trust store)" : opts.ca_file);
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    } else {
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
    }
    if (opts.cert_file.empty())
        SSL_CTX_set_client_cert_cb(ctx.get(), note_certificate_request);
    if (!opts.key_file.empty() && opts.cert_file.empty())
        return io_failure(Code::ConnectFailed, "jobbuf.redis_tls_key_file is set without jobbuf.redis_tls_cert_file");
    if (!opts.cert_file.empty()) {
        const std::string& key = opts.key_file.empty() ? opts.cert_file : opts.key_file;
        if (SSL_CTX_use_certificate_chain_file(ctx.get(), opts.cert_file.c_str()) != 1)
            return file_failure("jobbuf.redis_tls_cert_file", opts.cert_file);
        // Also refuses a key that is not the certificate's ("key values mismatch").
        if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1)
            return file_failure("jobbuf.redis_tls_key_file", key);
    }
    *out = std::move(ctx);
    return RedisStatus::success();
}

bool is_ip_address(const std::string& host)
{
    unsigned char addr[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

// SNI for a host name, and what the certificate must name when verification is full.
RedisStatus name_the_server(SSL* ssl, const RedisEndpoint& ep)
{
    std::string host = ep.host.substr(0, ep.host.find('%'));  // an IPv6 zone is not part of the name
    bool ip = is_ip_address(host);
    if (!ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1)
        return io_failure(Code::ConnectFailed, "cannot set the TLS server name", openssl_reason());
    if (ep.tls_options.verify != TlsOptions::Verify::Full)
        return RedisStatus::success();
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    bool set = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1
                  : SSL_set1_host(ssl, host.c_str()) == 1;
    if (!set)
        return io_failure(Code::ConnectFailed, "cannot set the TLS host name to verify", openssl_reason());
    return RedisStatus::success();
}

std::string server_text(const RedisEndpoint& ep)
{
    bool v6 = ep.host.find(':') != std::string::npos;
    return "Redis at " + (v6 ? "[" + ep.host + "]" : ep.host) + ":" + std::to_string(ep.port);
}

RedisStatus handshake_failure(SSL* ssl, int rc, const RedisEndpoint& ep)
{
    std::string where = server_text(ep);
    long verified = SSL_get_verify_result(ssl);
    if (ep.tls_options.verify != TlsOptions::Verify::None && verified != X509_V_OK) {
        ERR_clear_error();
        return io_failure(Code::ConnectFailed, ("TLS: the certificate of " + where + " was not accepted").c_str(),
                          X509_verify_cert_error_string(verified));
    }
    int err = SSL_get_error(ssl, rc);
    std::string reason = err == SSL_ERROR_SYSCALL
                             ? (errno != 0 ? errno_text(errno) : std::string("the server closed the connection"))
                             : openssl_reason();
    ERR_clear_error();
    return io_failure(Code::ConnectFailed, ("TLS handshake with " + where + " failed").c_str(), reason);
}

RedisStatus handshake(SSL* ssl, int fd, const RedisEndpoint& ep, const IoDeadline& dl, IoWaiter& waiter)
{
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int rc = SSL_connect(ssl);
        if (rc == 1)
            return RedisStatus::success();
        int err = SSL_get_error(ssl, rc);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            return handshake_failure(ssl, rc, ep);
        RedisStatus st = wait_for_socket(waiter, fd, err == SSL_ERROR_WANT_READ, err == SSL_ERROR_WANT_WRITE, dl,
                                         "in the TLS handshake with Redis");
        if (!st.ok())
            return st;
    }
}

RedisStatus open_over_socket(const RedisEndpoint& ep, int fd, const IoDeadline& dl, IoWaiter& waiter,
                             std::unique_ptr<ByteStream>* stream)
{
    SslCtxPtr ctx;
    RedisStatus st = make_context(ep.tls_options, &ctx);
    if (!st.ok())
        return st;
    SslPtr ssl(SSL_new(ctx.get()));
    BIO_METHOD* method = nosignal_socket_method();
    BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
    if (!ssl || bio == nullptr) {
        BIO_free(bio);
        return io_failure(Code::ConnectFailed, "cannot create a TLS connection", openssl_reason());
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl.get(), bio, bio);  // the SSL owns the BIO now
    st = name_the_server(ssl.get(), ep);
    if (st.ok())
        st = handshake(ssl.get(), fd, ep, dl, waiter);
    if (!st.ok())
        return st;
    stream->reset(new TlsStream(fd, ssl.get()));
    ssl.release();
    return st;
}

}  // namespace

RedisStatus open_tls_stream(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                            std::unique_ptr<ByteStream>* stream) noexcept
{
    stream->reset();
    int fd = -1;
    RedisStatus st = connect_socket(endpoint, deadline, waiter, &fd);
    if (!st.ok())
        return st;
    try {
        st = open_over_socket(endpoint, fd, deadline, waiter, stream);
    } catch (...) {
        st = io_failure(Code::ConnectFailed, "out of memory while connecting to Redis over TLS");
    }
    if (!*stream)
        ::close(fd);
    ERR_clear_error();
    return st;
}

}  // namespace jobbuf::redis

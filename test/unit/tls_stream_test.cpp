// Tests of the TLS byte stream (net/tls_stream.h) through RedisConnection against a real
// TLS-only redis-server (--port 0 --tls-port N), with certificates made by
// test/harness/tls_certs.sh (a CA, a server certificate for localhost and 127.0.0.1, an expired
// one, one for another name, a client certificate, and a CA that signed none of them).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;
using Code = RedisStatus::Code;

namespace {

std::string certs_dir;

class TlsStreamTest : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        char tmpl[] = "/tmp/jobbuf-unit-tls-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        certs_dir = tmpl;
        const char* root = std::getenv("JOBBUF_ROOT");
        std::string script = std::string(root != nullptr ? root : "../..") + "/test/harness/tls_certs.sh";
        ASSERT_EQ(std::system(("bash " + script + " " + certs_dir).c_str()), 0) << "making certificates failed";
    }
    static void TearDownTestSuite()
    {
        std::error_code ec;
        std::filesystem::remove_all(certs_dir, ec);
    }

    std::string cert(const std::string& name) const { return certs_dir + "/" + name; }

    // Starts a TLS-only server presenting `server_cert`; clients must present a certificate when
    // auth_clients.
    void start(const std::string& server_cert = "server", bool auth_clients = false)
    {
        tls_port_ = free_port();
        ASSERT_TRUE(
            server_.start({"--port", "0", "--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                           cert(server_cert + ".crt"), "--tls-key-file", cert(server_cert + ".key"),
                           "--tls-ca-cert-file", cert("ca.crt"), "--tls-auth-clients", auth_clients ? "yes" : "no"}));
    }

    RedisEndpoint endpoint(const std::string& host = "localhost") const
    {
        RedisEndpoint ep;
        ep.host = host;
        ep.port = tls_port_;
        ep.tls = true;
        ep.tls_options.ca_file = cert("ca.crt");
        return ep;
    }

    RedisStatus connect(RedisConnection& conn, const RedisEndpoint& ep, long timeout_ms = 5000)
    {
        return conn.connect(ep, timeout_ms, waiter_);
    }

    // Connects and runs one PING: a refused client certificate shows only once the server reads
    // (TLS 1.3 ends the client's handshake before the server checked its certificate).
    RedisStatus connect_and_ping(const RedisEndpoint& ep)
    {
        RedisConnection conn;
        RedisStatus st = connect(conn, ep);
        if (!st.ok())
            return st;
        CommandPipeline ping;
        ping.add({"PING"});
        std::vector<RedisReply> replies;
        return conn.execute(ping, &replies, 5000, waiter_);
    }

    RedisServer server_;
    PollWaiter waiter_;
    int tls_port_ = 0;
};

TEST_F(TlsStreamTest, FullVerificationByHostNameAndByAddress)
{
    start();
    for (const char* host : {"localhost", "127.0.0.1"}) {
        RedisConnection conn;
        RedisStatus st = connect(conn, endpoint(host));
        ASSERT_TRUE(st.ok()) << host << ": " << st.message;
        RedisReply pong = command(conn, {"PING"});
        EXPECT_EQ(pong.str, "PONG") << host;
    }
}

TEST_F(TlsStreamTest, LargePipelinesAndValuesCrossIntact)
{
    start();
    RedisConnection conn;
    RedisEndpoint ep = endpoint();
    ep.db = 3;
    ASSERT_TRUE(connect(conn, ep).ok());
    // Values larger than one write chunk and one TLS record, and many small commands in one
    // pipeline.
    std::string big(5 * 1024 * 1024 + 17, 'x');
    for (std::size_t i = 0; i < big.size(); i += 4099)
        big[i] = static_cast<char>('a' + i % 26);
    CommandPipeline pipeline;
    pipeline.add({"SET", "big", big});
    for (int i = 0; i < 20000; ++i)
        pipeline.add({"RPUSH", "list", std::to_string(i)});
    pipeline.add({"GET", "big"});
    pipeline.add({"LLEN", "list"});
    std::vector<RedisReply> replies;
    RedisStatus st = conn.execute(pipeline, &replies, 5000, waiter_);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(replies.size(), 20003u);
    EXPECT_EQ(replies[20001].str, big);
    EXPECT_EQ(replies[20002].integer, 20000);
    EXPECT_EQ(command(conn, {"CLIENT", "INFO"}).str.find("db=3") != std::string::npos, true);
}

TEST_F(TlsStreamTest, UnknownCaIsRefusedWithTheReason)
{
    start();
    RedisEndpoint ep = endpoint();
    ep.tls_options.ca_file = cert("other-ca.crt");
    RedisConnection conn;
    RedisStatus st = connect(conn, ep);
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("was not accepted"), std::string::npos) << st.message;
    // OpenSSL's reason: the chain ends at a CA we do not trust.
    EXPECT_TRUE(st.message.find("self-signed certificate in certificate chain") != std::string::npos ||
                st.message.find("unable to get local issuer certificate") != std::string::npos)
        << st.message;
    EXPECT_FALSE(conn.connected());
    // verify = none accepts it.
    ep.tls_options.verify = TlsOptions::Verify::None;
    EXPECT_TRUE(connect_and_ping(ep).ok());
}

TEST_F(TlsStreamTest, ExpiredCertificateIsRefused)
{
    start("expired");
    RedisConnection conn;
    RedisStatus st = connect(conn, endpoint());
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("certificate has expired"), std::string::npos) << st.message;
    EXPECT_EQ(st.message.find('\n'), std::string::npos);
}

TEST_F(TlsStreamTest, WrongNameIsRefusedUnlessVerifyIsCa)
{
    start("wrongname");
    RedisConnection conn;
    RedisStatus st = connect(conn, endpoint("localhost"));
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("hostname mismatch"), std::string::npos) << st.message;
    st = connect(conn, endpoint("127.0.0.1"));
    EXPECT_NE(st.message.find("IP address mismatch"), std::string::npos) << st.message;
    RedisEndpoint ep = endpoint();
    ep.tls_options.verify = TlsOptions::Verify::Ca;
    st = connect_and_ping(ep);
    EXPECT_TRUE(st.ok()) << st.message;
    // ca still checks the chain.
    ep.tls_options.ca_file = cert("other-ca.crt");
    EXPECT_NE(connect(conn, ep).message.find("was not accepted"), std::string::npos);
}

TEST_F(TlsStreamTest, MutualTls)
{
    start("server", true);
    RedisEndpoint ep = endpoint();
    RedisStatus st = connect_and_ping(ep);
    EXPECT_FALSE(st.ok()) << "a server that requires a client certificate accepted none";
    EXPECT_NE(st.message.find("asked for a client certificate"), std::string::npos) << st.message;
    ep.tls_options.cert_file = cert("client.crt");
    ep.tls_options.key_file = cert("client.key");
    st = connect_and_ping(ep);
    EXPECT_TRUE(st.ok()) << st.message;
    // A key that is not the certificate's, or a missing file: a clear refusal before connecting.
    ep.tls_options.key_file = cert("server.key");
    st = connect_and_ping(ep);
    EXPECT_NE(st.message.find("jobbuf.redis_tls_key_file"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("mismatch"), std::string::npos) << st.message;
    ep.tls_options.key_file = cert("missing.key");
    st = connect_and_ping(ep);
    EXPECT_NE(st.message.find("jobbuf.redis_tls_key_file"), std::string::npos) << st.message;
    EXPECT_EQ(st.message.find("BEGIN"), std::string::npos);
}

// A plain port takes the ClientHello for the start of an inline command and waits for its end.
TEST_F(TlsStreamTest, PlainServerFailsTheHandshake)
{
    ASSERT_TRUE(server_.start());
    tls_port_ = server_.port();
    RedisConnection conn;
    RedisStatus st = connect(conn, endpoint(), 300);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message.find("TLS handshake"), std::string::npos) << st.message;
}

// A listener that never answers: the handshake waits through the IoWaiter and gives up at the
// connect's deadline, or at once when the waiter is interrupted.
TEST_F(TlsStreamTest, SilentServerTimesOutOrIsInterrupted)
{
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(fd, 4), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    tls_port_ = ntohs(addr.sin_port);

    RedisConnection conn;
    RedisStatus st = connect(conn, endpoint(), 300);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_NE(st.message.find("TLS handshake"), std::string::npos) << st.message;
    EXPECT_GT(waiter_.calls, 0);

    InterruptingWaiter interrupting(1);  // the connect's wait, then the handshake's
    st = conn.connect(endpoint(), 5000, interrupting);
    EXPECT_EQ(st.code, Code::Interrupted) << st.message;
    EXPECT_EQ(interrupting.interrupts, 1);
    ::close(fd);
}

}  // namespace

// Tests of RedisConnection against a private redis-server started per test.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>

#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;
using Code = RedisStatus::Code;

namespace {

class ConnectionTest : public ::testing::Test {
protected:
    RedisServer server_;
    PollWaiter waiter_;
};

std::string client_info_field(RedisConnection& conn, const std::string& field)
{
    RedisReply info = command(conn, {"CLIENT", "INFO"});
    std::string text = " " + info.str;
    std::size_t pos = text.find(" " + field + "=");
    if (pos == std::string::npos)
        return "";
    pos += field.size() + 2;
    return text.substr(pos, text.find(' ', pos) - pos);
}

}  // namespace

TEST_F(ConnectionTest, PingRoundTrip)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    RedisStatus st = connect_url(conn, server_.url());
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(conn.connected());
    RedisReply pong = command(conn, {"PING"});
    EXPECT_EQ(pong.type, RedisReply::Type::Status);
    EXPECT_EQ(pong.str, "PONG");
    RedisReply echo = command(conn, {"ECHO", "hello\r\nworld"});
    EXPECT_EQ(echo.type, RedisReply::Type::String);
    EXPECT_EQ(echo.str, "hello\r\nworld");
    conn.close();
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionTest, ReplyTypesAndErrorsAreValuesNotFailures)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    CommandPipeline b;
    b.add({"SET", "s", "x"});
    b.add({"LPUSH", "s", "y"});
    b.add({"INCRBY", "n", "-5"});
    b.add({"GET", "missing"});
    b.add({"RPUSH", "l", "a", "b"});
    b.add({"LRANGE", "l", "0", "-1"});
    std::vector<RedisReply> r;
    RedisStatus st = conn.execute(b, &r, 2000, waiter_);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(r.size(), 6u);
    EXPECT_EQ(r[0].type, RedisReply::Type::Status);
    EXPECT_EQ(r[1].type, RedisReply::Type::Error);
    EXPECT_EQ(r[1].str.substr(0, 9), "WRONGTYPE");
    EXPECT_EQ(r[2].type, RedisReply::Type::Integer);
    EXPECT_EQ(r[2].integer, -5);
    EXPECT_EQ(r[3].type, RedisReply::Type::Nil);
    EXPECT_EQ(r[4].integer, 2);
    ASSERT_EQ(r[5].type, RedisReply::Type::Array);
    ASSERT_EQ(r[5].elements.size(), 2u);
    EXPECT_EQ(r[5].elements[1].str, "b");
    EXPECT_TRUE(conn.connected());
}

TEST_F(ConnectionTest, Pipelined1000Commands)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    CommandPipeline b;
    std::string value(90, 'v');
    for (int i = 0; i < 1000; ++i)
        b.add({"RPUSH", "pipe", value + std::to_string(i)});
    std::vector<RedisReply> r;
    RedisStatus st = conn.execute(b, &r, 5000, waiter_);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(r.size(), 1000u);
    for (int i = 0; i < 1000; ++i)
        ASSERT_EQ(r[i].integer, i + 1);
    RedisReply all = command(conn, {"LRANGE", "pipe", "0", "-1"});
    ASSERT_EQ(all.elements.size(), 1000u);
    EXPECT_EQ(all.elements[0].str, value + "0");
    EXPECT_EQ(all.elements[999].str, value + "999");
}

TEST_F(ConnectionTest, TwentyMegabyteValueRoundTrip)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    std::string big(20 * 1024 * 1024, '\0');
    for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<char>('a' + (i * 7919) % 26);
    big[12345] = '\r';
    big[12346] = '\n';
    CommandPipeline b;
    b.add({"SET", "big", big});
    b.add({"STRLEN", "big"});
    b.add({"GET", "big"});
    b.add({"GET", "big"});
    std::vector<RedisReply> r;
    RedisStatus st = conn.execute(b, &r, 20000, waiter_);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[0].str, "OK");
    EXPECT_EQ(r[1].integer, static_cast<long long>(big.size()));
    EXPECT_TRUE(r[2].str == big);
    EXPECT_TRUE(r[3].str == big);
    EXPECT_EQ(command(conn, {"PING"}).str, "PONG");
}

TEST_F(ConnectionTest, RequirePass)
{
    ASSERT_TRUE(server_.start({"--requirepass", "p@ss/w:rd"}));
    RedisConnection conn;
    RedisStatus st = connect_url(conn, server_.url(":p%40ss%2Fw%3Ard@"));
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(command(conn, {"PING"}).str, "PONG");

    st = connect_url(conn, server_.url(":Wr0ngSecret@"));
    EXPECT_EQ(st.code, Code::AuthFailed);
    EXPECT_NE(st.message.find("WRONGPASS"), std::string::npos) << st.message;
    EXPECT_EQ(st.message.find("Wr0ngSecret"), std::string::npos) << st.message;
    EXPECT_FALSE(conn.connected());

    // Without a password the connection opens; commands answer NOAUTH as reply errors.
    st = connect_url(conn, server_.url());
    ASSERT_TRUE(st.ok()) << st.message;
    RedisReply r = command(conn, {"PING"});
    EXPECT_EQ(r.type, RedisReply::Type::Error);
    EXPECT_EQ(r.str.substr(0, 6), "NOAUTH");
}

TEST_F(ConnectionTest, AclUser)
{
    ASSERT_TRUE(server_.start());
    RedisConnection admin;
    ASSERT_TRUE(connect_url(admin, server_.url()).ok());
    RedisReply set = command(admin, {"ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all"});
    ASSERT_EQ(set.str, "OK") << set.str;

    RedisConnection conn;
    RedisStatus st = connect_url(conn, server_.url("alice:s3cret@"));
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(command(conn, {"ACL", "WHOAMI"}).str, "alice");

    st = connect_url(conn, server_.url("alice:n0tIt@"));
    EXPECT_EQ(st.code, Code::AuthFailed);
    EXPECT_NE(st.message.find("WRONGPASS"), std::string::npos) << st.message;
    EXPECT_EQ(st.message.find("n0tIt"), std::string::npos) << st.message;
}

TEST_F(ConnectionTest, SelectDb)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url({}, 3)).ok());
    EXPECT_EQ(client_info_field(conn, "db"), "3");
    command(conn, {"SET", "in3", "yes"});

    RedisConnection db0;
    ASSERT_TRUE(connect_url(db0, server_.url()).ok());
    EXPECT_EQ(client_info_field(db0, "db"), "0");
    EXPECT_EQ(command(db0, {"EXISTS", "in3"}).integer, 0);

    RedisStatus st = connect_url(conn, server_.url({}, 99999));
    EXPECT_EQ(st.code, Code::AuthFailed);
    EXPECT_EQ(st.message, "SELECT 99999: ERR DB index is out of range");
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionTest, AuthAndSelectTogether)
{
    ASSERT_TRUE(server_.start({"--requirepass", "pw"}));
    RedisConnection conn;
    RedisStatus st = connect_url(conn, server_.url(":pw@", 5));
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(client_info_field(conn, "db"), "5");
    st = connect_url(conn, server_.url(":bad@", 5));
    EXPECT_EQ(st.code, Code::AuthFailed);
    EXPECT_EQ(st.message.substr(0, 15), "AUTH: WRONGPASS");
}

TEST_F(ConnectionTest, UnixSocket)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    RedisStatus st = connect_url(conn, "unix://" + server_.socket_path() + "?db=2");
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(command(conn, {"PING"}).str, "PONG");
    EXPECT_EQ(client_info_field(conn, "db"), "2");
    // The connection's local address is the socket: Redis and Valkey 8 print "<path>:0",
    // Valkey 9 "[<path>:0]:0".
    std::string laddr = client_info_field(conn, "laddr");
    EXPECT_TRUE(laddr == server_.socket_path() + ":0" || laddr == "[" + server_.socket_path() + ":0]:0") << laddr;
}

TEST_F(ConnectionTest, HostNameTriesEveryAddress)
{
    // The server listens on 127.0.0.1 only; "localhost" may resolve to ::1 first.
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    RedisStatus st = connect_url(conn, "redis://localhost:" + std::to_string(server_.port()));
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(command(conn, {"PING"}).str, "PONG");
}

TEST_F(ConnectionTest, ConnectFailures)
{
    RedisConnection conn;
    RedisStatus st = connect_url(conn, "redis://127.0.0.1:" + std::to_string(jobbuf::test::free_port()));
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("refused"), std::string::npos) << st.message;
    EXPECT_FALSE(conn.connected());

    st = connect_url(conn, "unix:///nonexistent/jobbuf/redis.sock");
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("/nonexistent/jobbuf/redis.sock"), std::string::npos) << st.message;

    st = connect_url(conn, "redis://no-such-host.invalid:6379");
    EXPECT_EQ(st.code, Code::ConnectFailed);
    EXPECT_NE(st.message.find("resolve"), std::string::npos) << st.message;
}

TEST_F(ConnectionTest, ExecuteWithoutConnection)
{
    RedisConnection conn;
    CommandPipeline b;
    b.add({"PING"});
    std::vector<RedisReply> r;
    EXPECT_EQ(conn.execute(b, &r, 100, waiter_).code, Code::IoError);
}

TEST_F(ConnectionTest, StoppedServerTimesOut)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    ASSERT_EQ(kill(server_.pid(), SIGSTOP), 0);
    CommandPipeline b;
    b.add({"PING"});
    std::vector<RedisReply> r;
    auto start = std::chrono::steady_clock::now();
    RedisStatus st = conn.execute(b, &r, 300, waiter_);
    long took = elapsed_ms(start);
    kill(server_.pid(), SIGCONT);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_GE(took, 280);
    EXPECT_LT(took, 5000);  // bounded (a loaded machine may be slow to wake us): not a timing test
    EXPECT_FALSE(conn.connected());

    // AUTH against a stopped server: connect itself times out.
    ASSERT_EQ(kill(server_.pid(), SIGSTOP), 0);
    start = std::chrono::steady_clock::now();
    st = connect_url(conn, server_.url(":pw@"), 300);
    took = elapsed_ms(start);
    kill(server_.pid(), SIGCONT);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_LT(took, 5000);
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionTest, InterruptedWaiterStopsTheCall)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    ASSERT_EQ(kill(server_.pid(), SIGSTOP), 0);  // the reply cannot arrive before we wait
    CommandPipeline b;
    b.add({"PING"});
    std::vector<RedisReply> r;
    InterruptingWaiter interrupting(0);
    auto start = std::chrono::steady_clock::now();
    RedisStatus st = conn.execute(b, &r, 60000, interrupting);
    long took = elapsed_ms(start);
    kill(server_.pid(), SIGCONT);
    EXPECT_EQ(st.code, Code::Interrupted) << st.message;
    EXPECT_EQ(interrupting.interrupts, 1);
    EXPECT_LT(took, 30000);  // the interrupt, not the 60 s timeout, ended it
    EXPECT_FALSE(conn.connected());

    // During connect too (AUTH needs a reply).
    RedisEndpoint ep;
    ep.port = server_.port();
    ep.password = "pw";
    ASSERT_EQ(kill(server_.pid(), SIGSTOP), 0);
    InterruptingWaiter connect_interrupt(0);
    st = conn.connect(ep, 5000, connect_interrupt);
    kill(server_.pid(), SIGCONT);
    EXPECT_EQ(st.code, Code::Interrupted) << st.message;
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionTest, ServerGoneIsIoError)
{
    ASSERT_TRUE(server_.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server_.url()).ok());
    RedisReply r = command(conn, {"CLIENT", "KILL", "SKIPME", "no"});
    EXPECT_EQ(r.type, RedisReply::Type::Integer);
    CommandPipeline b;
    b.add({"PING"});
    std::vector<RedisReply> replies;
    RedisStatus st = conn.execute(b, &replies, 2000, waiter_);
    EXPECT_EQ(st.code, Code::IoError) << st.message;
    EXPECT_FALSE(conn.connected());
}

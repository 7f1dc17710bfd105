// Tests of fencing a worker's earlier connections: the CLIENT LIST parser, and against a real
// redis-server that a stale MULTI left unread on an old connection never runs after the fence.
#include <gtest/gtest.h>

#include "redis/connection_fence.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

TEST(StaleClientIds, PicksOtherConnectionsOfTheName)
{
    std::string list = "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=jobbuf-marker-1-5 age=9 db=0\n"
                       "id=4 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=9 name=other age=1 db=0\n"
                       "id=7 addr=127.0.0.1:5002 laddr=127.0.0.1:6379 fd=10 name=jobbuf-marker-1-5 age=0 db=0\n"
                       "id=8 addr=127.0.0.1:5003 laddr=127.0.0.1:6379 fd=11 name=jobbuf-marker-1-55 age=0 db=0\n";
    EXPECT_EQ(stale_client_ids(list, "jobbuf-marker-1-5", 7), std::vector<long long>{3});
    EXPECT_EQ(stale_client_ids(list, "jobbuf-marker-1-5", 3), std::vector<long long>{7});
    EXPECT_TRUE(stale_client_ids(list, "nobody", 3).empty());
    EXPECT_TRUE(stale_client_ids("", "jobbuf-marker-1-5", 3).empty());
}

TEST(ConnectionFence, KillsTheEarlierConnectionWithItsUnfinishedTransaction)
{
    RedisServer server;
    ASSERT_TRUE(server.start());
    PollWaiter waiter;
    std::string warning;

    RedisConnection old_connection;
    ASSERT_TRUE(connect_url(old_connection, server.url()).ok());
    ASSERT_TRUE(fence_previous_connections(old_connection, "jobbuf-test", 2000, waiter, &warning).ok());
    EXPECT_EQ(warning, "");
    // An open MULTI whose EXEC has not arrived yet: the state of a unit cut off mid-way.
    EXPECT_EQ(command(old_connection, {"MULTI"}).str, "OK");
    EXPECT_EQ(command(old_connection, {"RPUSH", "fenced", "stale"}).str, "QUEUED");

    RedisConnection fresh;
    ASSERT_TRUE(connect_url(fresh, server.url()).ok());
    ASSERT_TRUE(fence_previous_connections(fresh, "jobbuf-test", 2000, waiter, &warning).ok());

    CommandPipeline exec;
    exec.add({"EXEC"});
    std::vector<RedisReply> replies;
    EXPECT_FALSE(old_connection.execute(exec, &replies, 2000, waiter).ok()) << "the old connection was killed";
    EXPECT_EQ(command(fresh, {"EXISTS", "fenced"}).integer, 0) << "the stale push never ran";
    EXPECT_EQ(command(fresh, {"CLIENT", "GETNAME"}).str, "jobbuf-test");
}

TEST(ConnectionFence, WarnsWhenClientCommandsAreNotAllowed)
{
    RedisServer server;
    ASSERT_TRUE(server.start());
    PollWaiter waiter;
    RedisConnection admin;
    ASSERT_TRUE(connect_url(admin, server.url()).ok());
    ASSERT_EQ(command(admin, {"ACL", "SETUSER", "pusher", "on", ">pw", "~*", "+@all", "-client"}).str, "OK");

    RedisConnection limited;
    ASSERT_TRUE(connect_url(limited, server.url("pusher:pw@")).ok());
    std::string warning;
    EXPECT_TRUE(fence_previous_connections(limited, "jobbuf-test", 2000, waiter, &warning).ok());
    EXPECT_NE(warning.find("cannot be fenced"), std::string::npos) << warning;
}

// Tests of the RESP serialization (CommandPipeline) and of is_transient_error.
#include <gtest/gtest.h>

#include "redis/command_pipeline.h"
#include "redis/reply.h"
#include "resp_helper.h"

using jobbuf::redis::CommandPipeline;
using jobbuf::redis::is_transient_error;

TEST(CommandPipeline, ExactRespBytes)
{
    CommandPipeline b;
    b.add({"SET", "key", "va\r\nlue"});
    b.add({"PING"});
    EXPECT_EQ(b.wire(), "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$7\r\nva\r\nlue\r\n*1\r\n$4\r\nPING\r\n");
    EXPECT_EQ(b.command_count(), 2u);
}

TEST(CommandPipeline, EmptyAndBinaryArguments)
{
    CommandPipeline b;
    std::string binary("a\0b", 3);
    b.add({"SET", "", binary});
    EXPECT_EQ(b.wire(), std::string("*3\r\n$3\r\nSET\r\n$0\r\n\r\n$3\r\na\0b\r\n", 28));
}

TEST(CommandPipeline, IncrementalFormMatchesAdd)
{
    CommandPipeline a, b;
    a.add({"RPUSH", "jobbuf:q", "{\"x\": 1}", std::string(1000, 'z')});
    b.begin(4);
    b.arg("RPUSH");
    b.arg("jobbuf:q");
    b.arg("{\"x\": 1}");
    b.arg(std::string(1000, 'z'));
    EXPECT_EQ(a.wire(), b.wire());
    EXPECT_EQ(a.command_count(), b.command_count());
    EXPECT_EQ(a.wire(), jobbuf::test::resp({{"RPUSH", "jobbuf:q", "{\"x\": 1}", std::string(1000, 'z')}}));
}

TEST(CommandPipeline, ManyArgumentsAndClear)
{
    CommandPipeline b;
    std::vector<std::string> cmd = {"RPUSH", "k"};
    b.begin(1002);
    b.arg("RPUSH");
    b.arg("k");
    for (int i = 0; i < 1000; ++i) {
        cmd.push_back(std::to_string(i));
        b.arg(cmd.back());
    }
    EXPECT_EQ(b.wire(), jobbuf::test::resp({cmd}));
    EXPECT_EQ(b.wire().substr(0, 7), "*1002\r\n");
    b.clear();
    EXPECT_EQ(b.wire(), "");
    EXPECT_EQ(b.command_count(), 0u);
}

TEST(TransientError, KnownPrefixes)
{
    for (const char* e :
         {"OOM command not allowed when used memory > 'maxmemory'.", "LOADING Redis is loading the dataset in memory",
          "BUSY Redis is busy running a script.", "MASTERDOWN Link with MASTER is down",
          "READONLY You can't write against a read only replica.", "NOREPLICAS Not enough good replicas to write.",
          "TRYAGAIN Multiple keys request", "CLUSTERDOWN The cluster is down",
          "MISCONF Redis is configured to save RDB snapshots",
          "EXECABORT Transaction discarded because of previous errors.", "OOM"})
        EXPECT_TRUE(is_transient_error(e)) << e;
}

TEST(TransientError, JobErrorsAreNotTransient)
{
    for (const char* e : {"WRONGTYPE Operation against a key holding the wrong kind of value",
                          "ERR wrong number of arguments for 'rpush' command", "NOAUTH Authentication required.",
                          "BUSYKEY Target key name already exists.", "OOMX something", "oom lower case", "",
                          " OOM leading space", "LOADINGX"})
        EXPECT_FALSE(is_transient_error(e)) << e;
}

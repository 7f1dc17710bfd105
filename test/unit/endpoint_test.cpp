// Tests of parse_redis_url and RedisEndpoint::redacted (pure, no server).
#include <gtest/gtest.h>

#include "redis/endpoint.h"

using jobbuf::redis::parse_redis_url;
using jobbuf::redis::RedisEndpoint;

namespace {

RedisEndpoint parse_ok(const char* url)
{
    RedisEndpoint ep;
    std::string error;
    EXPECT_TRUE(parse_redis_url(url, &ep, &error)) << url << ": " << error;
    EXPECT_EQ(error, "");
    return ep;
}

std::string parse_error(const char* url)
{
    RedisEndpoint ep;
    std::string error;
    EXPECT_FALSE(parse_redis_url(url, &ep, &error)) << url;
    EXPECT_FALSE(error.empty()) << url;
    EXPECT_EQ(error.find('\n'), std::string::npos) << url;
    return error;
}

}  // namespace

TEST(ParseRedisUrl, HostPortDb)
{
    RedisEndpoint ep = parse_ok("redis://cache.internal:6380/4");
    EXPECT_EQ(ep.kind, RedisEndpoint::Kind::Tcp);
    EXPECT_EQ(ep.host, "cache.internal");
    EXPECT_EQ(ep.port, 6380);
    EXPECT_EQ(ep.db, 4);
    EXPECT_EQ(ep.user, "");
    EXPECT_EQ(ep.password, "");
}

TEST(ParseRedisUrl, Defaults)
{
    RedisEndpoint ep = parse_ok("redis://localhost");
    EXPECT_EQ(ep.host, "localhost");
    EXPECT_EQ(ep.port, 6379);
    EXPECT_EQ(ep.db, 0);
    EXPECT_EQ(parse_ok("redis://localhost/").db, 0);
    EXPECT_EQ(parse_ok("REDIS://h:1/2147483647").db, 2147483647);
    EXPECT_EQ(parse_ok("redis://h:65535").port, 65535);
    EXPECT_EQ(parse_ok("redis://h:1").port, 1);
}

TEST(ParseRedisUrl, PasswordOnlyMeansDefaultUser)
{
    RedisEndpoint ep = parse_ok("redis://:s3cret@10.0.0.5:6379/1");
    EXPECT_EQ(ep.user, "");
    EXPECT_EQ(ep.password, "s3cret");
    EXPECT_EQ(ep.host, "10.0.0.5");
    EXPECT_EQ(ep.db, 1);
}

TEST(ParseRedisUrl, AclUser)
{
    RedisEndpoint ep = parse_ok("redis://alice:wonder@h");
    EXPECT_EQ(ep.user, "alice");
    EXPECT_EQ(ep.password, "wonder");
}

// A user alone (its password from jobbuf.redis_password_file), as Redis Cloud's URLs are written.
TEST(ParseRedisUrl, AclUserWithoutPassword)
{
    RedisEndpoint ep = parse_ok("rediss://default@redis-12345.example.com:12345");
    EXPECT_EQ(ep.user, "default");
    EXPECT_EQ(ep.password, "");
    EXPECT_EQ(ep.port, 12345);
    EXPECT_EQ(parse_ok("redis://te%40nant@h").user, "te@nant");
    EXPECT_EQ(parse_ok("redis+sentinel://bob@a,b/m").user, "bob");
    EXPECT_EQ(parse_ok("unix://bob@/tmp/r.sock").user, "bob");
}

TEST(ParseRedisUrl, PercentDecoding)
{
    RedisEndpoint ep = parse_ok("redis://al%69ce:p%40ss%3Aw%2Frd%25%20x@h:7000");
    EXPECT_EQ(ep.user, "alice");
    EXPECT_EQ(ep.password, "p@ss:w/rd% x");
    EXPECT_EQ(ep.port, 7000);
    // An unescaped '@' or '/' in the password: the last '@' ends the credentials.
    ep = parse_ok("redis://:a@b/c@h:7001/3");
    EXPECT_EQ(ep.password, "a@b/c");
    EXPECT_EQ(ep.host, "h");
    EXPECT_EQ(ep.port, 7001);
    EXPECT_EQ(ep.db, 3);
}

TEST(ParseRedisUrl, Ipv6)
{
    RedisEndpoint ep = parse_ok("redis://[::1]:6380/2");
    EXPECT_EQ(ep.host, "::1");
    EXPECT_EQ(ep.port, 6380);
    EXPECT_EQ(ep.db, 2);
    ep = parse_ok("redis://:pw@[2001:db8::7]");
    EXPECT_EQ(ep.host, "2001:db8::7");
    EXPECT_EQ(ep.port, 6379);
    EXPECT_EQ(ep.password, "pw");
}

TEST(ParseRedisUrl, UnixSocket)
{
    RedisEndpoint ep = parse_ok("unix:///var/run/redis/redis.sock");
    EXPECT_EQ(ep.kind, RedisEndpoint::Kind::Unix);
    EXPECT_EQ(ep.socket_path, "/var/run/redis/redis.sock");
    EXPECT_EQ(ep.db, 0);
    ep = parse_ok("unix:///tmp/r.sock?db=5");
    EXPECT_EQ(ep.socket_path, "/tmp/r.sock");
    EXPECT_EQ(ep.db, 5);
    ep = parse_ok("unix://:pw@/tmp/r.sock?db=1");
    EXPECT_EQ(ep.password, "pw");
    EXPECT_EQ(ep.socket_path, "/tmp/r.sock");
    EXPECT_EQ(ep.db, 1);
}

TEST(ParseRedisUrl, RefusesBadUrls)
{
    EXPECT_NE(parse_error("http://localhost:6379").find("\"http\""), std::string::npos);
    EXPECT_NE(parse_error("redis+cluster://h/1").find("only database 0"), std::string::npos);
    parse_error("redis+cluster://");
    parse_error("redis+cluster://a,,b");
    parse_error("redis+cluster://a:0");
    EXPECT_NE(parse_error("redis+clusters://h").find("\"redis+clusters\""), std::string::npos);
    EXPECT_NE(parse_error("redis+sentinel://h:26379").find("master"), std::string::npos);
    EXPECT_NE(parse_error("redis+sentinel://h:26379/").find("master"), std::string::npos);
    parse_error("redis+sentinel:///mymaster");
    parse_error("redis+sentinel://a,,b/mymaster");
    parse_error("redis+sentinel://a:0/mymaster");
    parse_error("redis+sentinel://a/my master");
    parse_error("redis+sentinel://a/mymaster/x");
    parse_error("rediss://");
    EXPECT_NE(parse_error("redis://h:0").find("port"), std::string::npos);
    EXPECT_NE(parse_error("redis://h:70000").find("port"), std::string::npos);
    parse_error("redis://h:-1");
    parse_error("redis://h:");
    parse_error("redis://h:63x79");
    EXPECT_NE(parse_error("redis://").find("empty host"), std::string::npos);
    EXPECT_NE(parse_error("redis://:6379/0").find("empty host"), std::string::npos);
    parse_error("redis://:pw@");
    parse_error("redis://h/2147483648");
    parse_error("redis://h/-1");
    parse_error("redis://h/1x");
    parse_error("redis://h/+1");
    parse_error("redis://h/ 1");
    parse_error("redis://h:6379/0?timeout=1");
    parse_error("redis://h garbage");
    parse_error("redis://h#frag");
    parse_error("redis://[::1");
    parse_error("redis://[::1]x");
    parse_error("redis://[]:6379");
    parse_error("redis://[zz::1]");
    parse_error("redis://:bad%zzescape@h");
    parse_error("redis://:bad%4@h");
    parse_error("redis://@h");
    parse_error("redis://user:@h");
    parse_error("unix://relative/path");
    parse_error("unix:///");
    parse_error("unix:///tmp/r.sock?db=x");
    parse_error("unix:///tmp/r.sock?other=1");
    parse_error("localhost:6379");
    parse_error("");
    std::string error;
    RedisEndpoint ep;
    EXPECT_FALSE(parse_redis_url(nullptr, &ep, &error));
    EXPECT_FALSE(error.empty());
}

TEST(ParseRedisUrl, Tls)
{
    RedisEndpoint ep = parse_ok("rediss://:pw@cache.example.com:6380/2");
    EXPECT_TRUE(ep.tls);
    EXPECT_EQ(ep.kind, RedisEndpoint::Kind::Tcp);
    EXPECT_EQ(ep.host, "cache.example.com");
    EXPECT_EQ(ep.port, 6380);
    EXPECT_EQ(ep.db, 2);
    EXPECT_EQ(ep.password, "pw");
    EXPECT_FALSE(parse_ok("redis://h").tls);
    EXPECT_TRUE(parse_ok("REDISS://h").tls);
}

TEST(ParseRedisUrl, Sentinel)
{
    RedisEndpoint ep = parse_ok("redis+sentinel://u:pw@s1:26380,10.0.0.2,[::1]:5000/mymaster/3");
    EXPECT_EQ(ep.kind, RedisEndpoint::Kind::Sentinel);
    EXPECT_FALSE(ep.tls);
    ASSERT_EQ(ep.sentinels.size(), 3u);
    EXPECT_EQ(ep.sentinels[0].host, "s1");
    EXPECT_EQ(ep.sentinels[0].port, 26380);
    EXPECT_EQ(ep.sentinels[1].host, "10.0.0.2");
    EXPECT_EQ(ep.sentinels[1].port, 26379);
    EXPECT_EQ(ep.sentinels[2].host, "::1");
    EXPECT_EQ(ep.sentinels[2].port, 5000);
    EXPECT_EQ(ep.master_name, "mymaster");
    EXPECT_EQ(ep.db, 3);
    EXPECT_EQ(ep.user, "u");
    EXPECT_EQ(ep.password, "pw");
    ep = parse_ok("rediss+sentinel://h/my-master.1");
    EXPECT_TRUE(ep.tls);
    EXPECT_EQ(ep.master_name, "my-master.1");
    EXPECT_EQ(ep.db, 0);
    EXPECT_EQ(parse_ok("redis+sentinel://h/m/").db, 0);
}

TEST(ParseRedisUrl, FailureLeavesOutputUntouched)
{
    RedisEndpoint ep;
    ep.host = "keep";
    std::string error;
    EXPECT_FALSE(parse_redis_url("redis://:pw@h:0", &ep, &error));
    EXPECT_EQ(ep.host, "keep");
    EXPECT_EQ(ep.password, "");
}

TEST(ParseRedisUrl, ErrorsNeverContainThePassword)
{
    const char* bad[] = {
        "redis://:Sup3rSecretPw@h:0",
        "redis://:Sup3rSecretPw@h:99999",
        "redis://:Sup3rSecretPw@h/x",
        "redis://:Sup3rSecretPw@",
        "redis://u:Sup3rSecretPw@[::1",
        "redis://:Sup3rSecretPw%zz@h",
        "redis://@h:Sup3rSecretPw",
        "http://:Sup3rSecretPw@h",
        "redis://:Sup3rSecretPw",
        "redis://x:Sup3rSecretPw",
        "unix://:Sup3rSecretPw@/tmp/s?db=x",
        "unix://:Sup3rSecretPw",
        "Sup3rSecretPw://h",
        "redis://h:Sup3rSecretPw/0",
        "rediss://:Sup3rSecretPw@h:0",
        "redis+sentinel://:Sup3rSecretPw@h",
        "redis+sentinel://:Sup3rSecretPw@h/m/x",
        "rediss+sentinel://:Sup3rSecretPw@/m",
    };
    for (const char* url : bad) {
        std::string error = parse_error(url);
        EXPECT_EQ(error.find("Sup3rSecretPw"), std::string::npos) << url << " -> " << error;
        EXPECT_EQ(error.find("Sup3r"), std::string::npos) << url << " -> " << error;
    }
}

TEST(RedactedUrl, HidesThePassword)
{
    EXPECT_EQ(parse_ok("redis://:s3cret@h:6380/2").redacted(), "redis://:***@h:6380/2");
    EXPECT_EQ(parse_ok("redis://alice:s3cret@h").redacted(), "redis://alice:***@h:6379/0");
    EXPECT_EQ(parse_ok("redis://h").redacted(), "redis://h:6379/0");
    EXPECT_EQ(parse_ok("redis://[::1]:6380/2").redacted(), "redis://[::1]:6380/2");
    EXPECT_EQ(parse_ok("unix:///tmp/r.sock?db=3").redacted(), "unix:///tmp/r.sock?db=3");
    EXPECT_EQ(parse_ok("unix:///tmp/r.sock").redacted(), "unix:///tmp/r.sock");
    EXPECT_EQ(parse_ok("unix://:pw@/tmp/r.sock").redacted(), "unix://:***@/tmp/r.sock");
    EXPECT_EQ(parse_ok("redis://a%40b:x@h").redacted(), "redis://a%40b:***@h:6379/0");
    EXPECT_EQ(parse_ok("rediss://:s3cret@h").redacted(), "rediss://:***@h:6379/0");
    EXPECT_EQ(parse_ok("redis+sentinel://:s3cret@a,b:1/m/2").redacted(), "redis+sentinel://:***@a:26379,b:1/m/2");
    EXPECT_EQ(parse_ok("rediss+sentinel://[::1]/m").redacted(), "rediss+sentinel://[::1]:26379/m/0");
    RedisEndpoint ep = parse_ok("redis://u:p%40ssw0rd@h");
    EXPECT_EQ(ep.redacted().find("p@ssw0rd"), std::string::npos);
    EXPECT_EQ(ep.redacted().find("p%40ssw0rd"), std::string::npos);
}

TEST(RedactedUrl, RoundTripsThroughTheParser)
{
    const char* urls[] = {"redis://al%20ice:pw@[fe80::1%25eth0]:7000/9",
                          "redis://:pw@cache:1/0",
                          "redis://[::1]:6380/2",
                          "unix://:pw@/tmp/x.sock?db=4",
                          "unix:///tmp/y.sock",
                          "rediss://u:pw@h:7/1",
                          "rediss+sentinel://:pw@a:1,[::1]:2/m/5",
                          "rediss://default@h:7/1"};
    for (const char* url : urls) {
        RedisEndpoint ep = parse_ok(url);
        RedisEndpoint back = parse_ok(ep.redacted().c_str());
        EXPECT_EQ(back.kind, ep.kind) << url;
        EXPECT_EQ(back.host, ep.host) << url;
        EXPECT_EQ(back.port, ep.port) << url;
        EXPECT_EQ(back.socket_path, ep.socket_path) << url;
        EXPECT_EQ(back.user, ep.user) << url;
        EXPECT_EQ(back.db, ep.db) << url;
        EXPECT_EQ(back.password, ep.password.empty() ? "" : "***") << url;
    }
    EXPECT_EQ(parse_ok("redis://[fe80::1%25eth0]").host, "fe80::1%eth0");
    EXPECT_EQ(parse_ok("redis://[fe80::1%eth0]").host, "fe80::1%eth0");
}

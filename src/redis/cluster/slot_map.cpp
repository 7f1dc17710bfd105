// Pure C++ regime: parsing of CLUSTER SHARDS / CLUSTER SLOTS and of redirections (see slot_map.h).
#include "redis/regime.h"

#include <charconv>

#include "redis/cluster/slot_hash.h"
#include "redis/cluster/slot_map.h"

namespace jobbuf::redis {
namespace {

bool to_int(const std::string& text, long long* out)
{
    auto res = std::from_chars(text.data(), text.data() + text.size(), *out);
    return res.ec == std::errc() && res.ptr == text.data() + text.size();
}

// An integer reply, or a string holding one (RESP2 replies of either kind).
bool int_of(const RedisReply& reply, long long* out)
{
    if (reply.type == RedisReply::Type::Integer) {
        *out = reply.integer;
        return true;
    }
    return reply.type == RedisReply::Type::String && to_int(reply.str, out);
}

// The value under `name` in a flat [name, value, name, value, ...] array; null when absent.
const RedisReply* field(const RedisReply& map, const char* name)
{
    for (std::size_t i = 0; i + 1 < map.elements.size(); i += 2)
        if (map.elements[i].str == name)
            return &map.elements[i + 1];
    return nullptr;
}

bool valid_range(long long first, long long last)
{
    return first >= 0 && last >= first && last < kClusterSlots;
}

void assign_owners(SlotMap* map)
{
    map->owner.assign(kClusterSlots, -1);
    for (std::size_t n = 0; n < map->nodes.size(); ++n) {
        if (!map->nodes[n].master)
            continue;
        for (auto [first, last] : map->nodes[n].slots)
            for (int s = first; s <= last; ++s)
                if (map->owner[static_cast<std::size_t>(s)] < 0 || map->nodes[n].health == "online")
                    map->owner[static_cast<std::size_t>(s)] = static_cast<int>(n);
    }
}

}  // namespace

std::string ClusterNode::address() const
{
    bool v6 = at.host.find(':') != std::string::npos;
    return (v6 ? "[" + at.host + "]" : at.host) + ":" + std::to_string(at.port);
}

bool parse_cluster_shards(const RedisReply& reply, bool tls, SlotMap* map, std::string* error)
{
    SlotMap parsed;
    if (reply.type != RedisReply::Type::Array) {
        *error = "unexpected reply to CLUSTER SHARDS";
        return false;
    }
    for (const RedisReply& shard : reply.elements) {
        const RedisReply* slots = field(shard, "slots");
        const RedisReply* nodes = field(shard, "nodes");
        if (slots == nullptr || nodes == nullptr || slots->elements.size() % 2 != 0) {
            *error = "unexpected shard in the reply to CLUSTER SHARDS";
            return false;
        }
        std::vector<std::pair<int, int>> ranges;
        for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
            long long first = 0, last = 0;
            if (!int_of(slots->elements[i], &first) || !int_of(slots->elements[i + 1], &last) ||
                !valid_range(first, last)) {
                *error = "unexpected slot range in the reply to CLUSTER SHARDS";
                return false;
            }
            ranges.emplace_back(static_cast<int>(first), static_cast<int>(last));
        }
        for (const RedisReply& node : nodes->elements) {
            ClusterNode one;
            const RedisReply* id = field(node, "id");
            const RedisReply* ip = field(node, "ip");
            const RedisReply* endpoint = field(node, "endpoint");
            const RedisReply* port = field(node, tls ? "tls-port" : "port");
            if (port == nullptr)
                port = field(node, "port");
            const RedisReply* role = field(node, "role");
            const RedisReply* health = field(node, "health");
            long long number = 0;
            if (port == nullptr || !int_of(*port, &number) || number <= 0 || number > 65535 || role == nullptr) {
                *error = "unexpected node in the reply to CLUSTER SHARDS";
                return false;
            }
            one.id = id ? id->str : std::string();
            one.at.host = endpoint && !endpoint->str.empty() && endpoint->str != "?" ? endpoint->str
                                                                                     : (ip ? ip->str : std::string());
            one.at.port = static_cast<int>(number);
            one.master = role->str == "master";
            one.health = health ? health->str : std::string("online");
            one.slots = ranges;
            parsed.nodes.push_back(std::move(one));
        }
    }
    assign_owners(&parsed);
    *map = std::move(parsed);
    return true;
}

bool parse_cluster_slots(const RedisReply& reply, SlotMap* map, std::string* error)
{
    SlotMap parsed;
    if (reply.type != RedisReply::Type::Array) {
        *error = "unexpected reply to CLUSTER SLOTS";
        return false;
    }
    for (const RedisReply& range : reply.elements) {
        long long first = 0, last = 0;
        if (range.elements.size() < 3 || !int_of(range.elements[0], &first) || !int_of(range.elements[1], &last) ||
            !valid_range(first, last)) {
            *error = "unexpected slot range in the reply to CLUSTER SLOTS";
            return false;
        }
        for (std::size_t k = 2; k < range.elements.size(); ++k) {
            const RedisReply& node = range.elements[k];
            long long port = 0;
            if (node.elements.size() < 2 || !int_of(node.elements[1], &port) || port <= 0 || port > 65535) {
                *error = "unexpected node in the reply to CLUSTER SLOTS";
                return false;
            }
            std::string id = node.elements.size() > 2 ? node.elements[2].str : std::string();
            ClusterNode* known = nullptr;
            for (ClusterNode& n : parsed.nodes)
                if ((!id.empty() && n.id == id) || (n.at.host == node.elements[0].str && n.at.port == port))
                    known = &n;
            if (known == nullptr) {
                parsed.nodes.emplace_back();
                known = &parsed.nodes.back();
                known->id = id;
                known->at.host = node.elements[0].str;
                known->at.port = static_cast<int>(port);
                known->health = "online";
            }
            known->master = known->master || k == 2;
            known->slots.emplace_back(static_cast<int>(first), static_cast<int>(last));
        }
    }
    assign_owners(&parsed);
    *map = std::move(parsed);
    return true;
}

Redirect redirect_of(const RedisReply& reply)
{
    Redirect r;
    if (!reply.is_error())
        return r;
    const std::string& text = reply.str;
    auto starts = [&](const char* word) { return text.rfind(word, 0) == 0; };
    if (starts("TRYAGAIN")) {
        r.kind = Redirect::Kind::TryAgain;
        return r;
    }
    if (starts("CLUSTERDOWN")) {
        r.kind = Redirect::Kind::ClusterDown;
        return r;
    }
    bool moved = starts("MOVED ");
    if (!moved && !starts("ASK "))
        return r;
    std::size_t slot_at = text.find(' ') + 1;
    std::size_t addr_at = text.find(' ', slot_at);
    if (addr_at == std::string::npos)
        return r;
    long long slot = 0, port = 0;
    std::string address = text.substr(addr_at + 1);
    std::size_t colon = address.rfind(':');
    if (!to_int(text.substr(slot_at, addr_at - slot_at), &slot) || slot < 0 || slot >= kClusterSlots ||
        colon == std::string::npos || !to_int(address.substr(colon + 1), &port) || port <= 0 || port > 65535)
        return r;
    std::string host = address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    r.kind = moved ? Redirect::Kind::Moved : Redirect::Kind::Ask;
    r.slot = static_cast<int>(slot);
    r.at.host = host == "?" ? std::string() : host;
    r.at.port = static_cast<int>(port);
    return r;
}

}  // namespace jobbuf::redis

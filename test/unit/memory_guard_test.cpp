// Tests of the memory guard's decisions (redis/memory_guard.h; pure, no server): the forms of
// jobbuf.redis_memory_limit, `INFO memory` replies captured from real servers, the limit that
// applies under each policy, the hold and its 90 % hysteresis, the room and what may be sent.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "redis/memory_guard.h"

using jobbuf::redis::bytes_to_send;
using jobbuf::redis::evaluate;
using jobbuf::redis::job_exceeds_limit;
using jobbuf::redis::kUnlimitedRoom;
using jobbuf::redis::LimitBasis;
using jobbuf::redis::MemoryLimit;
using jobbuf::redis::MemoryVerdict;
using jobbuf::redis::parse_info_memory;
using jobbuf::redis::parse_memory_limit;
using jobbuf::redis::RedisMemory;

static_assert(std::is_trivially_copyable_v<MemoryLimit>);
static_assert(std::is_trivially_copyable_v<RedisMemory>);
static_assert(std::is_trivially_copyable_v<MemoryVerdict>);

namespace {

// `INFO memory` bulk replies as redis-cli printed them (`redis-cli -s SOCKET INFO memory`), byte
// for byte: CRLF line ends, the last line's too.

// Redis 7.0.15, as started: maxmemory 0, noeviction.
constexpr char kRedis70Default[] = "# Memory\r\n"
                                   "used_memory:939144\r\n"
                                   "used_memory_human:917.13K\r\n"
                                   "used_memory_rss:12238848\r\n"
                                   "used_memory_rss_human:11.67M\r\n"
                                   "used_memory_peak:939144\r\n"
                                   "used_memory_peak_human:917.13K\r\n"
                                   "used_memory_peak_perc:100.01%\r\n"
                                   "used_memory_overhead:876184\r\n"
                                   "used_memory_startup:875984\r\n"
                                   "used_memory_dataset:62960\r\n"
                                   "used_memory_dataset_perc:99.68%\r\n"
                                   "allocator_allocated:1735904\r\n"
                                   "allocator_active:1880064\r\n"
                                   "allocator_resident:4550656\r\n"
                                   "total_system_memory:25276502016\r\n"
                                   "total_system_memory_human:23.54G\r\n"
                                   "used_memory_lua:32768\r\n"
                                   "used_memory_vm_eval:32768\r\n"
                                   "used_memory_lua_human:32.00K\r\n"
                                   "used_memory_scripts_eval:0\r\n"
                                   "number_of_cached_scripts:0\r\n"
                                   "number_of_functions:0\r\n"
                                   "number_of_libraries:0\r\n"
                                   "used_memory_vm_functions:33792\r\n"
                                   "used_memory_vm_total:66560\r\n"
                                   "used_memory_vm_total_human:65.00K\r\n"
                                   "used_memory_functions:200\r\n"
                                   "used_memory_scripts:200\r\n"
                                   "used_memory_scripts_human:200B\r\n"
                                   "maxmemory:0\r\n"
                                   "maxmemory_human:0B\r\n"
                                   "maxmemory_policy:noeviction\r\n"
                                   "allocator_frag_ratio:1.08\r\n"
                                   "allocator_frag_bytes:144160\r\n"
                                   "allocator_rss_ratio:2.42\r\n"
                                   "allocator_rss_bytes:2670592\r\n"
                                   "rss_overhead_ratio:2.69\r\n"
                                   "rss_overhead_bytes:7688192\r\n"
                                   "mem_fragmentation_ratio:13.59\r\n"
                                   "mem_fragmentation_bytes:11338008\r\n"
                                   "mem_not_counted_for_evict:0\r\n"
                                   "mem_replication_backlog:0\r\n"
                                   "mem_total_replication_buffers:0\r\n"
                                   "mem_clients_slaves:0\r\n"
                                   "mem_clients_normal:0\r\n"
                                   "mem_cluster_links:0\r\n"
                                   "mem_aof_buffer:0\r\n"
                                   "mem_allocator:jemalloc-5.3.0\r\n"
                                   "active_defrag_running:0\r\n"
                                   "lazyfree_pending_objects:0\r\n"
                                   "lazyfreed_objects:0\r\n";

// Redis 7.0.15 after CONFIG SET maxmemory 104857600, maxmemory-policy allkeys-lru.
constexpr char kRedis70AllkeysLru[] = "# Memory\r\n"
                                      "used_memory:963864\r\n"
                                      "used_memory_human:941.27K\r\n"
                                      "used_memory_rss:12238848\r\n"
                                      "used_memory_rss_human:11.67M\r\n"
                                      "used_memory_peak:963864\r\n"
                                      "used_memory_peak_human:941.27K\r\n"
                                      "used_memory_peak_perc:100.00%\r\n"
                                      "used_memory_overhead:876184\r\n"
                                      "used_memory_startup:875984\r\n"
                                      "used_memory_dataset:87680\r\n"
                                      "used_memory_dataset_perc:99.77%\r\n"
                                      "allocator_allocated:1735904\r\n"
                                      "allocator_active:1880064\r\n"
                                      "allocator_resident:4550656\r\n"
                                      "total_system_memory:25276502016\r\n"
                                      "total_system_memory_human:23.54G\r\n"
                                      "used_memory_lua:32768\r\n"
                                      "used_memory_vm_eval:32768\r\n"
                                      "used_memory_lua_human:32.00K\r\n"
                                      "used_memory_scripts_eval:0\r\n"
                                      "number_of_cached_scripts:0\r\n"
                                      "number_of_functions:0\r\n"
                                      "number_of_libraries:0\r\n"
                                      "used_memory_vm_functions:33792\r\n"
                                      "used_memory_vm_total:66560\r\n"
                                      "used_memory_vm_total_human:65.00K\r\n"
                                      "used_memory_functions:200\r\n"
                                      "used_memory_scripts:200\r\n"
                                      "used_memory_scripts_human:200B\r\n"
                                      "maxmemory:104857600\r\n"
                                      "maxmemory_human:100.00M\r\n"
                                      "maxmemory_policy:allkeys-lru\r\n"
                                      "allocator_frag_ratio:1.08\r\n"
                                      "allocator_frag_bytes:144160\r\n"
                                      "allocator_rss_ratio:2.42\r\n"
                                      "allocator_rss_bytes:2670592\r\n"
                                      "rss_overhead_ratio:2.69\r\n"
                                      "rss_overhead_bytes:7688192\r\n"
                                      "mem_fragmentation_ratio:13.59\r\n"
                                      "mem_fragmentation_bytes:11338008\r\n"
                                      "mem_not_counted_for_evict:0\r\n"
                                      "mem_replication_backlog:0\r\n"
                                      "mem_total_replication_buffers:0\r\n"
                                      "mem_clients_slaves:0\r\n"
                                      "mem_clients_normal:0\r\n"
                                      "mem_cluster_links:0\r\n"
                                      "mem_aof_buffer:0\r\n"
                                      "mem_allocator:jemalloc-5.3.0\r\n"
                                      "active_defrag_running:0\r\n"
                                      "lazyfree_pending_objects:0\r\n"
                                      "lazyfreed_objects:0\r\n";

// Redis 7.0.15 with appendonly yes (so mem_not_counted_for_evict is the AOF buffer), maxmemory
// 1000000 and noeviction, written to until it answered OOM.
constexpr char kRedis70AofNearFull[] = "# Memory\r\n"
                                       "used_memory:998360\r\n"
                                       "used_memory_human:974.96K\r\n"
                                       "used_memory_rss:12369920\r\n"
                                       "used_memory_rss_human:11.80M\r\n"
                                       "used_memory_peak:1004656\r\n"
                                       "used_memory_peak_human:981.11K\r\n"
                                       "used_memory_peak_perc:99.37%\r\n"
                                       "used_memory_overhead:876440\r\n"
                                       "used_memory_startup:875984\r\n"
                                       "used_memory_dataset:121920\r\n"
                                       "used_memory_dataset_perc:99.63%\r\n"
                                       "allocator_allocated:1656896\r\n"
                                       "allocator_active:1900544\r\n"
                                       "allocator_resident:4796416\r\n"
                                       "total_system_memory:25276502016\r\n"
                                       "total_system_memory_human:23.54G\r\n"
                                       "used_memory_lua:32768\r\n"
                                       "used_memory_vm_eval:32768\r\n"
                                       "used_memory_lua_human:32.00K\r\n"
                                       "used_memory_scripts_eval:0\r\n"
                                       "number_of_cached_scripts:0\r\n"
                                       "number_of_functions:0\r\n"
                                       "number_of_libraries:0\r\n"
                                       "used_memory_vm_functions:33792\r\n"
                                       "used_memory_vm_total:66560\r\n"
                                       "used_memory_vm_total_human:65.00K\r\n"
                                       "used_memory_functions:200\r\n"
                                       "used_memory_scripts:200\r\n"
                                       "used_memory_scripts_human:200B\r\n"
                                       "maxmemory:1000000\r\n"
                                       "maxmemory_human:976.56K\r\n"
                                       "maxmemory_policy:noeviction\r\n"
                                       "allocator_frag_ratio:1.15\r\n"
                                       "allocator_frag_bytes:243648\r\n"
                                       "allocator_rss_ratio:2.52\r\n"
                                       "allocator_rss_bytes:2895872\r\n"
                                       "rss_overhead_ratio:2.58\r\n"
                                       "rss_overhead_bytes:7573504\r\n"
                                       "mem_fragmentation_ratio:12.89\r\n"
                                       "mem_fragmentation_bytes:11409992\r\n"
                                       "mem_not_counted_for_evict:64\r\n"
                                       "mem_replication_backlog:0\r\n"
                                       "mem_total_replication_buffers:0\r\n"
                                       "mem_clients_slaves:0\r\n"
                                       "mem_clients_normal:0\r\n"
                                       "mem_cluster_links:0\r\n"
                                       "mem_aof_buffer:64\r\n"
                                       "mem_allocator:jemalloc-5.3.0\r\n"
                                       "active_defrag_running:0\r\n"
                                       "lazyfree_pending_objects:0\r\n"
                                       "lazyfreed_objects:0\r\n";

// The same server after CONFIG SET maxmemory 950000: used_memory above maxmemory.
constexpr char kRedis70OverMaxmemory[] = "# Memory\r\n"
                                         "used_memory:998360\r\n"
                                         "used_memory_human:974.96K\r\n"
                                         "used_memory_rss:12369920\r\n"
                                         "used_memory_rss_human:11.80M\r\n"
                                         "used_memory_peak:1004656\r\n"
                                         "used_memory_peak_human:981.11K\r\n"
                                         "used_memory_peak_perc:99.37%\r\n"
                                         "used_memory_overhead:876440\r\n"
                                         "used_memory_startup:875984\r\n"
                                         "used_memory_dataset:121920\r\n"
                                         "used_memory_dataset_perc:99.63%\r\n"
                                         "allocator_allocated:1647296\r\n"
                                         "allocator_active:1900544\r\n"
                                         "allocator_resident:4796416\r\n"
                                         "total_system_memory:25276502016\r\n"
                                         "total_system_memory_human:23.54G\r\n"
                                         "used_memory_lua:32768\r\n"
                                         "used_memory_vm_eval:32768\r\n"
                                         "used_memory_lua_human:32.00K\r\n"
                                         "used_memory_scripts_eval:0\r\n"
                                         "number_of_cached_scripts:0\r\n"
                                         "number_of_functions:0\r\n"
                                         "number_of_libraries:0\r\n"
                                         "used_memory_vm_functions:33792\r\n"
                                         "used_memory_vm_total:66560\r\n"
                                         "used_memory_vm_total_human:65.00K\r\n"
                                         "used_memory_functions:200\r\n"
                                         "used_memory_scripts:200\r\n"
                                         "used_memory_scripts_human:200B\r\n"
                                         "maxmemory:950000\r\n"
                                         "maxmemory_human:927.73K\r\n"
                                         "maxmemory_policy:noeviction\r\n"
                                         "allocator_frag_ratio:1.15\r\n"
                                         "allocator_frag_bytes:253248\r\n"
                                         "allocator_rss_ratio:2.52\r\n"
                                         "allocator_rss_bytes:2895872\r\n"
                                         "rss_overhead_ratio:2.58\r\n"
                                         "rss_overhead_bytes:7573504\r\n"
                                         "mem_fragmentation_ratio:12.88\r\n"
                                         "mem_fragmentation_bytes:11409864\r\n"
                                         "mem_not_counted_for_evict:64\r\n"
                                         "mem_replication_backlog:0\r\n"
                                         "mem_total_replication_buffers:0\r\n"
                                         "mem_clients_slaves:0\r\n"
                                         "mem_clients_normal:0\r\n"
                                         "mem_cluster_links:0\r\n"
                                         "mem_aof_buffer:64\r\n"
                                         "mem_allocator:jemalloc-5.3.0\r\n"
                                         "active_defrag_running:0\r\n"
                                         "lazyfree_pending_objects:0\r\n"
                                         "lazyfreed_objects:0\r\n";

// Redis 8.0.2 (Debian 13) after CONFIG SET maxmemory 2gb, maxmemory-policy allkeys-lfu.
constexpr char kRedis80AllkeysLfu[] = "# Memory\r\n"
                                      "used_memory:758680\r\n"
                                      "used_memory_human:740.90K\r\n"
                                      "used_memory_rss:13885440\r\n"
                                      "used_memory_rss_human:13.24M\r\n"
                                      "used_memory_peak:758680\r\n"
                                      "used_memory_peak_human:740.90K\r\n"
                                      "used_memory_peak_perc:100.00%\r\n"
                                      "used_memory_overhead:737432\r\n"
                                      "used_memory_startup:670672\r\n"
                                      "used_memory_dataset:21248\r\n"
                                      "used_memory_dataset_perc:24.14%\r\n"
                                      "allocator_allocated:1939008\r\n"
                                      "allocator_active:2109440\r\n"
                                      "allocator_resident:4157440\r\n"
                                      "allocator_muzzy:0\r\n"
                                      "total_system_memory:25276502016\r\n"
                                      "total_system_memory_human:23.54G\r\n"
                                      "used_memory_lua:32768\r\n"
                                      "used_memory_vm_eval:32768\r\n"
                                      "used_memory_lua_human:32.00K\r\n"
                                      "used_memory_scripts_eval:0\r\n"
                                      "number_of_cached_scripts:0\r\n"
                                      "number_of_functions:0\r\n"
                                      "number_of_libraries:0\r\n"
                                      "used_memory_vm_functions:33792\r\n"
                                      "used_memory_vm_total:66560\r\n"
                                      "used_memory_vm_total_human:65.00K\r\n"
                                      "used_memory_functions:200\r\n"
                                      "used_memory_scripts:200\r\n"
                                      "used_memory_scripts_human:200B\r\n"
                                      "maxmemory:2147483648\r\n"
                                      "maxmemory_human:2.00G\r\n"
                                      "maxmemory_policy:allkeys-lfu\r\n"
                                      "allocator_frag_ratio:1.05\r\n"
                                      "allocator_frag_bytes:77504\r\n"
                                      "allocator_rss_ratio:1.97\r\n"
                                      "allocator_rss_bytes:2048000\r\n"
                                      "rss_overhead_ratio:3.34\r\n"
                                      "rss_overhead_bytes:9728000\r\n"
                                      "mem_fragmentation_ratio:20.70\r\n"
                                      "mem_fragmentation_bytes:13214624\r\n"
                                      "mem_not_counted_for_evict:0\r\n"
                                      "mem_replication_backlog:0\r\n"
                                      "mem_total_replication_buffers:0\r\n"
                                      "mem_replica_full_sync_buffer:0\r\n"
                                      "mem_clients_slaves:0\r\n"
                                      "mem_clients_normal:0\r\n"
                                      "mem_cluster_links:0\r\n"
                                      "mem_aof_buffer:0\r\n"
                                      "mem_allocator:jemalloc-5.3.0\r\n"
                                      "mem_overhead_db_hashtable_rehashing:0\r\n"
                                      "active_defrag_running:0\r\n"
                                      "lazyfree_pending_objects:0\r\n"
                                      "lazyfreed_objects:0\r\n";

// Valkey 8.0.1 (Debian 12 backports) after CONFIG SET maxmemory 2gb, maxmemory-policy allkeys-lfu.
constexpr char kValkey80AllkeysLfu[] = "# Memory\r\n"
                                       "used_memory:996760\r\n"
                                       "used_memory_human:973.40K\r\n"
                                       "used_memory_rss:12697600\r\n"
                                       "used_memory_rss_human:12.11M\r\n"
                                       "used_memory_peak:996760\r\n"
                                       "used_memory_peak_human:973.40K\r\n"
                                       "used_memory_peak_perc:100.00%\r\n"
                                       "used_memory_overhead:929448\r\n"
                                       "used_memory_startup:929248\r\n"
                                       "used_memory_dataset:67312\r\n"
                                       "used_memory_dataset_perc:99.70%\r\n"
                                       "allocator_allocated:1820512\r\n"
                                       "allocator_active:1978368\r\n"
                                       "allocator_resident:4648960\r\n"
                                       "allocator_muzzy:0\r\n"
                                       "total_system_memory:25276502016\r\n"
                                       "total_system_memory_human:23.54G\r\n"
                                       "used_memory_lua:31744\r\n"
                                       "used_memory_vm_eval:31744\r\n"
                                       "used_memory_lua_human:31.00K\r\n"
                                       "used_memory_scripts_eval:0\r\n"
                                       "number_of_cached_scripts:0\r\n"
                                       "number_of_functions:0\r\n"
                                       "number_of_libraries:0\r\n"
                                       "used_memory_vm_functions:33792\r\n"
                                       "used_memory_vm_total:65536\r\n"
                                       "used_memory_vm_total_human:64.00K\r\n"
                                       "used_memory_functions:200\r\n"
                                       "used_memory_scripts:200\r\n"
                                       "used_memory_scripts_human:200B\r\n"
                                       "maxmemory:2147483648\r\n"
                                       "maxmemory_human:2.00G\r\n"
                                       "maxmemory_policy:allkeys-lfu\r\n"
                                       "allocator_frag_ratio:1.06\r\n"
                                       "allocator_frag_bytes:112800\r\n"
                                       "allocator_rss_ratio:2.35\r\n"
                                       "allocator_rss_bytes:2670592\r\n"
                                       "rss_overhead_ratio:2.73\r\n"
                                       "rss_overhead_bytes:8048640\r\n"
                                       "mem_fragmentation_ratio:12.97\r\n"
                                       "mem_fragmentation_bytes:11718808\r\n"
                                       "mem_not_counted_for_evict:0\r\n"
                                       "mem_replication_backlog:0\r\n"
                                       "mem_total_replication_buffers:0\r\n"
                                       "mem_clients_slaves:0\r\n"
                                       "mem_clients_normal:0\r\n"
                                       "mem_cluster_links:0\r\n"
                                       "mem_aof_buffer:0\r\n"
                                       "mem_allocator:jemalloc-5.3.0\r\n"
                                       "mem_overhead_db_hashtable_rehashing:0\r\n"
                                       "active_defrag_running:0\r\n"
                                       "lazyfree_pending_objects:0\r\n"
                                       "lazyfreed_objects:0\r\n";

// Valkey 9.1.2 (Debian forky), as started: maxmemory 0, noeviction.
constexpr char kValkey91Default[] = "# Memory\r\n"
                                    "used_memory:939808\r\n"
                                    "used_memory_human:917.78K\r\n"
                                    "used_memory_rss:14557184\r\n"
                                    "used_memory_rss_human:13.88M\r\n"
                                    "used_memory_peak:939808\r\n"
                                    "used_memory_peak_human:917.78K\r\n"
                                    "used_memory_peak_perc:100.02%\r\n"
                                    "used_memory_overhead:922536\r\n"
                                    "used_memory_startup:921976\r\n"
                                    "used_memory_dataset:17272\r\n"
                                    "used_memory_dataset_perc:96.86%\r\n"
                                    "allocator_allocated:1702120\r\n"
                                    "allocator_active:1810432\r\n"
                                    "allocator_resident:4521984\r\n"
                                    "allocator_muzzy:0\r\n"
                                    "total_system_memory:25276502016\r\n"
                                    "total_system_memory_human:23.54G\r\n"
                                    "used_memory_lua:33792\r\n"
                                    "used_memory_vm_eval:33792\r\n"
                                    "used_memory_lua_human:33.00K\r\n"
                                    "used_memory_scripts_eval:0\r\n"
                                    "number_of_cached_scripts:0\r\n"
                                    "number_of_functions:0\r\n"
                                    "number_of_libraries:0\r\n"
                                    "used_memory_vm_functions:35840\r\n"
                                    "used_memory_vm_total:69632\r\n"
                                    "used_memory_vm_total_human:68.00K\r\n"
                                    "used_memory_functions:336\r\n"
                                    "used_memory_scripts:336\r\n"
                                    "used_memory_scripts_human:336B\r\n"
                                    "maxmemory:0\r\n"
                                    "maxmemory_human:0B\r\n"
                                    "maxmemory_policy:noeviction\r\n"
                                    "allocator_frag_ratio:1.00\r\n"
                                    "allocator_frag_bytes:0\r\n"
                                    "allocator_rss_ratio:2.50\r\n"
                                    "allocator_rss_bytes:2711552\r\n"
                                    "rss_overhead_ratio:3.22\r\n"
                                    "rss_overhead_bytes:10035200\r\n"
                                    "mem_fragmentation_ratio:15.78\r\n"
                                    "mem_fragmentation_bytes:13634792\r\n"
                                    "mem_not_counted_for_evict:0\r\n"
                                    "mem_replication_backlog:0\r\n"
                                    "mem_total_replication_buffers:0\r\n"
                                    "mem_replicas_repl_buffer:0\r\n"
                                    "mem_clients_slaves:0\r\n"
                                    "mem_clients_normal:0\r\n"
                                    "mem_cluster_links:0\r\n"
                                    "mem_cluster_slot_import:0\r\n"
                                    "mem_cluster_slot_export:0\r\n"
                                    "mem_aof_buffer:0\r\n"
                                    "mem_allocator:jemalloc-5.3.1\r\n"
                                    "mem_overhead_db_hashtable_rehashing:0\r\n"
                                    "active_defrag_running:0\r\n"
                                    "lazyfree_pending_objects:0\r\n"
                                    "lazyfreed_objects:0\r\n";

constexpr std::uint64_t kKB = 1024;
constexpr std::uint64_t kMB = 1024 * kKB;
constexpr std::uint64_t kGB = 1024 * kMB;
constexpr std::uint64_t kTB = 1024 * kGB;
constexpr std::uint64_t kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

const char* const kPolicies[] = {"noeviction",   "allkeys-lru",  "allkeys-lfu",     "allkeys-random",
                                 "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"};

MemoryLimit limit_ok(const std::string& text)
{
    MemoryLimit limit;
    std::string error = "stale";
    EXPECT_TRUE(parse_memory_limit(text, &limit, &error)) << "[" << text << "]: " << error;
    EXPECT_EQ(error, "") << text;
    return limit;
}

std::uint64_t size_ok(const std::string& text)
{
    MemoryLimit limit = limit_ok(text);
    EXPECT_EQ(limit.kind, MemoryLimit::Kind::Size) << text;
    return limit.bytes;
}

double fraction_ok(const std::string& text)
{
    MemoryLimit limit = limit_ok(text);
    EXPECT_EQ(limit.kind, MemoryLimit::Kind::Fraction) << text;
    return limit.fraction;
}

// Refused: one line that shows the valid forms, and *out untouched.
std::string limit_error(const std::string& text)
{
    MemoryLimit limit;
    limit.kind = MemoryLimit::Kind::Size;
    limit.bytes = 4242;
    std::string error;
    EXPECT_FALSE(parse_memory_limit(text, &limit, &error)) << "[" << text << "]";
    EXPECT_EQ(error.find('\n'), std::string::npos) << text;
    EXPECT_EQ(error.find('\r'), std::string::npos) << text;
    EXPECT_NE(error.find("invalid memory limit"), std::string::npos) << error;
    EXPECT_NE(error.find("expected off, a fraction of maxmemory (0 < f <= 1"), std::string::npos) << error;
    EXPECT_NE(error.find("512MB"), std::string::npos) << error;
    EXPECT_NE(error.find("units B, kB, MB, GB, TB"), std::string::npos) << error;
    EXPECT_EQ(limit.kind, MemoryLimit::Kind::Size) << text;
    EXPECT_EQ(limit.bytes, 4242u) << text;
    return error;
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

RedisMemory info_ok(const std::string& reply)
{
    RedisMemory memory;
    std::string error = "stale";
    EXPECT_TRUE(parse_info_memory(reply, &memory, &error)) << error;
    EXPECT_EQ(error, "");
    return memory;
}

// Refused: one line, and *out untouched.
std::string info_error(const std::string& reply)
{
    RedisMemory memory;
    memory.used_memory = 77;
    std::string error;
    EXPECT_FALSE(parse_info_memory(reply, &memory, &error)) << reply;
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_EQ(memory.used_memory, 77u);
    return error;
}

// The reply with the line that starts "key:" replaced by `line` (removed when `line` is empty).
std::string with_line(std::string reply, const std::string& key, const std::string& line)
{
    std::size_t at = reply.rfind("\r\n" + key + ":");
    at = at == std::string::npos ? (reply.compare(0, key.size() + 1, key + ":") == 0 ? 0 : std::string::npos) : at + 2;
    EXPECT_NE(at, std::string::npos) << key;
    std::size_t end = reply.find("\r\n", at) + 2;
    reply.replace(at, end - at, line.empty() ? "" : line + "\r\n");
    return reply;
}

std::string with_policy(const char* reply, const std::string& policy)
{
    return with_line(reply, "maxmemory_policy", "maxmemory_policy:" + policy);
}

RedisMemory memory_of(std::uint64_t used, std::uint64_t maxmemory = 0, const char* policy = "noeviction",
                      std::uint64_t not_counted = 0)
{
    std::string reply = "# Memory\r\nused_memory:" + std::to_string(used) +
                        "\r\nmaxmemory:" + std::to_string(maxmemory) + "\r\nmaxmemory_policy:" + policy +
                        "\r\nmem_not_counted_for_evict:" + std::to_string(not_counted) + "\r\n";
    return info_ok(reply);
}

MemoryLimit size_limit(std::uint64_t bytes)
{
    MemoryLimit limit;
    limit.kind = MemoryLimit::Kind::Size;
    limit.bytes = bytes;
    return limit;
}

MemoryLimit fraction_limit(double fraction)
{
    MemoryLimit limit;
    limit.kind = MemoryLimit::Kind::Fraction;
    limit.fraction = fraction;
    return limit;
}

// No limit applies: unlimited room, NaN ratio, nothing held, everything may be sent.
void expect_unlimited(const MemoryVerdict& v, LimitBasis basis)
{
    EXPECT_EQ(v.basis, basis);
    EXPECT_FALSE(v.limited);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.limit_bytes, 0u);
    EXPECT_EQ(v.resume_below, 0u);
    EXPECT_EQ(v.room_bytes, kUnlimitedRoom);
    EXPECT_TRUE(std::isnan(v.ratio));
    EXPECT_EQ(bytes_to_send(123456789, v), 123456789u);
    EXPECT_EQ(bytes_to_send(std::numeric_limits<std::size_t>::max(), v), std::numeric_limits<std::size_t>::max());
    EXPECT_FALSE(job_exceeds_limit(std::numeric_limits<std::size_t>::max(), v));
}

}  // namespace

// ---- jobbuf.redis_memory_limit ----

TEST(MemoryGuardLimit, Off)
{
    for (const char* text : {"off", "OFF", "Off", " off ", "\toff\n"})
        EXPECT_EQ(limit_ok(text).kind, MemoryLimit::Kind::Off) << text;
    // "off" replaces whatever *out held.
    MemoryLimit limit = size_limit(5);
    std::string error;
    ASSERT_TRUE(parse_memory_limit("off", &limit, &error));
    EXPECT_EQ(limit.kind, MemoryLimit::Kind::Off);
    EXPECT_EQ(limit.bytes, 0u);
}

TEST(MemoryGuardLimit, Fractions)
{
    EXPECT_DOUBLE_EQ(fraction_ok("0.8"), 0.8);
    EXPECT_DOUBLE_EQ(fraction_ok(".5"), 0.5);
    EXPECT_DOUBLE_EQ(fraction_ok("1"), 1.0);
    EXPECT_DOUBLE_EQ(fraction_ok("1.0"), 1.0);
    EXPECT_DOUBLE_EQ(fraction_ok("1."), 1.0);
    EXPECT_DOUBLE_EQ(fraction_ok("0.95"), 0.95);
    EXPECT_DOUBLE_EQ(fraction_ok("0.000001"), 0.000001);
    EXPECT_DOUBLE_EQ(fraction_ok("  0.8\t"), 0.8);
    EXPECT_DOUBLE_EQ(fraction_ok("00.25"), 0.25);
    EXPECT_EQ(limit_ok("0.8").bytes, 0u);
}

TEST(MemoryGuardLimit, SizesWithPostgresUnits)
{
    EXPECT_EQ(size_ok("512MB"), 512 * kMB);
    EXPECT_EQ(size_ok("1GB"), kGB);
    EXPECT_EQ(size_ok("64kB"), 64 * kKB);
    EXPECT_EQ(size_ok("2TB"), 2 * kTB);
    EXPECT_EQ(size_ok("123B"), 123u);
    EXPECT_EQ(size_ok("1B"), 1u);
    EXPECT_DOUBLE_EQ(limit_ok("1GB").fraction, 0.0);
    // Blanks between the number and the unit and around the text, as PostgreSQL takes them.
    EXPECT_EQ(size_ok("100 MB"), 100 * kMB);
    EXPECT_EQ(size_ok("1\tGB"), kGB);
    EXPECT_EQ(size_ok("  2GB  "), 2 * kGB);
    // A fractional size, rounded to the byte as PostgreSQL rounds it.
    EXPECT_EQ(size_ok("1.5GB"), 1536 * kMB);
    EXPECT_EQ(size_ok(".5kB"), 512u);
    EXPECT_EQ(size_ok("0.001kB"), 1u);
    EXPECT_EQ(size_ok("1.5B"), 2u);
    EXPECT_EQ(size_ok("2.MB"), 2 * kMB);
    // The largest: INT64_MAX bytes (jobbuf_flow_status shows it as a bigint).
    EXPECT_EQ(size_ok("9223372036854775807B"), kInt64Max);
    EXPECT_EQ(size_ok("8388607TB"), 8388607 * kTB);
    EXPECT_EQ(size_ok("0000512MB"), 512 * kMB);
}

TEST(MemoryGuardLimit, RefusesEmptyAndNonNumbers)
{
    EXPECT_TRUE(contains(limit_error(""), "empty"));
    EXPECT_TRUE(contains(limit_error("   "), "empty"));
    for (const char* text :
         {"on", "none", "true", "default", "-0.5", "+0.5", "-1GB", ".", ".MB", "MB", "inf", "nan", "ninety percent"})
        EXPECT_TRUE(contains(limit_error(text), "neither off nor a number")) << text;
    EXPECT_TRUE(contains(limit_error("offf"), "\"offf\""));
}

TEST(MemoryGuardLimit, RefusesFractionsOutOfRange)
{
    for (const char* text :
         {"0", "0.0", ".0", "00", "1.5", "1.0000001", "2", "80", "512", "1048576", "99999999999999999999999999"}) {
        std::string error = limit_error(text);
        EXPECT_TRUE(contains(error, "a bare number is a fraction of maxmemory, greater than 0 and at most 1")) << error;
        EXPECT_TRUE(contains(error, "a size needs a unit")) << error;
        EXPECT_TRUE(contains(error, std::string("\"") + text + "\"")) << error;
    }
}

TEST(MemoryGuardLimit, RefusesUnitsPostgresDoesNotTake)
{
    for (const char* text : {"512mb", "512Mb", "512mB", "64KB", "64kb", "1gb", "1Gb", "1tb", "10b"}) {
        std::string error = limit_error(text);
        EXPECT_TRUE(contains(error, "units are case-sensitive, as in PostgreSQL")) << error;
    }
    EXPECT_TRUE(contains(limit_error("80%"), "unknown unit \"%\""));
    EXPECT_TRUE(contains(limit_error("512 MiB"), "unknown unit \"MiB\""));
    EXPECT_TRUE(contains(limit_error("512M"), "unknown unit \"M\""));
    EXPECT_TRUE(contains(limit_error("1e3"), "unknown unit \"e3\""));
    EXPECT_TRUE(contains(limit_error("8e-1"), "unknown unit \"e-1\""));
    EXPECT_TRUE(contains(limit_error("0x10MB"), "unknown unit \"x10MB\""));
    EXPECT_TRUE(contains(limit_error("1,5GB"), "unknown unit \",5GB\""));
    EXPECT_TRUE(contains(limit_error("1.2.3"), "unknown unit \".3\""));
    EXPECT_TRUE(contains(limit_error("5 MB extra"), "unknown unit \"MB extra\""));
    EXPECT_TRUE(contains(limit_error("0.8 0.9"), "unknown unit \"0.9\""));
    EXPECT_TRUE(contains(limit_error("1 GB GB"), "unknown unit"));
}

TEST(MemoryGuardLimit, RefusesSizesOutOfRange)
{
    for (const char* text : {"0MB", "0B", "0.0GB", "0.4B", "0.0000001kB"})
        EXPECT_TRUE(contains(limit_error(text), "a size is at least 1 byte (off turns the guard off)")) << text;
    for (const char* text : {"9223372036854775808B", "8388608TB", "99999999999999999999999GB", "18446744073709551616B",
                             "9007199254740992.5TB"})
        EXPECT_TRUE(contains(limit_error(text), "a size is at most 9223372036854775807 bytes")) << text;
}

TEST(MemoryGuardLimit, MessagesQuoteTheTextSafely)
{
    // A control character never reaches the message, and a long text is cut short.
    std::string error = limit_error(std::string("0.8\x01\x1b[2J", 8));
    EXPECT_EQ(error.find('\x01'), std::string::npos);
    EXPECT_EQ(error.find('\x1b'), std::string::npos);
    EXPECT_TRUE(contains(error, "\"0.8??[2J\"")) << error;
    error = limit_error(std::string(200, '7') + "MB");
    EXPECT_TRUE(contains(error, "\"" + std::string(40, '7') + "...\"")) << error;
    EXPECT_LT(error.size(), 400u);
    // The trimmed text is what is quoted.
    EXPECT_TRUE(contains(limit_error("  1.5  "), "\"1.5\""));
}

TEST(MemoryGuardLimit, NulInTheTextIsRefused)
{
    limit_error(std::string("0.8\0", 4));
    limit_error(std::string("512MB\0x", 7));
}

// ---- INFO memory ----

TEST(MemoryGuardInfo, Redis70Default)
{
    RedisMemory m = info_ok(kRedis70Default);
    EXPECT_EQ(m.used_memory, 939144u);
    EXPECT_EQ(m.maxmemory, 0u);
    EXPECT_EQ(m.policy(), "noeviction");
    EXPECT_EQ(m.not_counted_for_evict, 0u);
    EXPECT_TRUE(m.not_counted_reported);
}

TEST(MemoryGuardInfo, Redis70AllkeysLru)
{
    RedisMemory m = info_ok(kRedis70AllkeysLru);
    EXPECT_EQ(m.used_memory, 963864u);
    EXPECT_EQ(m.maxmemory, 104857600u);
    EXPECT_EQ(m.policy(), "allkeys-lru");
}

TEST(MemoryGuardInfo, Redis70NotCountedForEvict)
{
    RedisMemory m = info_ok(kRedis70AofNearFull);
    EXPECT_EQ(m.used_memory, 998360u);
    EXPECT_EQ(m.maxmemory, 1000000u);
    EXPECT_EQ(m.policy(), "noeviction");
    EXPECT_EQ(m.not_counted_for_evict, 64u);
    EXPECT_TRUE(m.not_counted_reported);
    m = info_ok(kRedis70OverMaxmemory);
    EXPECT_EQ(m.maxmemory, 950000u);
    EXPECT_GT(m.used_memory, m.maxmemory);
}

TEST(MemoryGuardInfo, Redis80AndValkey)
{
    RedisMemory m = info_ok(kRedis80AllkeysLfu);
    EXPECT_EQ(m.used_memory, 758680u);
    EXPECT_EQ(m.maxmemory, 2 * kGB);
    EXPECT_EQ(m.policy(), "allkeys-lfu");
    EXPECT_TRUE(m.not_counted_reported);
    m = info_ok(kValkey80AllkeysLfu);
    EXPECT_EQ(m.used_memory, 996760u);
    EXPECT_EQ(m.maxmemory, 2 * kGB);
    EXPECT_EQ(m.policy(), "allkeys-lfu");
    m = info_ok(kValkey91Default);
    EXPECT_EQ(m.used_memory, 939808u);
    EXPECT_EQ(m.maxmemory, 0u);
    EXPECT_EQ(m.policy(), "noeviction");
    EXPECT_EQ(m.not_counted_for_evict, 0u);
    EXPECT_TRUE(m.not_counted_reported);
}

TEST(MemoryGuardInfo, EachPolicy)
{
    for (const char* policy : kPolicies)
        EXPECT_EQ(info_ok(with_policy(kRedis70AllkeysLru, policy)).policy(), policy);
    // A policy not listed here is kept as written (a newer server may name one).
    EXPECT_EQ(info_ok(with_policy(kRedis70AllkeysLru, "allkeys-lrm")).policy(), "allkeys-lrm");
    std::string longest(31, 'x');
    EXPECT_EQ(info_ok(with_policy(kRedis70AllkeysLru, longest)).policy(), longest);
}

TEST(MemoryGuardInfo, LineEnds)
{
    // A bare LF is taken as a line end too; a last line without one is read.
    std::string lf = kRedis70AofNearFull;
    for (std::size_t at; (at = lf.find("\r\n")) != std::string::npos;)
        lf.erase(at, 1);
    RedisMemory m = info_ok(lf);
    EXPECT_EQ(m.used_memory, 998360u);
    EXPECT_EQ(m.not_counted_for_evict, 64u);
    EXPECT_EQ(m.policy(), "noeviction");
    m = info_ok("used_memory:5\r\nmaxmemory:7");
    EXPECT_EQ(m.used_memory, 5u);
    EXPECT_EQ(m.maxmemory, 7u);
    m = info_ok("\r\n\r\n# Memory\r\n\r\nmaxmemory:7\r\n\r\nused_memory:5\r\n\r\n");
    EXPECT_EQ(m.used_memory, 5u);
    EXPECT_EQ(m.policy(), "");
}

TEST(MemoryGuardInfo, OtherSectionsAndFieldsIgnored)
{
    // The reply of a plain INFO: every section; only the memory fields count.
    std::string all = std::string("# Server\r\nredis_version:7.0.15\r\nexecutable:/usr/bin/redis-server\r\n\r\n") +
                      kRedis70AofNearFull + "\r\n# Keyspace\r\ndb0:keys=51,expires=0,avg_ttl=0\r\nnot a field\r\n";
    RedisMemory m = info_ok(all);
    EXPECT_EQ(m.used_memory, 998360u);
    EXPECT_EQ(m.maxmemory, 1000000u);
    // Fields whose names start like the ones read are other fields.
    EXPECT_TRUE(contains(info_error("used_memory_human:1K\r\nused_memory_peak:9\r\nmaxmemory:0\r\n"), "used_memory"));
    EXPECT_TRUE(
        contains(info_error("used_memory:9\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n"), "no maxmemory"));
    m = info_ok("used_memory:9\r\nmaxmemory:0\r\nmem_not_counted_for_evict_x:5\r\n");
    EXPECT_FALSE(m.not_counted_reported);
}

TEST(MemoryGuardInfo, NotCountedForEvictMissing)
{
    // A server that does not report mem_not_counted_for_evict (an old one, a Redis-compatible
    // one): taken as 0, and said so.
    RedisMemory m = info_ok(with_line(kRedis70AofNearFull, "mem_not_counted_for_evict", ""));
    EXPECT_FALSE(m.not_counted_reported);
    EXPECT_EQ(m.not_counted_for_evict, 0u);
    EXPECT_EQ(m.used_memory, 998360u);
    EXPECT_EQ(evaluate(size_limit(kGB), m, false).counted_bytes, 998360u);
}

TEST(MemoryGuardInfo, PolicyMissing)
{
    RedisMemory m = info_ok(with_line(kRedis70AofNearFull, "maxmemory_policy", ""));
    EXPECT_EQ(m.policy(), "");
    EXPECT_EQ(m.maxmemory, 1000000u);
}

TEST(MemoryGuardInfo, RefusesMissingFields)
{
    EXPECT_TRUE(contains(info_error(""), "no used_memory field"));
    EXPECT_TRUE(contains(info_error("# Memory\r\n"), "no used_memory field"));
    EXPECT_TRUE(contains(info_error(with_line(kRedis70Default, "used_memory", "")), "no used_memory field"));
    EXPECT_TRUE(contains(info_error(with_line(kRedis70Default, "maxmemory", "")), "no maxmemory field"));
    EXPECT_TRUE(contains(info_error("-ERR unknown command 'INFO'"), "no used_memory field"));
    EXPECT_TRUE(contains(info_error("used_memory:1\r\n"), "unexpected INFO memory reply: no maxmemory field"));
}

TEST(MemoryGuardInfo, RefusesMalformedFields)
{
    for (const char* bad : {"12x", "-1", "", " 12", "12 ", "1.5", "+12", "0x10", "18446744073709551616"}) {
        EXPECT_TRUE(contains(info_error(with_line(kRedis70Default, "used_memory", std::string("used_memory:") + bad)),
                             "used_memory is not an unsigned number"))
            << bad;
        EXPECT_TRUE(contains(info_error(with_line(kRedis70Default, "maxmemory", std::string("maxmemory:") + bad)),
                             "maxmemory is not an unsigned number"))
            << bad;
        EXPECT_TRUE(contains(info_error(with_line(kRedis70Default, "mem_not_counted_for_evict",
                                                  std::string("mem_not_counted_for_evict:") + bad)),
                             "mem_not_counted_for_evict is not an unsigned number"))
            << bad;
    }
    for (const std::string& bad : {std::string(""), std::string("no eviction"), std::string(32, 'x'),
                                   std::string("allkeys-lru\x01"), std::string("noeviction ")})
        EXPECT_TRUE(contains(info_error(with_policy(kRedis70Default, bad)), "maxmemory_policy is not a policy name"))
            << bad;
}

TEST(MemoryGuardInfo, LargestNumbers)
{
    RedisMemory m = info_ok("used_memory:18446744073709551615\r\nmaxmemory:18446744073709551615\r\n"
                            "mem_not_counted_for_evict:18446744073709551615\r\n");
    EXPECT_EQ(m.used_memory, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(m.maxmemory, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(m.not_counted_for_evict, std::numeric_limits<std::uint64_t>::max());
}

TEST(MemoryGuardInfo, RepeatedFieldLastWins)
{
    RedisMemory m = info_ok("used_memory:1\r\nmaxmemory:2\r\nused_memory:3\r\nmaxmemory_policy:allkeys-lru\r\n"
                            "maxmemory_policy:noeviction\r\n");
    EXPECT_EQ(m.used_memory, 3u);
    EXPECT_EQ(m.policy(), "noeviction");
}

// ---- evaluate: which limit applies ----

TEST(MemoryGuardEvaluate, DefaultVerdictIsUnlimited)
{
    expect_unlimited(MemoryVerdict{}, LimitBasis::Off);
}

TEST(MemoryGuardEvaluate, OffNeverLimits)
{
    MemoryLimit off = limit_ok("off");
    for (const char* reply : {kRedis70Default, kRedis70AllkeysLru, kRedis70AofNearFull, kRedis70OverMaxmemory}) {
        for (bool held_before : {false, true}) {
            MemoryVerdict v = evaluate(off, info_ok(reply), held_before);
            expect_unlimited(v, LimitBasis::Off);
            EXPECT_GT(v.counted_bytes, 0u);
        }
    }
}

TEST(MemoryGuardEvaluate, FractionNeedsMaxmemory)
{
    // maxmemory 0: a fraction of it is no limit; only a size works there.
    for (const char* reply : {kRedis70Default, kValkey91Default}) {
        RedisMemory m = info_ok(reply);
        expect_unlimited(evaluate(limit_ok("0.8"), m, false), LimitBasis::NoMaxmemory);
        expect_unlimited(evaluate(limit_ok("1"), m, true), LimitBasis::NoMaxmemory);
        MemoryVerdict v = evaluate(limit_ok("512MB"), m, false);
        EXPECT_EQ(v.basis, LimitBasis::Size);
        EXPECT_TRUE(v.limited);
        EXPECT_EQ(v.limit_bytes, 512 * kMB);
        EXPECT_FALSE(v.evicts_jobs);
    }
    // Whatever the policy.
    expect_unlimited(evaluate(limit_ok("0.8"), memory_of(100, 0, "allkeys-lru"), false), LimitBasis::NoMaxmemory);
}

TEST(MemoryGuardEvaluate, FractionIgnoredUnlessNoeviction)
{
    // A Redis that evicts makes room by evicting: a fraction does not apply under allkeys-lru.
    MemoryVerdict v = evaluate(limit_ok("0.8"), info_ok(kRedis70AllkeysLru), false);
    expect_unlimited(v, LimitBasis::PolicyNotNoeviction);
    EXPECT_EQ(v.counted_bytes, 963864u);
    EXPECT_TRUE(v.evicts_jobs);
    // Nor under any other policy but noeviction, nor when the reply names none.
    for (const char* policy : kPolicies) {
        RedisMemory m = memory_of(900, 1000, policy);
        MemoryVerdict f = evaluate(limit_ok("0.8"), m, true);
        if (std::string(policy) == "noeviction") {
            EXPECT_EQ(f.basis, LimitBasis::Fraction);
            EXPECT_EQ(f.limit_bytes, 800u);
            EXPECT_TRUE(f.held);
        } else {
            expect_unlimited(f, LimitBasis::PolicyNotNoeviction);
        }
    }
    RedisMemory unnamed = info_ok("used_memory:900\r\nmaxmemory:1000\r\n");
    expect_unlimited(evaluate(limit_ok("0.8"), unnamed, false), LimitBasis::PolicyNotNoeviction);
    expect_unlimited(evaluate(limit_ok("0.8"), memory_of(900, 1000, "allkeys-lrm"), false),
                     LimitBasis::PolicyNotNoeviction);
}

TEST(MemoryGuardEvaluate, FractionAppliedUnderNoeviction)
{
    // Redis 7.0 near its maxmemory of 1000000: counted = 998360 - 64.
    RedisMemory m = info_ok(kRedis70AofNearFull);
    MemoryVerdict v = evaluate(limit_ok("0.8"), m, false);
    EXPECT_EQ(v.basis, LimitBasis::Fraction);
    EXPECT_TRUE(v.limited);
    EXPECT_EQ(v.limit_bytes, 800000u);
    EXPECT_EQ(v.resume_below, 720000u);
    EXPECT_EQ(v.counted_bytes, 998296u);
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    EXPECT_DOUBLE_EQ(v.ratio, 998296.0 / 800000.0);
    EXPECT_FALSE(v.evicts_jobs);
    // The whole of maxmemory: 1704 bytes of room left.
    v = evaluate(limit_ok("1"), m, false);
    EXPECT_EQ(v.limit_bytes, 1000000u);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 1704u);
    EXPECT_DOUBLE_EQ(v.ratio, 0.998296);
    EXPECT_EQ(bytes_to_send(1000, v), 1000u);
    EXPECT_EQ(bytes_to_send(5000, v), 1704u);
    // Above maxmemory (CONFIG SET maxmemory lower than used): held, ratio above 1.
    v = evaluate(limit_ok("1"), info_ok(kRedis70OverMaxmemory), false);
    EXPECT_EQ(v.limit_bytes, 950000u);
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    EXPECT_GT(v.ratio, 1.0);
    EXPECT_EQ(bytes_to_send(1, v), 0u);
}

TEST(MemoryGuardEvaluate, FractionToTheByte)
{
    // floor(fraction * maxmemory), exact where a double product would land a byte short.
    EXPECT_EQ(evaluate(fraction_limit(0.29), memory_of(0, 100), false).limit_bytes, 29u);
    EXPECT_EQ(evaluate(fraction_limit(0.07), memory_of(0, 100), false).limit_bytes, 7u);
    EXPECT_EQ(evaluate(limit_ok("0.8"), memory_of(0, 104857600), false).limit_bytes, 83886080u);
    EXPECT_EQ(evaluate(limit_ok("0.7"), memory_of(0, 1000000000), false).limit_bytes, 700000000u);
    EXPECT_EQ(evaluate(limit_ok("0.8"), memory_of(0, 2 * kGB), false).limit_bytes, 1717986918u);
    EXPECT_EQ(evaluate(limit_ok(".5"), memory_of(0, 3), false).limit_bytes, 1u);
    const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
    EXPECT_EQ(evaluate(limit_ok("1"), memory_of(0, top), false).limit_bytes, top);
    EXPECT_EQ(evaluate(limit_ok("0.5"), memory_of(0, top), false).limit_bytes, top / 2);
    // Never a limit of 0 bytes.
    EXPECT_EQ(evaluate(limit_ok("0.5"), memory_of(0, 1), false).limit_bytes, 1u);
    EXPECT_EQ(evaluate(limit_ok("0.000001"), memory_of(0, 1000), false).limit_bytes, 1u);
}

TEST(MemoryGuardEvaluate, SizeAppliesWhateverThePolicy)
{
    for (const char* policy : kPolicies) {
        for (std::uint64_t maxmemory : {std::uint64_t{0}, std::uint64_t{100}, 4 * kGB}) {
            MemoryVerdict v = evaluate(limit_ok("1kB"), memory_of(512, maxmemory, policy), false);
            EXPECT_EQ(v.basis, LimitBasis::Size) << policy;
            EXPECT_TRUE(v.limited);
            EXPECT_EQ(v.limit_bytes, 1024u);
            EXPECT_EQ(v.room_bytes, 512u);
            EXPECT_DOUBLE_EQ(v.ratio, 0.5);
        }
    }
    // Captured servers: allkeys-lfu on Valkey 8 and Redis 8, 2GB maxmemory, a 512MB size.
    for (const char* reply : {kValkey80AllkeysLfu, kRedis80AllkeysLfu}) {
        RedisMemory m = info_ok(reply);
        MemoryVerdict v = evaluate(limit_ok("512MB"), m, false);
        EXPECT_EQ(v.basis, LimitBasis::Size);
        EXPECT_EQ(v.limit_bytes, 512 * kMB);
        EXPECT_EQ(v.room_bytes, 512 * kMB - m.used_memory);
        EXPECT_DOUBLE_EQ(v.ratio, static_cast<double>(m.used_memory) / (512.0 * kMB));
        EXPECT_TRUE(v.evicts_jobs);
        expect_unlimited(evaluate(limit_ok("0.8"), m, false), LimitBasis::PolicyNotNoeviction);
    }
    // A size above maxmemory is taken as written.
    EXPECT_EQ(evaluate(limit_ok("1GB"), memory_of(5, 1000), false).limit_bytes, kGB);
    // A Size built by hand with 0 bytes counts as 1.
    EXPECT_EQ(evaluate(size_limit(0), memory_of(5, 0), false).limit_bytes, 1u);
}

TEST(MemoryGuardEvaluate, EvictionPolicyLosesJobs)
{
    // Only allkeys-* with a maxmemory evicts jobbuf's keys (they carry no TTL: volatile-* never
    // touches them).
    for (const char* policy : kPolicies) {
        bool allkeys = std::string(policy).rfind("allkeys-", 0) == 0;
        EXPECT_EQ(evaluate(limit_ok("off"), memory_of(1, 100, policy), false).evicts_jobs, allkeys) << policy;
        EXPECT_EQ(evaluate(limit_ok("1GB"), memory_of(1, 100, policy), false).evicts_jobs, allkeys) << policy;
        EXPECT_FALSE(evaluate(limit_ok("off"), memory_of(1, 0, policy), false).evicts_jobs) << policy;
    }
    EXPECT_TRUE(evaluate(limit_ok("0.8"), memory_of(1, 100, "allkeys-lrm"), false).evicts_jobs);
    EXPECT_FALSE(evaluate(limit_ok("0.8"), memory_of(1, 100, "volatile-lrm"), false).evicts_jobs);
    EXPECT_FALSE(evaluate(limit_ok("0.8"), info_ok("used_memory:1\r\nmaxmemory:100\r\n"), false).evicts_jobs);
    EXPECT_TRUE(evaluate(limit_ok("off"), info_ok(kRedis70AllkeysLru), false).evicts_jobs);
    EXPECT_FALSE(evaluate(limit_ok("off"), info_ok(kRedis70Default), false).evicts_jobs);
    EXPECT_FALSE(evaluate(limit_ok("off"), info_ok(kRedis70AofNearFull), false).evicts_jobs);
}

// ---- evaluate: counted memory, hold, room, ratio ----

TEST(MemoryGuardEvaluate, CountedLeavesOutWhatRedisDoesNotCount)
{
    MemoryVerdict v = evaluate(limit_ok("950B"), memory_of(1000, 0, "noeviction", 100), false);
    EXPECT_EQ(v.counted_bytes, 900u);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 50u);
    // Never below 0.
    v = evaluate(limit_ok("950B"), memory_of(100, 0, "noeviction", 1000), false);
    EXPECT_EQ(v.counted_bytes, 0u);
    EXPECT_EQ(v.room_bytes, 950u);
    EXPECT_DOUBLE_EQ(v.ratio, 0.0);
    v = evaluate(limit_ok("950B"), memory_of(100, 0, "noeviction", 100), false);
    EXPECT_EQ(v.counted_bytes, 0u);
}

TEST(MemoryGuardEvaluate, HoldsAtTheLimit)
{
    MemoryLimit limit = limit_ok("1000B");
    MemoryVerdict v = evaluate(limit, memory_of(999), false);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 1u);
    v = evaluate(limit, memory_of(1000), false);  // 100 %: held
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    EXPECT_DOUBLE_EQ(v.ratio, 1.0);
    v = evaluate(limit, memory_of(5000), false);
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    EXPECT_DOUBLE_EQ(v.ratio, 5.0);
    // Not held before, under the limit: room up to the limit, even in the 90-100 % band.
    v = evaluate(limit, memory_of(950), false);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 50u);
    EXPECT_DOUBLE_EQ(v.ratio, 0.95);
}

TEST(MemoryGuardEvaluate, Hysteresis)
{
    MemoryLimit limit = limit_ok("1000B");
    EXPECT_EQ(evaluate(limit, memory_of(0), false).resume_below, 900u);
    // Held at 100 %, still held at 95 % and at exactly 90 %, released below 90 %.
    EXPECT_TRUE(evaluate(limit, memory_of(1000), false).held);
    MemoryVerdict v = evaluate(limit, memory_of(950), true);
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    EXPECT_DOUBLE_EQ(v.ratio, 0.95);
    EXPECT_EQ(bytes_to_send(10, v), 0u);
    v = evaluate(limit, memory_of(900), true);
    EXPECT_TRUE(v.held);
    EXPECT_EQ(v.room_bytes, 0u);
    v = evaluate(limit, memory_of(899), true);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 101u);
    EXPECT_EQ(bytes_to_send(500, v), 101u);
    EXPECT_FALSE(evaluate(limit, memory_of(0), true).held);
    // Still held above the limit.
    EXPECT_TRUE(evaluate(limit, memory_of(1200), true).held);
}

TEST(MemoryGuardEvaluate, HysteresisOverSuccessiveReadings)
{
    // The caller keeps the last verdict's `held` per node and passes it to the next reading.
    MemoryLimit limit = limit_ok("1000B");
    struct Reading {
        std::uint64_t used;
        bool held;
    };
    const Reading readings[] = {{500, false}, {999, false}, {1000, true}, {990, true},  {950, true},
                                {901, true},  {900, true},  {899, false}, {950, false}, {999, false},
                                {1001, true}, {700, false}, {1000, true}};
    bool held = false;
    for (const Reading& r : readings) {
        held = evaluate(limit, memory_of(r.used), held).held;
        EXPECT_EQ(held, r.held) << "used " << r.used;
    }
}

TEST(MemoryGuardEvaluate, HysteresisUnderAFraction)
{
    // maxmemory 1000000 under noeviction, limit 0.8: held from 800000, released below 720000.
    MemoryLimit limit = limit_ok("0.8");
    EXPECT_FALSE(evaluate(limit, memory_of(799999, 1000000), false).held);
    EXPECT_TRUE(evaluate(limit, memory_of(800000, 1000000), false).held);
    EXPECT_TRUE(evaluate(limit, memory_of(760000, 1000000), true).held);
    EXPECT_TRUE(evaluate(limit, memory_of(720000, 1000000), true).held);
    MemoryVerdict v = evaluate(limit, memory_of(719999, 1000000), true);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 80001u);
    // The not-counted part is left out before comparing: 800063 used with 64 not counted.
    EXPECT_FALSE(evaluate(limit, memory_of(800063, 1000000, "noeviction", 64), false).held);
    EXPECT_TRUE(evaluate(limit, memory_of(800064, 1000000, "noeviction", 64), false).held);
}

TEST(MemoryGuardEvaluate, HoldEndsWhenNoLimitApplies)
{
    // Held before, then the policy changes, maxmemory goes to 0 or the guard is turned off.
    EXPECT_FALSE(evaluate(limit_ok("0.8"), memory_of(900, 1000, "allkeys-lru"), true).held);
    EXPECT_FALSE(evaluate(limit_ok("0.8"), memory_of(900, 0), true).held);
    EXPECT_FALSE(evaluate(limit_ok("off"), memory_of(900, 1000), true).held);
}

TEST(MemoryGuardEvaluate, ResumeThresholdRoundsUp)
{
    // 90 % of 1001 is 900.9: 900 is below it, 901 is not.
    MemoryLimit limit = size_limit(1001);
    EXPECT_EQ(evaluate(limit, memory_of(0), false).resume_below, 901u);
    EXPECT_FALSE(evaluate(limit, memory_of(900), true).held);
    EXPECT_TRUE(evaluate(limit, memory_of(901), true).held);
    EXPECT_EQ(evaluate(size_limit(1), memory_of(0), false).resume_below, 1u);
    EXPECT_EQ(evaluate(size_limit(10), memory_of(0), false).resume_below, 9u);
    EXPECT_EQ(evaluate(size_limit(19), memory_of(0), false).resume_below, 18u);  // 17.1
    // No overflow at the largest limits.
    EXPECT_EQ(evaluate(size_limit(kInt64Max), memory_of(0), false).resume_below, 8301034833169298227u);
    const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
    MemoryVerdict v = evaluate(limit_ok("1"), memory_of(top, top), true);
    EXPECT_EQ(v.resume_below, 16602069666338596454u);  // ceil(0.9 * (2^64 - 1))
    EXPECT_TRUE(v.held);
    v = evaluate(limit_ok("1"), memory_of(0, top), false);
    EXPECT_EQ(v.room_bytes, top);
    EXPECT_EQ(bytes_to_send(12345, v), 12345u);
}

TEST(MemoryGuardEvaluate, LimitOfOneByte)
{
    MemoryVerdict v = evaluate(limit_ok("1B"), memory_of(0), false);
    EXPECT_FALSE(v.held);
    EXPECT_EQ(v.room_bytes, 1u);
    EXPECT_TRUE(evaluate(limit_ok("1B"), memory_of(1), false).held);
    EXPECT_FALSE(evaluate(limit_ok("1B"), memory_of(0), true).held);
}

// ---- what the drain may send ----

TEST(MemoryGuardSend, JobExceedsLimit)
{
    MemoryVerdict v = evaluate(limit_ok("1000B"), memory_of(100), false);
    EXPECT_FALSE(job_exceeds_limit(0, v));
    EXPECT_FALSE(job_exceeds_limit(999, v));
    EXPECT_FALSE(job_exceeds_limit(1000, v));  // as large as the limit: not larger
    EXPECT_TRUE(job_exceeds_limit(1001, v));
    EXPECT_TRUE(job_exceeds_limit(std::numeric_limits<std::size_t>::max(), v));
    // Judged against the limit, not the room: a job larger than the room waits, it is not dead.
    EXPECT_FALSE(job_exceeds_limit(950, v));
    EXPECT_EQ(v.room_bytes, 900u);
    // Held or not makes no difference.
    MemoryVerdict held = evaluate(limit_ok("1000B"), memory_of(2000), false);
    ASSERT_TRUE(held.held);
    EXPECT_FALSE(job_exceeds_limit(1000, held));
    EXPECT_TRUE(job_exceeds_limit(1001, held));
    // No limit: no job exceeds it.
    EXPECT_FALSE(job_exceeds_limit(kGB, evaluate(limit_ok("off"), memory_of(100), false)));
    EXPECT_FALSE(job_exceeds_limit(kGB, evaluate(limit_ok("0.8"), memory_of(100, 1000, "allkeys-lru"), false)));
    EXPECT_FALSE(job_exceeds_limit(kGB, evaluate(limit_ok("0.8"), memory_of(100, 0), false)));
    // A fraction's limit in bytes.
    MemoryVerdict f = evaluate(limit_ok("0.8"), memory_of(100, 1000), false);
    EXPECT_FALSE(job_exceeds_limit(800, f));
    EXPECT_TRUE(job_exceeds_limit(801, f));
}

TEST(MemoryGuardSend, BytesToSend)
{
    MemoryVerdict v = evaluate(limit_ok("1000B"), memory_of(600), false);
    ASSERT_EQ(v.room_bytes, 400u);
    EXPECT_EQ(bytes_to_send(0, v), 0u);
    EXPECT_EQ(bytes_to_send(1, v), 1u);
    EXPECT_EQ(bytes_to_send(399, v), 399u);
    EXPECT_EQ(bytes_to_send(400, v), 400u);
    EXPECT_EQ(bytes_to_send(401, v), 400u);
    EXPECT_EQ(bytes_to_send(std::numeric_limits<std::size_t>::max(), v), 400u);
    // Held: nothing.
    MemoryVerdict held = evaluate(limit_ok("1000B"), memory_of(950), true);
    ASSERT_TRUE(held.held);
    EXPECT_EQ(bytes_to_send(0, held), 0u);
    EXPECT_EQ(bytes_to_send(1, held), 0u);
    EXPECT_EQ(bytes_to_send(kMB, held), 0u);
    // No limit: all of it.
    for (const MemoryVerdict& none :
         {evaluate(limit_ok("off"), memory_of(kGB), true), evaluate(limit_ok("0.8"), info_ok(kRedis70Default), true),
          evaluate(limit_ok("0.8"), info_ok(kRedis70AllkeysLru), true)}) {
        EXPECT_EQ(bytes_to_send(0, none), 0u);
        EXPECT_EQ(bytes_to_send(kGB, none), kGB);
    }
}

TEST(MemoryGuardSend, ParseEvaluateSendOnACapturedServer)
{
    // jobbuf's default 0.8 on a noeviction Redis with maxmemory 1000000: at 998296 counted bytes it
    // is held; a size of 1MB leaves 50280 bytes of room; a 60000-byte batch sends 50280 of it.
    RedisMemory m = info_ok(kRedis70AofNearFull);
    EXPECT_EQ(bytes_to_send(60000, evaluate(limit_ok("0.8"), m, false)), 0u);
    MemoryVerdict v = evaluate(limit_ok("1MB"), m, false);
    EXPECT_EQ(v.room_bytes, 1048576u - 998296u);
    EXPECT_EQ(bytes_to_send(60000, v), 50280u);
    EXPECT_FALSE(job_exceeds_limit(1048576, v));
    EXPECT_TRUE(job_exceeds_limit(1048577, v));
}

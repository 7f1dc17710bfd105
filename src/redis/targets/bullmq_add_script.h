// Pure C++ regime: the Lua script the `bullmq` target sends with EVAL, once per batch: it adds
// the batch's jobs to one BullMQ queue exactly as BullMQ's own Queue.add does. This is the only
// copy of the script: test/consumers/node/bullmq_format_check.js reads it from here (the raw string
// of kBullmqAddScript) to compare it with Queue.add; the script's header says what it does,
// and docs/formats/bullmq.md how it was verified.
#pragma once
#include <string_view>

namespace jobbuf::redis {

inline constexpr std::string_view kBullmqAddScript = R"lua(--[[
  jobbuf's reference script for the `bullmq` target (docs/formats/bullmq.md): adds a batch of
  jobs to one BullMQ queue exactly as BullMQ 5.81.5's Queue.add / addBulk would
  (addStandardJob-9.lua, addPrioritizedJob-9.lua, addDelayedJob-6.lua), for jobs that carry their
  own id. Sent with EVAL (never EVALSHA: inside MULTI an unknown sha fails at EXEC while the
  unit's other commands, the batch marker included, still apply).

  KEYS[1] wait  KEYS[2] paused  KEYS[3] meta  KEYS[4] active  KEYS[5] prioritized
  KEYS[6] delayed  KEYS[7] events  KEYS[8] marker  KEYS[9] pc  KEYS[10] id
  ARGV[1] key prefix of a job hash ("<prefix>:<queue>:")
  then 7 arguments per job: id, name, data (JSON text), opts (JSON text), timestamp (epoch ms),
  delay (ms; > 0 makes a delayed job, due at timestamp + delay), priority (0 = none):
  ARGV is {prefix, id1, name1, data1, opts1, ts1, delay1, prio1, id2, ...}

  Returns {added, duplicated}. Every key's type is checked before the first write, so the script
  either refuses the whole batch with an error and writes nothing, or writes every job.
]]
local rcall = redis.call
local waitKey, pausedKey, metaKey, activeKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prioritizedKey, delayedKey, eventsKey, markerKey, pcKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local idKey = KEYS[10]
local prefix = ARGV[1]

local expected = {
  {waitKey, "list"}, {pausedKey, "list"}, {metaKey, "hash"}, {activeKey, "list"},
  {prioritizedKey, "zset"}, {delayedKey, "zset"}, {eventsKey, "stream"}, {markerKey, "zset"},
  {pcKey, "string"}, {idKey, "string"},
}
for _, kt in ipairs(expected) do
  local t = rcall("TYPE", kt[1])["ok"]
  if t ~= "none" and t ~= kt[2] then
    return redis.error_reply("WRONGTYPE jobbuf: " .. kt[1] .. " is a " .. t .. ", BullMQ needs a " .. kt[2])
  end
end

-- getOrSetMaxEvents
local maxEvents = rcall("HGET", metaKey, "opts.maxLenEvents")
if not maxEvents then
  maxEvents = 10000
  rcall("HSET", metaKey, "opts.maxLenEvents", maxEvents)
end

-- getTargetQueueList / isQueuePausedOrMaxed, read once: nothing in this script changes them
local attrs = rcall("HMGET", metaKey, "paused", "concurrency")
local paused = attrs[1] ~= false
local maxed = false
if not paused and attrs[2] then
  maxed = rcall("LLEN", activeKey) >= tonumber(attrs[2])
end
local pausedOrMaxed = paused or maxed
local targetList = paused and pausedKey or waitKey

-- getDelayedScore: the job's due time in ms, times 4096, plus a sequence within that ms
local function delayedScore(dueMs)
  local minScore = dueMs * 0x1000
  local maxScore = (dueMs + 1) * 0x1000 - 1
  local result = rcall("ZREVRANGEBYSCORE", delayedKey, maxScore, minScore, "WITHSCORES", "LIMIT", 0, 1)
  local current = tonumber(result[2])
  if current ~= nil then
    if current >= maxScore then return maxScore end
    return current + 1
  end
  return minScore
end

local added, duplicated = 0, 0
for i = 2, #ARGV, 7 do
  local jobId, name, data, opts = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local timestamp, delay, priority = ARGV[i + 4], tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  local jobKey = prefix .. jobId
  -- BullMQ counts every add in `id`, custom ids and duplicates included
  rcall("INCR", idKey)
  if rcall("EXISTS", jobKey) == 1 then
    -- handleDuplicatedJob (a job without a parent): nothing changes but the event
    rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", jobId)
    duplicated = duplicated + 1
  else
    -- storeJob
    rcall("HMSET", jobKey, "name", name, "data", data, "opts", opts, "timestamp", timestamp,
          "delay", delay, "priority", priority)
    rcall("XADD", eventsKey, "*", "event", "added", "jobId", jobId, "name", name)
    if delay > 0 then
      -- addDelayedJob + addDelayMarkerIfNeeded
      local due = tonumber(timestamp) + delay
      rcall("ZADD", delayedKey, delayedScore(due), jobId)
      rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "delayed", "jobId", jobId,
            "delay", due)
      local first = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
      if first[2] then rcall("ZADD", markerKey, tonumber(first[2]) / 0x1000, "1") end
    else
      if priority > 0 then
        -- addJobWithPriority
        local score = priority * 0x100000000 + rcall("INCR", pcKey) % 0x100000000
        rcall("ZADD", prioritizedKey, score, jobId)
      else
        rcall("LPUSH", targetList, jobId)
      end
      -- addBaseMarkerIfNeeded
      if not pausedOrMaxed then rcall("ZADD", markerKey, 0, "0") end
      rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId)
    end
    added = added + 1
  end
end
return {added, duplicated}
)lua";

}  // namespace jobbuf::redis

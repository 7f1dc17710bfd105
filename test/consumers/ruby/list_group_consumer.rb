# A tiny batch consumer for jobbuf's `delivery: 'group'` on the `list` target (used by
# test/e2e/list_group.sh): pops group messages {"group_id": "...", "ids": [...]} from Redis lists,
# reads each group with jobbuf_group over one persistent Postgres connection, and completes it with
# jobbuf_complete — what an application's bulk worker would do. Uses ruby-pg and redis-rb only.
#
#   REDIS_URL=redis://127.0.0.1:PORT/0 PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... \
#     ruby list_group_consumer.rb RUN_LOG KEY [KEY...]
#
# Environment:
#   JOBBUF_CRASH_ONCE_KEYS  comma-separated keys whose messages are abandoned (neither completed nor
#                           failed, as by a consumer killed mid-way) when they hold a job never seen
#                           before; the jobs are completed on a later delivery. Seen jobs live in
#                           the Redis hash jobbuf_e2e:list_crash_once (job id -> first group id).
#   JOBBUF_STOP_KEY         the consumer exits once this Redis key exists (default jobbuf_e2e:stop).
#
# Every message appends one JSON line to RUN_LOG: the raw message, the group read back (id, payload,
# attempts, last_error), what the consumer did (kind: completed / abandoned / empty), how many jobs
# jobbuf_complete took, and for a re-delivered group what the stale group id still does.
# A group read empty is read once more 200 ms later ("reread"): a group that appears then was
# pushed to Redis before the claim that created it was visible (committed) in Postgres.
require "json"
require "pg"
require "redis"

log_path = ARGV.shift or abort("usage: list_group_consumer.rb RUN_LOG KEY [KEY...]")
keys = ARGV
abort("usage: list_group_consumer.rb RUN_LOG KEY [KEY...]") if keys.empty?
crash_once = ENV.fetch("JOBBUF_CRASH_ONCE_KEYS", "").split(",")
stop_key = ENV.fetch("JOBBUF_STOP_KEY", "jobbuf_e2e:stop")
seen_hash = "jobbuf_e2e:list_crash_once"

redis = Redis.new(url: ENV.fetch("REDIS_URL"))
pg = ENV["JOBBUF_DATABASE_URL"] ? PG.connect(ENV["JOBBUF_DATABASE_URL"]) : PG.connect

read_group = lambda do |group_id|
  pg.exec_params("SELECT g.id, g.payload, g.attempts, j.last_error FROM jobbuf_group($1) g" \
                 " LEFT JOIN jobbuf.jobs j ON j.id = g.id ORDER BY g.id", [group_id]).map do |r|
    { "id" => r["id"].to_i, "payload" => JSON.parse(r["payload"]), "attempts" => r["attempts"].to_i,
      "last_error" => r["last_error"] }
  end
end

record = lambda do |line|
  File.open(log_path, "a") do |f|
    f.flock(File::LOCK_EX)
    f.puts(JSON.generate(line.merge("consumer" => Process.pid, "at" => Time.now.to_f)))
  end
end

until redis.exists?(stop_key)
  key, raw = redis.blpop(*keys, timeout: 1)
  next unless raw
  msg = JSON.parse(raw)
  group_id = msg["group_id"]
  line = { "key" => key, "raw" => raw, "group_id" => group_id, "ids" => msg["ids"] }
  rows = read_group.call(group_id)
  if rows.empty?
    sleep 0.2
    rows = read_group.call(group_id)
    line["reread"] = rows.size
  end
  line["jobs"] = rows
  if rows.empty?
    record.call(line.merge("kind" => "empty"))
    next
  end
  if crash_once.include?(key)
    first_seen = rows.select { |r| redis.hsetnx(seen_hash, r["id"].to_s, group_id) }
    unless first_seen.empty?
      record.call(line.merge("kind" => "abandoned"))
      next
    end
    earlier = redis.hmget(seen_hash, *rows.map { |r| r["id"].to_s }).compact.uniq - [group_id]
    line["stale"] = earlier.map do |old|
      { "group_id" => old,
        "complete" => pg.exec_params("SELECT jobbuf_complete($1)", [old]).getvalue(0, 0).to_i,
        "group_rows" => pg.exec_params("SELECT count(*) FROM jobbuf_group($1)", [old]).getvalue(0, 0).to_i }
    end
  end
  done = pg.exec_params("SELECT jobbuf_complete($1)", [group_id]).getvalue(0, 0).to_i
  record.call(line.merge("kind" => "completed", "completed" => done))
end
pg.close

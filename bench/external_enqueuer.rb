# The comparison for jobbuf's drain: the "staged job drain" pattern as a Rails team would write
# it outside Postgres. A loop that, in one transaction, selects a batch of committed rows from a
# plain staged_jobs table FOR UPDATE SKIP LOCKED, pushes them to Redis with one pipelined bulk
# push, deletes them and commits; it stops when the table is empty and prints
# "<jobs> <seconds>".
#
#   ruby bench/external_enqueuer.rb list|sidekiq QUEUE [BATCH]
#   (PGHOST/PGPORT/PGUSER/PGDATABASE select Postgres, REDIS_PORT the local Redis)
#
# list: RPUSH ext:<queue> <payload>...  (jobbuf's list target pushes the payload text as stored)
# sidekiq: SADD queues <queue> + LPUSH queue:<queue> <job>..., each job the payload plus queue,
# jid, retry, created_at and enqueued_at, as Sidekiq::Client would build it.
require "pg"
require "redis"
require "json"
require "securerandom"

mode, queue, batch = ARGV[0], ARGV[1], (ARGV[2] || 1000).to_i
abort "usage: external_enqueuer.rb list|sidekiq QUEUE [BATCH]" unless %w[list sidekiq].include?(mode) && queue

pg = PG.connect
redis = Redis.new(host: "127.0.0.1", port: Integer(ENV.fetch("REDIS_PORT")))
pg.prepare("take", <<~SQL)
  SELECT id, payload::text, extract(epoch FROM staged_at)::float8
  FROM bench.staged_jobs
  WHERE queue = $1 AND group_id IS NULL AND run_at <= now()
  ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
SQL
pg.prepare("delete", "DELETE FROM bench.staged_jobs WHERE id = ANY ($1::bigint[])")

list_key = "ext:#{queue}"
queue_key = "queue:#{queue}"
total = 0
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
loop do
  pg.exec("BEGIN")
  rows = pg.exec_prepared("take", [queue, batch]).values
  if rows.empty?
    pg.exec("COMMIT")
    break
  end
  ids = rows.map(&:first)
  if mode == "list"
    payloads = rows.map { |r| r[1] }
    redis.pipelined { |p| p.rpush(list_key, payloads) }
  else
    now = Time.now.to_f
    jobs = rows.map do |_id, payload, staged_at|
      job = JSON.parse(payload)
      job["queue"] = queue
      job["jid"] = SecureRandom.hex(12)
      job["retry"] = true unless job.key?("retry")
      job["created_at"] = staged_at.to_f
      job["enqueued_at"] = now
      JSON.generate(job)
    end
    redis.pipelined do |p|
      p.sadd?("queues", queue)
      p.lpush(queue_key, jobs)
    end
  end
  pg.exec_prepared("delete", ["{#{ids.join(',')}}"])
  pg.exec("COMMIT")
  total += rows.size
end
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
puts format("%d %.6f", total, elapsed)

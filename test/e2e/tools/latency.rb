# Commit-to-Redis latency of single-job transactions (a measurement, not a test: it prints
# figures and asserts nothing about them). For each of N jobs: BEGIN; jobbuf_stage(...); then the
# clock starts right before COMMIT and stops when BLPOP on the queue's Redis list returns the job.
#
#   ruby latency.rb --pg "host=... port=... dbname=... user=..." --redis-port 6379 [--n 500] [--queue lat]
require "optparse"
require "pg"
require "redis"
require "json"

opts = { n: 500, queue: "latency", pg: nil, redis_host: "127.0.0.1", redis_port: 6379 }
OptionParser.new do |o|
  o.on("--pg CONNINFO") { |v| opts[:pg] = v }
  o.on("--redis-host HOST") { |v| opts[:redis_host] = v }
  o.on("--redis-port PORT", Integer) { |v| opts[:redis_port] = v }
  o.on("--n N", Integer) { |v| opts[:n] = v }
  o.on("--queue NAME") { |v| opts[:queue] = v }
end.parse!

pg = PG.connect(opts[:pg])
redis = Redis.new(host: opts[:redis_host], port: opts[:redis_port], timeout: 10)
key = "jobbuf:#{opts[:queue]}"
clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

pg.exec_params("SELECT jobbuf_create_queue($1, 'list')", [opts[:queue]]) if
  pg.exec_params("SELECT 1 FROM jobbuf.queues WHERE name = $1", [opts[:queue]]).ntuples.zero?
redis.del(key)

pg.prepare("stage", "SELECT jobbuf_stage($1, $2::jsonb)")
samples = []
lost = 0
(opts[:n] + 10).times do |i|               # the first 10 warm up connections and plans
  pg.exec("BEGIN")
  pg.exec_prepared("stage", [opts[:queue], JSON.generate(n: i)])
  t0 = clock.call
  pg.exec("COMMIT")
  got = redis.blpop(key, timeout: 5)
  t1 = clock.call
  if got.nil? || JSON.parse(got[1])["n"] != i
    lost += 1
    next
  end
  samples << (t1 - t0) * 1000.0 if i >= 10
  sleep 0.002                                # an idle server between jobs
end

samples.sort!
pct = ->(p) { samples[[(p / 100.0 * samples.size).ceil - 1, 0].max] }
printf("commit-to-Redis latency, %d single-job transactions: p50 %.2f ms  p99 %.2f ms  max %.2f ms  (mean %.2f ms)%s\n",
       samples.size, pct.(50), pct.(99), samples.last, samples.sum / samples.size,
       lost.zero? ? "" : "  [#{lost} not received within 5 s]")
exit(lost.zero? ? 0 : 1)

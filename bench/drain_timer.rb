# Times one drain of pre-staged jobs and prints "<jobs> <seconds>".
#
#   ruby bench/drain_timer.rb jobbuf KEY COUNT [TIMEOUT]
#       jobbuf.jobs holds COUNT jobs staged while the worker was disabled; this enables the worker
#       (ALTER SYSTEM SET jobbuf.enabled = on; SELECT pg_reload_conf()) and polls LLEN KEY every
#       10 ms until it reaches COUNT (a tighter poll preempts the worker measurably on 2 cores). Fails after TIMEOUT seconds (default 600).
#   ruby bench/drain_timer.rb emptied COUNT [TIMEOUT]
#       the same, for jobs spread over several queues and Redis servers (a Redis Cluster): polls
#       every 10 ms until jobbuf.jobs is empty (the worker deletes a batch once Redis has it).
#   ruby bench/drain_timer.rb ceiling QUEUE list|sidekiq [BATCH]
#       the SQL-only ceiling: CALL bench.sql_ceiling (the worker's statement, BATCH rows per
#       transaction, nothing sent anywhere).
# PGHOST/PGPORT/PGUSER/PGDATABASE select Postgres, REDIS_PORT the local Redis.
require "pg"
require "redis"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

pg = PG.connect
case ARGV[0]
when "jobbuf"
  key, count, timeout = ARGV[1], Integer(ARGV[2]), Float(ARGV[3] || 600)
  redis = Redis.new(host: "127.0.0.1", port: Integer(ENV.fetch("REDIS_PORT")))
  start_len = redis.llen(key)
  pg.exec("ALTER SYSTEM SET jobbuf.enabled = on")
  t0 = now
  pg.exec("SELECT pg_reload_conf()")
  loop do
    n = redis.llen(key) - start_len
    if n >= count
      puts format("%d %.6f", n, now - t0)
      break
    end
    abort "drain_timer: only #{n} of #{count} jobs reached #{key} after #{timeout}s" if now - t0 > timeout
    sleep 0.01
  end
when "emptied"
  count, timeout = Integer(ARGV[1]), Float(ARGV[2] || 600)
  pg.exec("ALTER SYSTEM SET jobbuf.enabled = on")
  t0 = now
  pg.exec("SELECT pg_reload_conf()")
  until pg.exec("SELECT NOT EXISTS (SELECT FROM jobbuf.jobs) AS e")[0]["e"] == "t"
    abort "drain_timer: jobs still staged after #{timeout}s" if now - t0 > timeout
    sleep 0.01
  end
  puts format("%d %.6f", count, now - t0)
when "ceiling"
  queue, target, batch = ARGV[1], ARGV[2], Integer(ARGV[3] || 1000)
  t0 = now
  r = pg.exec_params("CALL bench.sql_ceiling($1, $2, $3)", [queue, batch, target == "sidekiq"])
  puts format("%d %.6f", r[0]["n_jobs"].to_i, now - t0)
else
  abort "usage: drain_timer.rb jobbuf KEY COUNT [TIMEOUT] | emptied COUNT [TIMEOUT] | ceiling QUEUE list|sidekiq [BATCH]"
end

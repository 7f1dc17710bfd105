# Benchmark of the Rails gem (`make bench` phase `activejob`, or on its own): jobs/s of
# `perform_later` inside a transaction that also creates a record, from ONE Ruby process, through
# the jobbuf gem's :jobbuf adapter (jobbuf_stage in the same transaction; the worker delivers to
# Redis after the commit) versus ActiveJob's own Sidekiq adapter (Sidekiq::Client pushes to Redis
# from inside the transaction). Rounds alternate the two; each prints its figure, then one row
# with the best of each. No Sidekiq server runs: both leave the jobs in Redis (cleared between runs).
#
#   PGHOST=... PGPORT=... PGUSER=... PGDATABASE=... REDIS_PORT=... ruby bench/activejob.rb
#   BENCH_AJ_SECONDS [5] each run; BENCH_AJ_ROUNDS [2]; BENCH_RESULTS: a file to append
#   activejob_jobbuf=, activejob_sidekiq= (bench/run.sh's results file)
$LOAD_PATH.unshift File.expand_path("../clients/ruby/lib", __dir__)
require "logger"
require "active_record"
require "active_job"
require "sidekiq"
require "active_job/queue_adapters/sidekiq_adapter"
require "jobbuf/active_job"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
SECONDS_PER_RUN = Float(ENV.fetch("BENCH_AJ_SECONDS", "5"))
ROUNDS = Integer(ENV.fetch("BENCH_AJ_ROUNDS", "2"))
QUEUE = "bench_aj".freeze

ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"],
                                        username: ENV["PGUSER"], database: ENV.fetch("PGDATABASE"))
ActiveRecord::Base.logger = nil
ActiveJob::Base.logger = Logger.new(nil)
Sidekiq.configure_client { |config| config.redis = { url: "redis://127.0.0.1:#{ENV.fetch("REDIS_PORT")}/0" } }

class BenchWidget < ActiveRecord::Base
  self.table_name = "bench_aj_widgets"
end

class BenchMailJob < ActiveJob::Base
  queue_as QUEUE

  def perform(*); end
end

connection = ActiveRecord::Base.connection
connection.execute("CREATE TABLE IF NOT EXISTS bench_aj_widgets (id bigserial PRIMARY KEY, email text NOT NULL)")
if connection.select_value("SELECT count(*) FROM jobbuf.queues WHERE name = '#{QUEUE}'").to_i.zero?
  connection.execute("SELECT jobbuf_create_queue('#{QUEUE}', 'sidekiq')")
end

def reset
  Sidekiq.redis { |redis| redis.unlink("queue:#{QUEUE}") }
  connection = ActiveRecord::Base.connection
  deadline = Time.now + 60
  sleep 0.05 until connection.select_value("SELECT count(*) FROM jobbuf.jobs WHERE queue = '#{QUEUE}'").to_i.zero? || Time.now > deadline
  Sidekiq.redis { |redis| redis.unlink("queue:#{QUEUE}") }
  connection.execute("TRUNCATE bench_aj_widgets")
  connection.execute("VACUUM ANALYZE bench_aj_widgets")
end

def one_transaction(n)
  ActiveRecord::Base.transaction do
    widget = BenchWidget.create!(email: "customer-#{n}@example.com")
    BenchMailJob.perform_later(widget.id, widget.email, { "plan" => "pro", "locale" => "en" })
  end
end

# Jobs/s of one_transaction over SECONDS_PER_RUN, after a short warm-up.
def measure(adapter)
  BenchMailJob.queue_adapter = adapter
  reset
  200.times { |n| one_transaction(n) }
  n = 0
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  deadline = started + SECONDS_PER_RUN
  while (now = Process.clock_gettime(Process::CLOCK_MONOTONIC)) < deadline
    100.times { one_transaction(n += 1) }
  end
  n / (now - started)
end

adapters = { "jobbuf" => ActiveJob::QueueAdapters::JobbufAdapter.new,
             "sidekiq" => ActiveJob::QueueAdapters::SidekiqAdapter.new }
best = Hash.new(0.0)
ROUNDS.times do |round|
  order = round.even? ? %w[jobbuf sidekiq] : %w[sidekiq jobbuf]
  order.each do |name|
    rate = measure(adapters[name])
    puts format("activejob round %d, %-7s: %.0f jobs/s", round + 1, name, rate)
    best[name] = [best[name], rate].max
  end
end
reset

puts format("perform_later in a transaction, 1 Ruby process: jobbuf %.0f jobs/s, ActiveJob Sidekiq adapter %.0f jobs/s (jobbuf/sidekiq %.2f)",
            best["jobbuf"], best["sidekiq"], best["jobbuf"] / best["sidekiq"])
if ENV["BENCH_RESULTS"]
  File.open(ENV["BENCH_RESULTS"], "a") do |f|
    f.puts "activejob_jobbuf=#{best["jobbuf"].round(1)}"
    f.puts "activejob_sidekiq=#{best["sidekiq"].round(1)}"
  end
end

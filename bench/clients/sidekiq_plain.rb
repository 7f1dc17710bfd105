# Benchmark of Jobbuf::Sidekiq (`make bench` phase `clients`): jobs/s from ONE Ruby process of an
# ActiveRecord transaction that inserts a row and calls perform_async on a plain Sidekiq job,
# with Jobbuf::Sidekiq's middleware (staged in the transaction; jobbuf's worker, running,
# delivers after the commit) versus Sidekiq's own push (to Redis from inside the transaction).
# Rounds alternate the two; prints each figure and key=value lines of the best.
#   PGHOST=... REDIS_URL=... ruby sidekiq_plain.rb [seconds=5] [rounds=2]
# Needs the jobbuf queue bench_clients_sq (sidekiq_queue "bench_clients") and the table
# bench_clients_users (bench/run.sh creates them).
$LOAD_PATH.unshift File.expand_path("../../clients/ruby/lib", __dir__)
require "logger"
require "active_record"
require "jobbuf/sidekiq"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
SECONDS_PER_RUN = Float(ARGV[0] || 5)
ROUNDS = Integer(ARGV[1] || 2)
ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"],
                                        username: ENV["PGUSER"], database: ENV.fetch("PGDATABASE"))
ActiveRecord::Base.logger = nil

class BenchUser < ActiveRecord::Base
  self.table_name = "bench_clients_users"
end

class BenchWelcomeJob
  include Sidekiq::Job
  sidekiq_options queue: "bench_clients"
  def perform(*); end
end

def one(n)
  ActiveRecord::Base.transaction do
    user = BenchUser.create!(email: "customer-#{n}@example.com")
    BenchWelcomeJob.perform_async(user.id, user.email, { "plan" => "pro" })
  end
end

def measure(name)
  Sidekiq.client_middleware { |chain| chain.remove(Jobbuf::Sidekiq::Middleware) }
  Sidekiq.client_middleware { |chain| chain.add(Jobbuf::Sidekiq::Middleware) } if name == "jobbuf"
  Sidekiq.redis { |r| r.unlink("queue:bench_clients") }
  ActiveRecord::Base.connection.execute("TRUNCATE bench_clients_users")
  50.times { |i| one(i) }
  n = 0
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  while (now = Process.clock_gettime(Process::CLOCK_MONOTONIC)) < started + SECONDS_PER_RUN
    20.times { one(n += 1) }
  end
  n / (now - started)
end

best = Hash.new(0.0)
ROUNDS.times do |round|
  (round.even? ? %w[jobbuf sidekiq] : %w[sidekiq jobbuf]).each do |name|
    rate = measure(name)
    puts format("sidekiq round %d, %-7s: %.0f jobs/s", round + 1, name, rate)
    best[name] = [best[name], rate].max
  end
end
best.each { |name, rate| puts "clients_sidekiq_#{name}=#{rate.round(1)}" }

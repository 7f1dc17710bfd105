# A tiny ActiveRecord + ActiveJob application (Rails components without Rails itself) for
# test/e2e/activejob_sidekiq.sh. The producer (produce.rb) and the unmodified Sidekiq server
# (`sidekiq -r this file`) both load it, as a Rails app and its Sidekiq process share their code:
# jobs go through the :jobbuf adapter, and Sidekiq runs them with ActiveJob's own JobWrapper.
# Every perform writes a row into job_runs (created by the test), with what Sidekiq itself
# parsed from the job it ran, so the test judges what the jobs actually did.
# Connects with libpq's environment (PGHOST, PGPORT, PGUSER, PGDATABASE); Sidekiq with REDIS_URL.
$LOAD_PATH.unshift File.expand_path("../../../clients/ruby/lib", __dir__)
require "logger"
require "active_record"
require "active_job"
require "global_id"
require "sidekiq"
require "active_job/queue_adapters/sidekiq_adapter"
require_relative "../sidekiq/current_job"
require "jobbuf/active_job"

# redis-rb 4.8 warns about Sidekiq 6.4's calling style on every fetch; keep the log readable
# (Sidekiq 7 and later use redis-client, without the Redis constant).
Redis.silence_deprecations = true if defined?(Redis) && Redis.respond_to?(:silence_deprecations=)

GlobalID.app = "jobbuf-e2e"
ActiveRecord::Base.include GlobalID::Identification unless ActiveRecord::Base < GlobalID::Identification
ActiveRecord::Base.establish_connection(adapter: "postgresql", host: ENV["PGHOST"], port: ENV["PGPORT"],
                                        username: ENV["PGUSER"], database: ENV.fetch("PGDATABASE"), pool: 10)
ActiveRecord::Base.logger = nil
ActiveJob::Base.logger = Logger.new(nil)
ActiveJob::Base.queue_adapter = :jobbuf

# Sidekiq's first retry comes 15-24 s after a failure; the application asks for 1 s (plus
# Sidekiq's own jitter) so the retried job runs while the test waits.
ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper.sidekiq_retry_in { |_count, _error| 1 }

module JobbufRailsE2E
  def self.sidekiq_job
    job = JobbufCurrentJob.hash
    job.slice("class", "wrapped", "queue", "jid", "retry", "retry_count")
  end

  # The hash argument RecordJob gets for job n: nested, with the usual JSON kinds.
  def self.hash_for(n)
    { "n" => n, "nested" => { "list" => [n, "x", nil, true, 1.5] }, "note" => "caf\u00e9 'quoted' \"too\"" }
  end
end

Sidekiq.configure_server do |config|
  # Poll the schedule and retry sets about once a second instead of every 5 s.
  # (Sidekiq 6 keeps these in Sidekiq.options; Sidekiq 7+ in the config object itself.)
  options = config.respond_to?(:options) ? config.options : config
  options[:average_scheduled_poll_interval] = 1
  options[:poll_interval_average] = 1
  config.server_middleware { |chain| chain.add JobbufCurrentJob::Middleware }
end

class Widget < ActiveRecord::Base
end

class JobRun < ActiveRecord::Base
end

class RecordJob < ActiveJob::Base
  queue_as :default

  # widget arrives as a GlobalID and is found again here.
  def perform(widget, n, str, hash)
    JobRun.create!(kind: "record", n: n, widget_id: widget.id, widget_n: widget.n, str: str, hash_arg: hash,
                   provider_job_id: provider_job_id.to_s, sidekiq: JobbufRailsE2E.sidekiq_job, ran_at: Time.now.to_f)
  end
end

# Fails on its first attempt (no earlier run recorded for the widget), succeeds on the next:
# the failure goes through Sidekiq's own retry set.
class FlakyJob < ActiveJob::Base
  queue_as :default

  def perform(widget)
    first = !JobRun.exists?(kind: "flaky", widget_id: widget.id)
    JobRun.create!(kind: "flaky", widget_id: widget.id, str: first ? "failed" : "succeeded",
                   provider_job_id: provider_job_id.to_s, sidekiq: JobbufRailsE2E.sidekiq_job, ran_at: Time.now.to_f)
    raise "jobbuf e2e: failing on purpose on the first attempt" if first
  end
end
